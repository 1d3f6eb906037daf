"""A bounded model of bandwidth against scale (ranks), fitted on a configuration's repetitions at measured scales.

The model (every parameter positive and bounded)::

    bandwidth(r) = min(r × rate, ceiling) / (1 + contention × (r − 1))      r: ranks (nodes × ppn), MiB/s

- ``rate``: MiB/s a rank reads while nothing else limits it (the per-rank rate);
- ``ceiling``: MiB/s the storage gives all ranks together: ``min(targets × per-target rate, the system's
  ceiling)``. Within one configuration the targets (the stripe count) are fixed, so the two bounds are one
  number; the per-target rate reported is ``ceiling / targets``, an upper bound's share (:mod:`analysis.predict`);
- ``contention`` (0 to :data:`MAX_CONTENTION`): how much each further rank slows all of them (lock traffic,
  metadata, seeks among interleaved streams); at 0 the bandwidth is flat beyond the ceiling, above 0 it falls.

Four forms of it are fitted (:data:`FORMS`: ``linear`` = rate only, ``ceiling``, ``contention`` = rate and
contention, ``full``); a form with k parameters needs at least k + 1 distinct scales, so that every fit keeps a
degree of freedom across scales, and the form kept is the one of least BIC over the repetitions (ties: the fewer
parameters). Least squares per form: the contention is searched on a grid (refined once around its best), the rate
and the ceiling then have closed forms for each split of the scales into those below the ceiling and those at it.
numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: form -> its number of free parameters
FORMS = {"linear": 1, "ceiling": 2, "contention": 2, "full": 3}
#: the contention's bound (1/(1 + c·(r − 1)): 10 halves the bandwidth of 2 ranks down to a twentieth)
MAX_CONTENTION = 10.0
#: the contention grid: 0, then 10^-5 .. MAX_CONTENTION
_GRID = np.concatenate([[0.0], np.logspace(-5, np.log10(MAX_CONTENTION), 121)])


@dataclass(frozen=True)
class Fit:
    """One fitted form: ``rate`` (MiB/s a rank), ``ceiling`` (MiB/s; inf: none), ``contention`` (dimensionless),
    its residual sum of squares over the repetitions (MiB/s squared) and their number ``n``."""

    form: str
    rate: float
    ceiling: float
    contention: float
    rss: float
    n: int

    def predict(self, ranks: float | np.ndarray) -> np.ndarray:
        """The model's bandwidth (MiB/s) at ``ranks``."""
        r = np.asarray(ranks, dtype=float)
        return np.minimum(self.rate * r, self.ceiling) / (1 + self.contention * (r - 1))

    @property
    def params(self) -> int:
        return FORMS[self.form]

    def bic(self) -> float:
        """The Bayesian information criterion of the fit (Gaussian errors), with a floor under the residual
        variance ((1e-4 × the scale of the data)², set by :func:`fit`) so that an exact fit is not infinitely good."""
        return self.n * np.log(self.rss / self.n) + self.params * np.log(self.n)

    def as_dict(self) -> dict[str, float | str | None]:
        """The parameters for JSON (inf as None: no ceiling)."""
        return {"form": self.form, "rate_mib_s_per_rank": self.rate,
                "ceiling_mib_s": None if not np.isfinite(self.ceiling) else self.ceiling,
                "contention": self.contention}


