"""Simulation of plans: flow level (max-min fair sharing over time) and chunk level (store-and-forward)."""

from .chunk import ChunkModel, ChunkResult, load_chunk_model, simulate_chunks, simulate_direct
from .fit import ChunkFit, fit_chunk_model, read_run_samples
from .flow import SHARING, FlowResult, simulate_flows
from .runs import RunReport, Timing, read_run_report

__all__ = ["simulate_flows", "FlowResult", "SHARING", "simulate_chunks", "simulate_direct", "ChunkModel",
           "ChunkResult", "load_chunk_model", "fit_chunk_model", "ChunkFit", "RunReport", "Timing", "read_run_report",
           "read_run_samples"]
