"""Run under mpiexec -n 4: mpi4py-fft's transforms through optiq.integrations.mpi4py_fft.accelerate,
bitwise against the library's own transfers.

Pencils on a 2 x 2 grid and slabs, complex and real transforms, forward and backward, with
every method; the transfers go through optiq (counted), and restore gives the library its own
calls back. The first calls after accelerate go ahead of their agreement (the groups were made
by accelerate), and auto on a tree network never plans. Prints "ok" on rank 0 and exits 0 when everything holds.
"""

import sys

import numpy as np
from mpi4py import MPI
from mpi4py_fft import PFFT, newDistArray

from optiq.errors import ArgumentError, OptiqError
from optiq.integrations.mpi4py_fft import AcceleratedComm, accelerate, restore
from optiq.runtime import clear_cache

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
assert comm.Get_size() == 4, "run with mpiexec -n 4"
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(f"rank {rank}: {what}")


def transform(fft, u):
    """Forward and backward: the spectrum and the array back, as bytes."""
    u_hat = fft.forward(u, newDistArray(fft, True))
    back = fft.backward(u_hat, newDistArray(fft, False))
    return np.asarray(u_hat).tobytes(), np.asarray(back).tobytes()


for shape, dtype, decomposition in (((12, 10, 8), complex, {"grid": (2, 2, 1)}), ((8, 12, 6), float, {"grid": (2, 2)}),
                                    ((8, 6, 4), complex, {"slab": True})):
    fft = PFFT(comm, shape, axes=(0, 1, 2), dtype=dtype, **decomposition)
    u = newDistArray(fft, False)
    u[:] = np.random.default_rng(rank).random(u.shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        u[:] += 1j * np.random.default_rng(rank + 10).random(u.shape)
    own = transform(fft, u)
    label = f"{shape} {np.dtype(dtype).name} {decomposition}"
    # accelerate made the calls' context and groups: the first calls go ahead of their agreement
    accelerate(fft, network="torus:2x2")
    fft.forward(u, newDistArray(fft, True))
    firsts = [t.comm.last for t in fft.transfer if isinstance(t.comm, AcceleratedComm)]
    check(bool(firsts) and all(r.ahead for r in firsts), f"{label}: a first call waited for its agreement: {firsts}")
    # a tree (one core switch): every pair of hosts has one route, so auto plans nothing, budget or not
    accelerate(fft, network="cluster:hosts=4,edges=2,cores=1", plan_budget=float("inf"))
    check(transform(fft, u) == own, f"{label}, auto on a tree: forward or backward differ from mpi4py-fft's own")
    lasts = [t.comm.last for t in fft.transfer if isinstance(t.comm, AcceleratedComm)]
    check(all(r.method == "mpi" and r.plans_made == 0 and ("tree" in r.reason or not r.checked) for r in lasts),
          f"{label}: auto on a tree planned, or not for that reason: {lasts}")
    # a parent that does not hold every rank of the transfers' communicators: refused on every rank
    half = comm.Split(rank // 2, rank)
    try:
        accelerate(fft, network="torus:2x2", parent=half)
        refused = ""
    except ArgumentError as exc:
        refused = str(exc)
    check("not a rank of parent=" in refused, f"{label}: a parent of half the ranks was not refused: {refused!r}")
    half.Free()
    # an option no call could use is refused by accelerate, before the first transform, on every rank
    for bad in ({"method": "optt"}, {"link_bw": 0}, {"kk": 4}):
        try:
            accelerate(fft, network="torus:2x2", **bad)
            refused = ""
        except OptiqError as exc:
            refused = str(exc)
        check(any(word in refused for word in bad), f"{label}: accelerate took {bad}: {refused!r}")
    for method in ("auto", "heu2", "opt"):
        paced = {"link_bw": "1Gb/s"} if method == "opt" else {}  # a rate's text, parsed once
        same = accelerate(fft, network="torus:2x2", method=method, plan_budget=float("inf"), **paced)
        check(same is fft, "accelerate did not return the same PFFT")
        ours = transform(fft, u)
        label = f"{shape} {np.dtype(dtype).name} {decomposition}, {method}"
        check(ours == own, f"{label}: forward or backward differ from mpi4py-fft's own")
        accelerated = [t.comm for t in fft.transfer if t.comm.Get_size() > 1]  # one of one rank stays MPI's
        check(accelerated and all(isinstance(c, AcceleratedComm) and c.calls >= 2 for c in accelerated),
              f"{label}: a transfer did not go through optiq")
        check(all(c.options.get("link_bw") == (1.25e8 if paced else None) for c in accelerated),
              f"{label}: link_bw={paced} reached the calls as {[c.options.get('link_bw') for c in accelerated]}")
        if method != "auto":
            moved = [c.last.method for c in accelerated]
            check(set(moved) == {method}, f"{label}: {moved} moved the bytes, not {method}")
    restore(fft)
    check(not any(isinstance(t.comm, AcceleratedComm) for t in fft.transfer), "restore kept optiq's communicators")
    check(transform(fft, u) == own, "after restore the transforms differ")
    fft.destroy()

clear_cache()
failures = [f for fs in comm.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
