"""MPI plumbing in one room: the launch protocol of MPI commands (fail together, print
once, :mod:`.launch`), waits that leave the cores to ranks with work (:mod:`.waiting`),
per-source work spread over ranks (:mod:`.workers`), private duplicates of a caller's
communicator (:mod:`.comms`) and connections opened before anything is timed
(:mod:`.connect`). mpi4py is imported only when a function needs it."""

from .comms import private_comm
from .workers import Workers

__all__ = ["private_comm", "Workers"]
