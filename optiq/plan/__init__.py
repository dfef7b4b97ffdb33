"""A plan: how every job's bytes are split over paths (:mod:`.plan`, with its JSON file
format), and the record of what the planner did (:mod:`.record`)."""

from .plan import DEFAULT_CHUNK_SIZE, PLAN_FORMAT, PLAN_VERSION, Plan, load_plan
from .record import PlanRecord

__all__ = ["Plan", "load_plan", "PlanRecord", "PLAN_FORMAT", "PLAN_VERSION", "DEFAULT_CHUNK_SIZE"]
