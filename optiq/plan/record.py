"""What a planner did, as a typed record (serialised as a plan's ``info``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["PlanRecord"]


@dataclass(repr=False)
class PlanRecord:
    """What the planner did: its parameters, its solver's outcome, warnings and timings.

    Every field is optional (``None``: does not apply to the method). :meth:`to_dict` gives
    the plan file's ``info`` object (the keys that apply only); :meth:`from_dict` reads it
    back, keeping keys it does not know in ``extra``.

    Examples
    --------
    >>> r = PlanRecord(k=8, warnings=["slow"], timings={"total_s": 0.5})
    >>> r
    PlanRecord(k=8, warnings=['slow'], total_s=0.5)
    >>> r.to_dict()
    {'k': 8, 'warnings': ['slow'], 'timings': {'total_s': 0.5}}
    >>> PlanRecord.from_dict(r.to_dict()) == r
    True
    """

    k: int | None = None
    gap_target: float | None = None
    hop_slack: int | None = None
    cg_status: str | None = None
    iterations: int | None = None
    generated_paths: int | None = None
    lp_time_s: float | None = None
    first_lp_time_s: float | None = None
    gap: float | None = None
    candidate_paths: int | None = None
    solver: str | None = None
    lp_status: str | None = None
    maxload: int | None = None
    unit: int | None = None
    fallback: dict[str, float] | None = None
    lean: dict[str, Any] | None = None
    stops: dict[str, Any] | None = None
    default_routing: str | None = None
    default_time_s: float | None = None
    #: ECMP (``routes=ecmp``): the 5th and 95th percentiles of the default routes' time over
    #: hash draws, whose mean is ``default_time_s``, and the number of draws
    default_p05_s: float | None = None
    default_p95_s: float | None = None
    default_draws: int | None = None
    default_optimal: bool | None = None
    cut_bound_s: float | None = None
    qos_shares: dict[str, float] | None = None
    qos_throughput_Bps: dict[str, float] | None = None
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.to_dict().items() if k != "timings"}
        total = self.timings.get("total_s")
        parts = [f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in shown.items()]
        return f"PlanRecord({', '.join(parts + ([f'total_s={total:.3g}'] if total is not None else []))})"

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("warnings", "timings", "extra")
               and getattr(self, f.name) is not None}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.timings:
            out["timings"] = dict(self.timings)
        out.update(self.extra)
        return out

    def update(self, other: PlanRecord) -> None:
        """Take every field ``other`` sets; its warnings come after these, its timings and
        extra keys over these.

        Examples
        --------
        >>> r = PlanRecord(warnings=["first"], timings={"total_s": 1.0})
        >>> r.update(PlanRecord(k=4, warnings=["then"], timings={"plan_s": 0.5}))
        >>> r
        PlanRecord(k=4, warnings=['first', 'then'], total_s=1)
        """
        for f in fields(self):
            if f.name not in ("warnings", "timings", "extra") and getattr(other, f.name) is not None:
                setattr(self, f.name, getattr(other, f.name))
        self.warnings.extend(other.warnings)
        self.timings.update(other.timings)
        self.extra.update(other.extra)

    @classmethod
    def from_dict(cls, info: dict[str, Any]) -> PlanRecord:
        """The record of a plan file's ``info``; a key it does not know, or one whose value
        has another type than its field's, is kept as it is in ``extra``."""
        typed: dict[str, Any] = {k: v for k, v in info.items() if k in _TYPES and isinstance(v, _TYPES[k])}
        return cls(**typed, extra={k: v for k, v in info.items() if k not in typed})


def _field_types() -> dict[str, tuple[type, ...]]:
    """What each field of :class:`PlanRecord` accepts, from its annotation."""
    kinds = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,), "dict": (dict,), "list": (list,)}
    return {f.name: kinds[str(f.type).split("[")[0].split(" ")[0]] for f in fields(PlanRecord) if f.name != "extra"}


_TYPES = _field_types()
