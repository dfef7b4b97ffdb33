"""What a plan costs: the paper's metrics and both completion times of a plan
(:mod:`.compute`), and plain-text tables of them, its busiest links and jobs (:mod:`.tables`)."""

from .compute import Metrics, plan_metrics
from .tables import jobs_table, links_table, metrics_table

__all__ = ["Metrics", "plan_metrics", "metrics_table", "links_table", "jobs_table"]
