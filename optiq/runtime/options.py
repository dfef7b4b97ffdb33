"""A call's options, refused by name before any work: :func:`check_call_options`.

Most calls of ``method="auto"`` hand their bytes to MPI and never reach a planner, so a
mistyped method or planner keyword, or a link rate of 0, would pass unseen through every
one of them and fail the first call that plans, perhaps hours into a run. So every call
checks its options in its agreement (once per set of options; every rank then raises the
first failing rank's error), and an application's set-up can check them before its loop
(:func:`optiq.integrations.mpi4py_fft.accelerate` does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError, ParameterError
from ..planner.make import check_plan_options
from ..planner.methods import PLANNERS
from ..sim.chunk import ChunkModel
from ..utils.checks import check_count, check_range, check_rate
from .patterns import AUTO_METHOD

__all__ = ["CALL_METHODS", "CALL_KEYWORDS", "SET_BY_THE_CALL", "DEFAULT_CACHE_SIZE", "DEFAULT_PLAN_BUDGET", "DEFAULT_MAX_UNCHECKED",
           "DEFAULT_TIMEOUT", "check_call_options", "check_keywords", "check_timeout", "is_timeout"]

#: Patterns kept per communicator.
DEFAULT_CACHE_SIZE = 16
#: ``method="auto"`` plans a shape once planning costs at most this fraction of its calls' time.
DEFAULT_PLAN_BUDGET = 0.02
#: ``method="auto"``: at most this many calls in a row go to MPI without the ranks' agreement.
DEFAULT_MAX_UNCHECKED = 127
#: Seconds a call waits for the other ranks before it gives up.
DEFAULT_TIMEOUT = 60.0
#: The keywords of :func:`optiq.alltoallv` that are the call's own; the others are its planner's.
CALL_KEYWORDS = ("network", "hosts", "link_bw", "cache_size", "chunk_model", "timeout", "plan_budget",
                 "max_unchecked", "parent")

#: What a call's ``method=`` may be: a plan where it pays, MPI's own call, or a planner's name.
CALL_METHODS = ("auto", "mpi", *PLANNERS)
#: The planner keywords a call gives its planner itself, never the caller's.
SET_BY_THE_CALL = ("comm", "candidates", "forwarders", "progress")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def is_timeout(value: Any) -> bool:
    """Whether ``value`` is a number of seconds above 0 (infinity too; not NaN)."""
    return _is_number(value) and value > 0


def check_timeout(timeout: Any) -> None:
    """Refuse a ``timeout=`` that is not a number of seconds above 0 (infinity waits for ever).

    Examples
    --------
    >>> check_timeout(60.0)
    >>> check_timeout(0)
    Traceback (most recent call last):
    optiq.errors.ParameterError: timeout must be in (0, inf], got 0
    """
    check_range("timeout", timeout, 0, low_open=True, high_open=False)


def check_call_options(method: Any, link_bw: Any, chunk_model: Any, planner_options: dict[str, Any], *,
                       cache_size: Any, max_unchecked: Any, plan_budget: Any, timeout: Any) -> None:
    """Refuse, on this rank, the options of an ``alltoallv`` or ``alltoallw`` call that no call
    could use, naming the first: every option is checked whether or not this call would use
    it, so a call handed to MPI refuses what a call that plans would.

    Parameters
    ----------
    method, link_bw, chunk_model, cache_size, max_unchecked, plan_budget, timeout
        As :func:`optiq.alltoallv` takes them.
    planner_options : dict
        The call's further keywords, for its planner (``k=``, ``gap=``, ...).

    Raises
    ------
    ParameterError
        An unknown method or planner keyword, a keyword the call sets itself, or a value out
        of range.
    ArgumentError
        A ``plan_budget`` below 0.

    Examples
    --------
    >>> check_call_options("auto", None, None, {"k": 4}, cache_size=64, max_unchecked=8, plan_budget=0.02,
    ...                    timeout=60.0)
    >>> check_call_options("optt", None, None, {}, cache_size=64, max_unchecked=8, plan_budget=0.02, timeout=60.0)
    Traceback (most recent call last):
    optiq.errors.ParameterError: unknown method 'optt'; expected one of auto, mpi, opt, lp, heu1, heu2, dynamic, default, adaptive
    """
    if not isinstance(method, str) or method not in CALL_METHODS:
        raise ParameterError(f"unknown method {method!r}; expected one of {', '.join(CALL_METHODS)}")
    check_rate("link_bw", link_bw, optional=True)  # bytes per second or a rate's text; None: the network's own
    if chunk_model is not None and not isinstance(chunk_model, ChunkModel):
        raise ParameterError(f"chunk_model must be an optiq.sim.ChunkModel or None, not {type(chunk_model).__name__}")
    check_count("cache_size", cache_size, 1)
    check_count("max_unchecked", max_unchecked, 0)
    if not _is_number(plan_budget) or not plan_budget >= 0:  # NaN too
        raise ArgumentError(f"plan_budget must be a fraction of the calls' time of 0 or more, got {plan_budget!r}")
    check_timeout(timeout)
    own = [key for key in SET_BY_THE_CALL if key in planner_options]
    if own:
        raise ParameterError(f"{own[0]}= is not an option of the call: the call gives its planner {own[0]}= itself")
    # auto plans with AUTO_METHOD; "mpi" never plans, but a keyword auto would refuse is no less a mistake
    check_plan_options(AUTO_METHOD if method in ("auto", "mpi") else method, **planner_options)


def check_keywords(method: Any, keywords: dict[str, Any]) -> None:
    """:func:`check_call_options` of the keywords a caller would give :func:`optiq.alltoallv`
    besides ``method`` (the defaults for those left out): for a set-up that passes them on to
    every call, such as :func:`optiq.integrations.mpi4py_fft.accelerate`.

    Examples
    --------
    >>> check_keywords("auto", {"network": "torus:4x4", "k": 4})
    >>> check_keywords("auto", {"network": "torus:4x4", "link_bw": 0})
    Traceback (most recent call last):
    optiq.errors.ParameterError: link_bw must be in (0, inf), got 0
    """
    given = keywords.get
    check_call_options(method, given("link_bw"), given("chunk_model"),
                       {key: value for key, value in keywords.items() if key not in CALL_KEYWORDS},
                       cache_size=given("cache_size", DEFAULT_CACHE_SIZE),
                       max_unchecked=given("max_unchecked", DEFAULT_MAX_UNCHECKED),
                       plan_budget=given("plan_budget", DEFAULT_PLAN_BUDGET), timeout=given("timeout", DEFAULT_TIMEOUT))
