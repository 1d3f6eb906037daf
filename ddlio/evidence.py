"""The best configuration by evidence: the mean of each configuration's repetitions with a bootstrap interval, and
"cannot decide" when the best one's interval overlaps another's. Used by the end-of-sweep line
(hydra_plugins' ``DdlioSummary``) and the report's answers (:mod:`analysis.answers`), so both say the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ddlio.lazy import lazy_import

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


#: shortest timed I/O (seconds: the slowest rank's read and metadata calls over all epochs) a point must have to be
#: trusted: below it a rate is timer and scheduling noise (one configuration read 394, 113 and 324 MiB/s in ~4 ms).
#: Such a point is invalid (analysis.validity), its line says so, the guidelines leave it out.
MIN_IO_S = 0.1
#: the stripe request that is every point's default (count, size in bytes): asking for it is not asking to stripe
DEFAULT_STRIPE = (1, 1024 * 1024)


#: the accelerator utilisation (compute time over wall time, 0-1) at or above which a point's accelerators are fed,
#: where the workload does not say (``workload.au_floor``): MLPerf Storage's rule for most of its workloads
AU_FLOOR = 0.9
#: what ``objective=auto`` (the default) maximises: AU where a step time is known, else the read bandwidth
AUTO_OBJECTIVES = ("au", "bandwidth_mib_s")
#: AU means closer than this to the best one's tie: the bandwidth decides between them (two fed configurations at
#: AU 0.998 and 0.997 are both fed; the one with headroom, the faster, is the better buy)
AU_TIE = 0.01


def objective_of(objective: str, compute_time: float | None) -> str:
    """The objective a point is ranked by: ``objective`` itself, or for ``auto`` ``au`` when the workload has a
    compute time (seconds per batch, > 0) and ``bandwidth_mib_s`` when it has none (AU is then 0 by
    construction)."""
    if objective != "auto":
        return objective
    return AUTO_OBJECTIVES[0] if compute_time and float(compute_time) > 0 else AUTO_OBJECTIVES[1]


def too_short(io_s: float | None) -> bool:
    """Whether a point's timed I/O (seconds; None or NaN: not measured) is below :data:`MIN_IO_S`."""
    return io_s is not None and io_s == io_s and float(io_s) < MIN_IO_S


def stripe_unapplied(stripe_count: int | None, stripe_size: int | None, applicable: bool | None) -> bool:
    """Whether a point asked for a stripe layout other than :data:`DEFAULT_STRIPE` on a file system that does not
    stripe (``applicable`` False; None: not known, not judged). One rule for the point's line, its label, its
    validity, "best" and the guidelines: such a point is invalid and counts nowhere."""
    if applicable is None or bool(applicable):
        return False
    count = DEFAULT_STRIPE[0] if stripe_count is None or stripe_count != stripe_count else int(stripe_count)
    size = DEFAULT_STRIPE[1] if stripe_size is None or stripe_size != stripe_size else int(stripe_size)
    return (count, size) != DEFAULT_STRIPE


