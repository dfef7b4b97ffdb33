"""Runnable studies of the papers (``optiq experiment``): a CSV table and a PNG figure each."""

from . import application_studies, fattree_study, studies
from .registry import STUDIES, Study, run_study

__all__ = ["STUDIES", "Study", "run_study", "studies", "fattree_study", "application_studies"]
