"""Network topologies: tori/meshes (Blue Gene/Q presets), fat-trees, dragonflies, InfiniBand
fabrics read from ``ibnetdiscover`` (with their forwarding tables), Slurm's
``topology.conf``, any networkx graph; and Slurm's host-list syntax for naming hosts."""

from .base import Topology, capacity_classes
from .dragonfly import balanced_dragonfly, dragonfly
from .fattree import cluster, kary_ntree
from .graph import from_networkx, read_graphml
from .hostlist import compress_hostlist, expand_hostlist
from .ibnet import read_ibnetdiscover
from .slurm import read_topology_conf
from .spec import from_spec
from .torus import BGQ_SHAPES, bgq, mesh, torus

__all__ = ["Topology", "capacity_classes", "torus", "mesh", "bgq", "BGQ_SHAPES", "kary_ntree", "cluster", "dragonfly",
           "balanced_dragonfly", "read_ibnetdiscover", "read_topology_conf", "expand_hostlist", "compress_hostlist",
           "from_networkx", "read_graphml", "from_spec"]
