"""Demand sets: the OPTIQ patterns, sizes, and demand files."""

from .demands import Demands
from .files import read_demands, write_demands
from .patterns import PATTERNS, constant_ratio, destination_sweep, distance_sweep, random_pairing
from .sizes import random_sizes

__all__ = ["Demands", "constant_ratio", "distance_sweep", "destination_sweep", "random_pairing",
           "random_sizes", "read_demands", "write_demands", "PATTERNS"]