def _best_over(cs: np.ndarray, form: str, r: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """(rss, rate, ceiling, contention) of ``form``'s best fit with the contention among ``cs``."""
    g = 1.0 / (1.0 + cs[:, None] * (r[None, :] - 1))  # (contentions, points)
    h = r[None, :] * g
    best = (np.inf, np.nan, np.inf, 0.0)
    if form in ("linear", "contention"):
        a = (h * y).sum(1) / (h * h).sum(1)
        rss = ((y - a[:, None] * h) ** 2).sum(1)
        i = int(np.argmin(rss))
        return float(rss[i]), float(a[i]), np.inf, float(cs[i])
    scales = np.unique(r)
    for k in range(1, len(scales)):  # the scales up to scales[k-1] below the ceiling, the others at it
        lin = r <= scales[k - 1]
        a = (h[:, lin] * y[lin]).sum(1) / (h[:, lin] ** 2).sum(1)
        c_ = (g[:, ~lin] * y[~lin]).sum(1) / (g[:, ~lin] ** 2).sum(1)
        pred = np.minimum(a[:, None] * r[None, :], c_[:, None]) * g
        rss = ((y - pred) ** 2).sum(1)
        i = int(np.argmin(rss))
        if rss[i] < best[0]:
            best = (float(rss[i]), float(a[i]), float(c_[i]), float(cs[i]))
    return best


def fit_form(form: str, r: np.ndarray, y: np.ndarray, floor: float = 0.0) -> Fit:
    """Least squares of ``form`` over the repetitions ``y`` (MiB/s) at ranks ``r``; ``floor``: the least residual
    sum of squares a fit is given (MiB/s squared)."""
    r, y = np.asarray(r, dtype=float), np.asarray(y, dtype=float)
    if form in ("linear", "ceiling"):
        rss, a, c_, c = _best_over(np.zeros(1), form, r, y)
    else:
        rss, a, c_, c = _best_over(_GRID, form, r, y)
        j = int(np.searchsorted(_GRID, c))
        lo, hi = _GRID[max(j - 1, 0)], _GRID[min(j + 1, len(_GRID) - 1)]
        rss, a, c_, c = _best_over(np.linspace(lo, hi, 41), form, r, y)  # refined between the neighbours
    return Fit(form, a, c_, c, max(rss, floor), len(y))


def forms_allowed(scales: int) -> list[str]:
    """The forms a fit over ``scales`` distinct scales may take: k parameters need k + 1 scales (one at least)."""
    return [f for f, k in FORMS.items() if k <= max(1, scales - 1)]


def _rss_floor(y: np.ndarray) -> float:
    """The least residual sum of squares a fit over ``y`` is given (MiB/s squared): (1e-4 × the data's scale)²
    a repetition, so that an exact fit is not infinitely good (:meth:`Fit.bic`)."""
    return len(y) * (1e-4 * float(np.mean(np.abs(y)))) ** 2


def fit(r: np.ndarray, y: np.ndarray) -> Fit:
    """The best of the allowed forms (:func:`forms_allowed`) by BIC; ties go to the form with fewer parameters."""
    r, y = np.asarray(r, dtype=float), np.asarray(y, dtype=float)
    fits = [fit_form(f, r, y, _rss_floor(y)) for f in forms_allowed(len(np.unique(r)))]
    return min(fits, key=lambda f: (round(f.bic(), 9), f.params))


@dataclass(frozen=True)
class HeldOut:
    """The self-check: the largest measured ``scale`` (ranks) predicted from the smaller ones (MiB/s) beside
    its measured mean, and the relative error ``|predicted − measured| / measured``."""

    ranks: float
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        return abs(self.predicted - self.measured) / self.measured


def held_out(r: np.ndarray, y: np.ndarray, form: str | None = None) -> HeldOut:
    """Refit without the largest measured scale and predict it (needs three scales or more). ``form``: the one the
    fit on every scale chose, refitted on the smaller scales where they are as many as its parameters (the check is
    of the model the prediction uses: with scales 1, 2 and 4, a two-parameter form is held to 4 from 1 and 2, which
    :func:`fit`'s own choice on two scales, a line, could not be); otherwise, or without ``form``, the best form
    the smaller scales allow (:func:`fit`)."""
    r, y = np.asarray(r, dtype=float), np.asarray(y, dtype=float)
    top = float(r.max())
    keep = r < top
    if form is not None and FORMS[form] <= len(np.unique(r[keep])):
        f = fit_form(form, r[keep], y[keep], _rss_floor(y[keep]))
    else:
        f = fit(r[keep], y[keep])
    return HeldOut(top, float(f.predict(top)), float(y[~keep].mean()))


def prediction_interval(r: np.ndarray, y: np.ndarray, form: str, at: float, draws: int = 1000, seed: int = 0,
                        confidence: float = 0.95) -> tuple[float, float]:
    """A bootstrap prediction interval (MiB/s) of one measurement at ``at`` ranks: the repetitions resampled within
    each scale and ``form`` refitted ``draws`` times, each refit's prediction times (1 + a relative residual of the
    fit on all repetitions drawn at random, widened by √(n / (n − k)) for the k parameters fitted): the model's
    uncertainty and the spread of one measurement about it. Seeded: the same data give the same interval."""
    r, y = np.asarray(r, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    base = fit_form(form, r, y)
    fitted = base.predict(r)
    rel = y / fitted - 1.0
    k = FORMS[form]
    rel = rel * np.sqrt(len(y) / (len(y) - k)) if len(y) > k else rel
    groups = [np.flatnonzero(r == s) for s in np.unique(r)]
    preds = np.empty(draws)
    for b in range(draws):
        idx = np.concatenate([rng.choice(g, len(g)) for g in groups])
        preds[b] = fit_form(form, r[idx], y[idx]).predict(at)
    preds = preds * (1.0 + rng.choice(rel, draws))
    a = (1 - confidence) / 2
    lo, hi = np.quantile(preds, [a, 1 - a])
    return float(max(lo, 0.0)), float(hi)
