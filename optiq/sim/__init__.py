"""Simulation of plans: flow level (max-min fair sharing over time) and chunk level (store-and-forward)."""

from .chunk import ChunkModel, ChunkResult, simulate_chunks
from .flow import SHARING, FlowResult, simulate_flows

__all__ = ["simulate_flows", "FlowResult", "SHARING", "simulate_chunks", "ChunkModel", "ChunkResult"]