def interval(values: Sequence[float], confidence: float = 0.95, draws: int = 2000) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` (seeded: the same values give the same interval);
    (nan, nan) with fewer than two values: one measurement has no interval."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return float("nan"), float("nan")
    means = np.random.default_rng(0).choice(v, size=(draws, len(v))).mean(axis=1)
    a = (1 - confidence) / 2
    lo, hi = np.quantile(means, [a, 1 - a])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Estimate:
    """One configuration's repetitions: their ``n``, ``mean`` and bootstrap interval ``lo``..``hi`` (the metric's
    unit; NaN with one repetition)."""

    key: str
    n: int
    mean: float
    lo: float
    hi: float

    def text(self, fmt: str = "{:.4g}") -> str:
        """``"204.3 [180.1, 230.9] (n=3)"``, or ``"330.1 (n=1, no interval)"``."""
        if self.lo != self.lo:
            return f"{fmt.format(self.mean)} (n={self.n}, no interval)"
        return f"{fmt.format(self.mean)} [{fmt.format(self.lo)}, {fmt.format(self.hi)}] (n={self.n})"


@dataclass(frozen=True)
class Best:
    """The best configuration by mean (``best``), the others ranked after it, and ``tied``: those whose interval
    overlaps the best's (or that cannot be told apart because one side has a single repetition)."""

    best: Estimate
    ranked: list[Estimate]
    tied: list[Estimate] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return not self.tied and self.best.n >= 2

    @property
    def configurations(self) -> int:
        return len(self.ranked)


def estimate(key: str, values: Sequence[float]) -> Estimate:
    """The :class:`Estimate` of one configuration's repetitions ``values``."""
    lo, hi = interval(values)
    return Estimate(key, len(values), float(np.mean(values)), lo, hi)


def best_of(groups: Mapping[str, Sequence[float]], higher_is_better: bool = True,
            tiebreak: Mapping[str, float] | None = None, near: float = 0.0) -> Best | None:
    """The best of ``groups`` (configuration key -> its repetitions' values) by mean; None when empty. Ties are
    the configurations whose interval overlaps the best's, and those with a single repetition next to a best
    whose own interval holds their value (a single value cannot exclude an overlap). With ``tiebreak``
    (configuration key -> a second figure, higher is better), the configurations whose mean is within ``near`` of
    the best mean are ranked by it instead (AU ties broken by bandwidth: :data:`AU_TIE`)."""
    ests = [estimate(k, v) for k, v in groups.items() if len(v)]
    if not ests:
        return None
    ests.sort(key=lambda e: (-e.mean if higher_is_better else e.mean, e.key))
    if tiebreak is not None:
        top = ests[0].mean
        close = [e for e in ests if abs(e.mean - top) <= near]
        close.sort(key=lambda e: (-tiebreak.get(e.key, float("-inf")), e.key))
        ests = close + [e for e in ests if abs(e.mean - top) > near]
    best = ests[0]
    tied = []
    for e in ests[1:]:
        if best.lo != best.lo and e.lo != e.lo:
            tied.append(e)  # two single measurements: nothing tells them apart
        elif best.lo != best.lo:
            tied.append(e) if e.lo <= best.mean <= e.hi else None
        elif e.lo != e.lo:
            tied.append(e) if best.lo <= e.mean <= best.hi else None
        elif not (best.lo > e.hi or e.lo > best.hi):
            tied.append(e)
    return Best(best, ests, tied)


@dataclass(frozen=True)
class Fed:
    """Whether a configuration keeps its accelerators fed: ``word`` is ``fed`` (AU at or above ``floor``: the
    interval's lower end, or the one value), ``starved`` (below: the interval's upper end, or the one value) or
    ``undecided`` (the interval straddles the floor); ``est`` the AU's :class:`Estimate` (0-1)."""

    word: str
    floor: float
    est: Estimate

    def text(self) -> str:
        """``"fed: AU 0.95 [0.93, 0.97] >= 0.90"``, ``"starved: AU 0.62 (n=1, no interval) < 0.90"``, or
        ``"fed or starved? AU 0.90 [0.85, 0.93] straddles 0.90: more repetitions (repeat=0,1,2,...)"``."""
        au = self.est.text("{:.2f}")
        if self.word == "fed":
            return f"fed: AU {au} ≥ {self.floor:.2f}"
        if self.word == "starved":
            return f"starved: AU {au} < {self.floor:.2f}"
        return f"fed or starved? AU {au} straddles {self.floor:.2f}: more repetitions (repeat=0,1,2,...) decide"


def fed(values: Sequence[float], floor: float | None = None, key: str = "") -> Fed | None:
    """The :class:`Fed` verdict of one configuration's AU repetitions ``values`` (0-1) against ``floor`` (None:
    :data:`AU_FLOOR`); None without a value. One repetition is judged by its value (its text says n=1)."""
    vals = [float(v) for v in values if v is not None and v == v]
    if not vals:
        return None
    floor = AU_FLOOR if floor is None or floor != floor else float(floor)
    e = estimate(key, vals)
    if e.lo != e.lo:
        word = "fed" if e.mean >= floor else "starved"
    else:
        word = "fed" if e.lo >= floor else "starved" if e.hi < floor else "undecided"
    return Fed(word, floor, e)
