"""The search of ``hydra/sweeper=accelerators`` (:mod:`hydra_plugins.ddlio_launcher.accelerators`), apart from
Hydra: the most accelerators a configuration keeps at AU (accelerator utilisation, 0-1) at or above a floor.

MLPerf Storage's headline is that number, which its maintainers find with shell loops over the process count
(mlcommons/storage ``tests/object-store/sweep_unet3d_np.sh``, ``docs/*_NP_Scaling_Results.md``). Here the count
gallops (1, 2, 4, 8, ... accelerators, one repetition each) until AU drops below the floor or the most allowed,
then bisects between the last fed count and the first starved one; the two counts at the boundary are measured
``repeats`` times and decided by the bootstrap interval of their mean (:func:`ddlio.evidence.estimate`): fed when
its lower end is at or above the floor, starved when its upper end is below, else "cannot decide". A boundary that
the repetitions move (the last fed count proves starved, or the first starved one fed) is searched again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: ``measure(index, repetitions)``: the AU (0-1; None: the point failed) of each repetition index of the step
#: ``index`` of the search's steps, in order
Measure = Callable[[int, Sequence[int]], Sequence["float | None"]]


@dataclass(frozen=True)
class Verdict:
    """One accelerator count's AU repetitions judged against ``floor``: ``word`` is ``fed``, ``starved``,
    ``undecided`` (the interval straddles the floor) or ``failed`` (no repetition has an AU)."""

    accelerators: int
    values: tuple[float, ...]
    word: str
    mean: float = float("nan")
    lo: float = float("nan")
    hi: float = float("nan")

    def text(self) -> str:
        """``"7: AU 0.84 [0.80, 0.88]"``, ``"7: AU 0.84"`` (one repetition), or ``"7: failed"``."""
        if self.word == "failed":
            return f"{self.accelerators}: failed (its error is in the store: python -m analysis summary)"
        if self.lo != self.lo:
            return f"{self.accelerators}: AU {self.mean:.2f}"
        return f"{self.accelerators}: AU {self.mean:.2f} [{self.lo:.2f}, {self.hi:.2f}]"


def judge(accelerators: int, values: Sequence[float | None], floor: float) -> Verdict:
    """The :class:`Verdict` of one count's AU repetitions: one value is judged by itself, several by the 95%
    bootstrap interval of their mean (failed repetitions, None, are left out)."""
    from ddlio.evidence import estimate  # lazy: numpy

    vals = tuple(float(v) for v in values if v is not None and v == v)
    if not vals:
        return Verdict(accelerators, vals, "failed")
    e = estimate(str(accelerators), vals)
    if e.lo != e.lo:
        word = "fed" if e.mean >= floor else "starved"
    else:
        word = "fed" if e.lo >= floor else "starved" if e.hi < floor else "undecided"
    return Verdict(accelerators, vals, word, e.mean, e.lo, e.hi)


@dataclass
class Answer:
    """What the search found for one configuration: ``feeds`` accelerators (0: none) decided fed at ``floor``,
    with ``fed`` (that count's verdict), ``starved`` (the next count's; None when ``feeds`` is the most allowed),
    or ``undecided`` and ``reason`` when the boundary could not be decided. ``evaluations`` counts the points the
    search asked for (count x repetition); ``grid`` the points of the grid over the same counts and repetitions."""

    floor: float
    most: int
    repeats: int
    feeds: int | None = None
    fed: Verdict | None = None
    starved: Verdict | None = None
    undecided: Verdict | None = None
    reason: str = ""
    evaluations: int = 0
    grid: int = 0
    verdicts: dict[int, Verdict] = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        return self.feeds is not None

    def line(self) -> str:
        """``feeds 6 accelerators at AU ≥ 0.90 (7: AU 0.84 [0.80, 0.88])``, or why it cannot decide."""
        at = f"at AU ≥ {self.floor:.2f}"
        if self.feeds is None:
            return f"cannot decide how many accelerators it feeds {at}: {self.reason}"
        if self.feeds == 0:
            assert self.starved is not None
            return f"feeds no accelerator {at} ({self.starved.text()})"
        assert self.fed is not None
        if self.starved is None:
            return (f"feeds {self.feeds} accelerators {at} ({self.fed.text()}), the most tried: "
                    f"hydra.sweeper.max={self.most} (raise it to look further)")
        return f"feeds {self.feeds} accelerator{'s' if self.feeds > 1 else ''} {at} ({self.starved.text()})"


def grid_size(steps: Sequence[int], repeats: int) -> int:
    """Points of the grid the search replaces: every count of ``steps``, ``repeats`` times."""
    return len(steps) * repeats


def search(steps: Sequence[int], measure: Measure, floor: float, repeats: int) -> Answer:
    """The most accelerators of ``steps`` (accelerator counts, increasing) that keep AU ≥ ``floor`` (0-1):
    galloping over the steps' indices (0, 1, 3, 7, ...: counts 1, 2, 4, 8 where the steps are 1..max), bisection,
    then ``repeats`` repetitions at both counts of the boundary (see the module's docstring). ``measure`` is asked
    only for repetitions not asked before."""
    if not steps or repeats < 1:
        raise ValueError("search: steps must not be empty and repeats must be >= 1")
    s = _Search(list(steps), measure, floor, repeats)
    for _ in range(4 * len(steps) + 4):  # each pass measures a new count or moves lo up or hi down: bounded
        stop = s.gallop() if s.hi is None and s.lo < s.last else s.bisect() if s.hi is not None and \
            s.hi - s.lo > 1 else s.confirm()
        if stop is not None:
            break
    else:  # pragma: no cover - not reached: the bound above exceeds the passes any AU curve can take
        s.ans.reason = "the search did not settle"
    s.ans.evaluations = sum(len(v) for v in s.known.values())
    return s.ans


class _Search:
    """The state of :func:`search`: ``lo`` the index of the last fed step (-1: none), ``hi`` the first starved
    one (None: none yet). Each method makes one move and returns True when the search has ended."""

    def __init__(self, steps: list[int], measure: Measure, floor: float, repeats: int) -> None:
        self.steps, self.measure, self.floor, self.repeats = steps, measure, floor, repeats
        self.last = len(steps) - 1
        self.known: dict[int, list[float | None]] = {}
        self.ans = Answer(floor, steps[-1], repeats, grid=grid_size(steps, repeats))
        self.lo: int = -1
        self.hi: int | None = None

    def verdict(self, i: int, n: int) -> Verdict:
        """Step ``i`` judged on at least ``n`` repetitions (measuring the missing ones)."""
        have = self.known.setdefault(i, [])
        if len(have) < n:
            have.extend(self.measure(i, range(len(have), n)))
        v = judge(self.steps[i], have, self.floor)
        self.ans.verdicts[self.steps[i]] = v
        return v

    def single(self, i: int) -> bool | None:
        """Whether step ``i`` is fed on one repetition; None (the search ended) when its point failed."""
        v = self.verdict(i, 1)
        if v.word == "failed":
            _undecided(self.ans, v, self.known)
            return None
        return v.word == "fed"

    def gallop(self) -> bool | None:
        i = min(2 * self.lo + 1, self.last) if self.lo >= 0 else 0
        fed = self.single(i)
        if fed is None:
            return True
        self.lo, self.hi = (i, None) if fed else (self.lo, i)
        return None

    def bisect(self) -> bool | None:
        assert self.hi is not None
        mid = (self.lo + self.hi) // 2
        fed = self.single(mid)
        if fed is None:
            return True
        self.lo, self.hi = (mid, self.hi) if fed else (self.lo, mid)
        return None

    def now(self, j: int) -> str:
        """Step ``j``'s verdict on the repetitions known."""
        return self.verdict(j, len(self.known[j])).word if j in self.known else ""

    def confirm(self) -> bool | None:
        """Repeat the boundary: the last fed count, then the first starved one; move it where they disagree."""
        if self.lo >= 0:
            v = self.verdict(self.lo, self.repeats)
            if v.word in ("failed", "undecided"):
                return bool(_undecided(self.ans, v, self.known))
            if v.word == "starved":
                self.hi = self.lo
                self.lo = max((j for j in range(self.hi) if self.now(j) == "fed"), default=-1)
                return None
        if self.hi is not None:
            v = self.verdict(self.hi, self.repeats)
            if v.word in ("failed", "undecided"):
                return bool(_undecided(self.ans, v, self.known))
            if v.word == "fed":
                self.lo = self.hi
                self.hi = min((j for j in range(self.lo + 1, self.last + 1) if self.now(j) not in ("", "fed")),
                              default=None)
                return None
        ans, lo, hi = self.ans, self.lo, self.hi
        ans.feeds = self.steps[lo] if lo >= 0 else 0
        ans.fed = ans.verdicts[self.steps[lo]] if lo >= 0 else None
        ans.starved = ans.verdicts[self.steps[hi]] if hi is not None else None
        return True


def _undecided(ans: Answer, v: Verdict, known: dict[int, list[float | None]]) -> Answer:
    """``ans`` ended at ``v``: a failed point, or an interval that straddles the floor."""
    ans.undecided = v
    ans.evaluations = sum(len(x) for x in known.values())
    fed = [c for c, x in ans.verdicts.items() if x.word == "fed" and len(x.values) >= ans.repeats]
    also = f"; {max(fed)} is decided fed" if fed else ""
    if v.word == "failed":
        ans.reason = f"{v.text()}{also}"
    else:
        ans.reason = (f"{v.text()} straddles {ans.floor:.2f}: more repetitions decide "
                      f"(hydra.sweeper.repeats={ans.repeats + 2}){also}")
    return ans
