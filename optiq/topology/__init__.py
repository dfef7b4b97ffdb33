"""Network topologies: tori/meshes (Blue Gene/Q presets), fat-trees, any networkx graph."""

from .base import Topology
from .fattree import cluster, kary_ntree
from .graph import from_networkx, read_graphml
from .spec import from_spec
from .torus import BGQ_SHAPES, bgq, mesh, torus

__all__ = ["Topology", "torus", "mesh", "bgq", "BGQ_SHAPES", "kary_ntree", "cluster",
           "from_networkx", "read_graphml", "from_spec"]
