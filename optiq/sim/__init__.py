"""Simulation of plans: flow level (max-min fair sharing over time)."""

from .flow import SHARING, FlowResult, simulate_flows

__all__ = ["simulate_flows", "FlowResult", "SHARING"]
