"""What moves: demand sets (the OPTIQ patterns, sizes, demand files), host lists, rank traffic
(models and traces) mapped to hosts by node selection and placement, job QoS classes, and a
cluster's running jobs."""

from .applications import cesm_coupling, grid_transpose, hacc_aggregation, mxn_redistribution
from .demands import Demands
from .files import read_demands, write_demands
from .hosts import named_hosts, on_hosts
from .jobs import ClusterJob, read_jobs
from .patterns import PATTERNS, constant_ratio, destination_sweep, distance_sweep, permutation, random_pairing
from .placement import PLACEMENTS, SELECTIONS, HostTraffic, host_demands
from .qos import QoSClasses, read_qos
from .sizes import random_sizes
from .spec import WorkloadSpec
from .split import read_split
from .traffic import milc_traffic, nas_cg_traffic, read_traffic

__all__ = ["Demands", "constant_ratio", "distance_sweep", "destination_sweep", "random_pairing", "permutation",
           "random_sizes", "read_demands", "write_demands", "PATTERNS", "hacc_aggregation", "cesm_coupling",
           "mxn_redistribution", "grid_transpose", "QoSClasses", "read_qos",
           "read_traffic", "nas_cg_traffic", "milc_traffic", "host_demands", "HostTraffic", "SELECTIONS",
           "PLACEMENTS", "named_hosts", "on_hosts", "read_jobs", "ClusterJob", "WorkloadSpec", "read_split"]
