"""A tuner built to be good on every seed at small budgets (128 trials), on the common interface.

What the learned tuners lacked, measured against the perfect-model bound, and what this one does
instead:

* **A diverse first batch.** Random configs cluster where the space is dense; the first batch is
  a farthest-point sample of the legal configs in the (standardized) program-feature space, so
  the model sees every regime (split-K or not, small and large tiles, few and many warps).
* **Uncertainty-aware selection.** An ensemble of boosted rankers, each fit on a bootstrap
  resample of the measurements with its own seed; a config's score is the ensemble's mean
  z-scored prediction plus ``kappa`` times their spread (an upper confidence bound), so a region
  the models disagree on gets measured instead of ignored.
* **Exploring near-ties.** The space is small enough (~10^5 legal configs) to score every legal
  config each batch, which replaces simulated annealing and its seed-dependent walk. Configs
  the models cannot tell apart (a plateau of equal predicted time, as on decode) differ only in
  what no feature predicts; part of every batch (``local``) goes to the best-predicted configs
  within ``radius`` knobs (any values) of the best measured configs, the measured way through a
  plateau. Two knobs, not one: the models' error near the top is as large as the gaps there,
  and good tiles differ from good tiles in pairs of knobs that move together (the tile and the
  warps, the K step and the stages), so a measured two-knob step gets where the model cannot.
* **Small batches.** The models are refit every ``batch`` measurements.
* **A prior from the datasheet** (``prior="analytic"``, the default). The models learn how far
  :func:`autotune.analytic.estimate_us` (Triton's kind of perf model: the vendor's peak numbers,
  the config's resources, the shape) is off for each config, in log time, instead of the whole
  landscape; the first batch is that estimate's best config for every value of every knob, so
  each knob's correction is measured once, then a farthest-point spread. ``prior="none"`` ranks
  from the measurements alone.
* **Additive members** (``additive``). Beside the boosted trees, the ensemble holds ridge fits of
  the correction on one-hot knob values: each knob value's effect adds up, so they predict
  combinations never measured together (split-K 2 *and* 4 warps *and* one stage), where trees
  extrapolate flat. Where the two kinds disagree the spread is large, and the upper confidence
  bound sends measurements there.
* **A bonus for the unexplored** (``novelty``). The spread of models fit to the same
  measurements is small far from them, so the spread alone does not send measurements to a
  config several knobs from every measured one; the upper confidence bound adds ``novelty`` (in
  the score's units: log time with the prior) per knob in which a config differs from its
  nearest measured config.
* **One tile, at most twice a batch** (``per_family``). Configs that differ only in ``group_m``
  are nearly ties whose order is the unmodeled factor; without the cap a batch filled up with
  one tile's launch orders.

Every choice is seeded by ``start(workload, seed)``. What each choice measured is in
docs/results/README.md (the tuning-budget section).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.analytic import estimate_us
from autotune.cost_model import XGBCostModel, normalized_throughput
from autotune.features import featurize
from autotune.resources import allowed
from autotune.space import SPACE, Config, Space, knob_distance
from autotune.tuners import IncrementalTuner, IndexSession, configure
from autotune.workload import Workload

PRIORS = ("analytic", "none")
"""``analytic``: the models learn the correction to :func:`autotune.analytic.estimate_us`;
``none``: they rank configs from the measurements alone."""


@dataclass(frozen=True)
class RobustConfig:
    """The robust tuner's settings as one value (checked when made). ``first``: size of the
    space-filling first batch; ``ensemble``:
    models per fit; ``kappa``: weight of the ensemble's spread; ``local``: share of each batch
    spent near the best measured configs, on configs at most ``radius`` knobs from one of them;
    ``prior``: one of :data:`PRIORS` (with
    ``analytic`` the models regress the log-time correction, and ``objective`` applies to
    ``none`` only); ``per_family``: configs per tile (all knobs but ``group_m``) in one batch's
    model-picked part (0: no cap); ``additive``: ridge members (penalty ``ridge`` per sample) in
    the ensemble, with the prior only; ``novelty``: score bonus per knob of distance to the
    nearest measured config."""

    batch: int = 16
    first: int = 32
    ensemble: int = 4
    kappa: float = 1.0
    local: float = 0.25
    top_measured: int = 4
    features: str = "program"
    n_estimators: int = 60
    objective: str = "rank"
    prior: str = "analytic"
    per_family: int = 2
    additive: int = 2
    ridge: float = 0.1
    novelty: float = 0.03
    radius: int = 2
    space: Space = SPACE

    def __post_init__(self) -> None:
        if not 0 <= self.local <= 1:
            raise ValueError(f"local must be in [0, 1], got {self.local}")
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}; choose from {', '.join(PRIORS)}")
        if self.novelty < 0:
            raise ValueError(f"novelty must be at least 0, got {self.novelty}")
        if self.radius < 1:
            raise ValueError(f"radius must be at least 1, got {self.radius}")
        if self.batch < 1 or self.first < 1 or self.ensemble < 1:
            raise ValueError("batch, first and ensemble must be at least 1")


ROBUST_PRESETS: dict[str, RobustConfig] = {"robust": RobustConfig(), "robust-no-prior": RobustConfig(prior="none")}
"""Named settings: the tuner as registered, and without the datasheet prior."""


class RobustTuner(IncrementalTuner):
    """See the module docstring; set by a :class:`RobustConfig` (a preset of
    :data:`ROBUST_PRESETS`, or the default) with any of its fields overridden by keyword."""

    name = "robust"
    presets = ROBUST_PRESETS

    def __init__(self, config: RobustConfig = RobustConfig(), **overrides: Any):
        configure(self, config, overrides)
        self.plan_size = self.batch

    def start(self, workload: Workload, seed: int = 0) -> RobustSession:
        return RobustSession(self, workload, seed)


def farthest_points(points: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``k`` rows of ``points`` spread over them: a random first row, then each next
    row the one farthest from those chosen (Gonzalez's greedy k-center)."""
    k = min(k, len(points))
    chosen = [int(rng.integers(len(points)))]
    dist = np.linalg.norm(points - points[chosen[0]], axis=1)
    while len(chosen) < k:
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(points - points[nxt], axis=1))
    return np.array(chosen, dtype=np.int64)


class RobustSession(IndexSession):
    """One run of :class:`RobustTuner` on one workload."""

    def __init__(self, tuner: RobustTuner, workload: Workload, seed: int):
        super().__init__(tuner.space)
        self.tuner, self.workload, self.seed = tuner, workload, seed
        self.rng = np.random.default_rng(seed)
        space = tuner.space
        self.pool = np.flatnonzero(allowed(space, space.all_values()))
        self.values = space.values(self.pool)
        self.features = featurize(tuner.features, workload, self.values)
        self.log_estimate = None
        if tuner.prior == "analytic":
            self.log_estimate = np.log(estimate_us(workload, self.values))
            self.features = np.hstack([self.features, self.log_estimate[:, None]])
        self.position = {int(i): k for k, i in enumerate(self.pool)}  # flat index -> row of pool
        digits = space.digits(self.pool)
        self.digits = digits.astype(np.int8)  # knob value indices, small: the distance compares them often
        self.distance, self.counted = np.full(len(self.pool), digits.shape[1], dtype=np.int8), 0
        offsets = np.concatenate([[0], np.cumsum(space.sizes)[:-1]])
        self.onehot = np.zeros((len(self.pool), int(np.sum(space.sizes))))
        self.onehot[np.arange(len(self.pool))[:, None], digits + offsets] = 1.0
        self.family = space.families(self.pool)

    # ------------------------------------------------------------------ proposing
    @property
    def batch_size(self) -> int:
        """The space-filling batch first, then model-guided batches."""
        return self.tuner.first if not self.trials.indices else self.tuner.batch

    def next_batch(self, n: int) -> list[Config]:
        if not self.trials.indices:
            rows = self._space_filling(n)
        else:
            rows = self._model_pick(n)
        return self.propose(self.pool[rows[:n]])

    def _free(self) -> np.ndarray:
        """Rows of the pool not proposed yet."""
        taken = np.fromiter((self.position[i] for i in self.proposed), dtype=np.int64, count=len(self.proposed))
        free = np.ones(len(self.pool), dtype=bool)
        free[taken] = False
        return free

    def _space_filling(self, n: int) -> np.ndarray:
        if self.log_estimate is None:
            return self._spread(np.flatnonzero(self._free()), n)
        chosen = self._knob_sweep()[:n]
        free = self._free()
        free[chosen] = False
        return np.concatenate([chosen, self._spread(np.flatnonzero(free), n - len(chosen))])

    def _knob_sweep(self) -> np.ndarray:
        """For every knob and each of its values, the best-estimated legal config with that
        value: what the correction most needs to learn is how far each knob's effect is off."""
        values, rows = self.values, []
        for j in range(values.shape[1]):
            for v in np.unique(values[:, j]):
                cand = np.flatnonzero(values[:, j] == v)
                r = int(cand[np.argmin(self.log_estimate[cand])])
                if r not in rows:
                    rows.append(r)
        return np.array(rows, dtype=np.int64)

    def _spread(self, candidates: np.ndarray, n: int) -> np.ndarray:
        if n <= 0:
            return np.empty(0, dtype=np.int64)
        sample = self.rng.choice(candidates, size=min(len(candidates), 64 * n), replace=False)
        feats = self.features[sample]
        scale = feats.std(axis=0)
        z = (feats - feats.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
        return sample[farthest_points(z, n, self.rng)]

    def _scores(self, residual: bool) -> tuple[np.ndarray, np.ndarray]:
        """The ensemble's mean and spread of z-scored predictions over the whole pool."""
        rows = np.array([self.position[i] for i in self.trials.indices])
        if residual:
            return self._residual_scores(rows)
        y = normalized_throughput(np.array(self.trials.times), np.zeros(len(rows)))
        preds = []
        for k in range(self.tuner.ensemble):
            boot = self._bootstrap(k, len(rows))
            model = XGBCostModel(self.tuner.objective, n_estimators=self.tuner.n_estimators,
                                 random_state=self.seed * 1000 + len(rows) * 10 + k)
            p = model.fit(self.features[rows[boot]], y[boot]).predict(self.features)
            preds.append((p - p.mean()) / (p.std() or 1.0))
        stacked = np.stack(preds)
        return stacked.mean(axis=0), stacked.std(axis=0)

    def _bootstrap(self, k: int, n: int) -> np.ndarray:
        """Rows for ensemble member ``k``: all of them for the first, a seeded resample otherwise."""
        return self.rng.integers(0, n, size=n) if k else np.arange(n)

    def _residual_scores(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """With the analytic prior: each model learns how much faster than estimated a config
        runs (log scale); the score is minus the corrected log time."""
        times = np.array(self.trials.times)
        ok = np.isfinite(times)
        rows, times = rows[ok], times[ok]
        y = self.log_estimate[rows] - np.log(times)
        preds = []
        for k in range(self.tuner.ensemble):
            boot = self._bootstrap(k, len(rows))
            model = XGBCostModel("reg", n_estimators=self.tuner.n_estimators, max_depth=4, learning_rate=0.2,
                                 random_state=self.seed * 1000 + len(rows) * 10 + k)
            fit = model.fit(self.features[rows[boot]], y[boot])
            preds.append(fit.predict(self.features) - self.log_estimate)
        for k in range(self.tuner.additive):
            boot = self._bootstrap(k, len(rows))
            preds.append(self._additive(rows[boot], y[boot]) - self.log_estimate)
        stacked = np.stack(preds)
        return stacked.mean(axis=0), stacked.std(axis=0)

    def _additive(self, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        """A ridge fit of the correction on one-hot knob values: each knob value's effect adds up,
        so it predicts combinations never measured together, where trees extrapolate flat."""
        X = self.onehot[rows]
        lam = self.tuner.ridge * len(rows)
        coef = np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ (y - y.mean()))
        return self.onehot @ coef + y.mean()

    def _model_pick(self, n: int) -> np.ndarray:
        with_prior = self.log_estimate is not None
        mean, spread = self._scores(with_prior)
        free = self._free()
        n_local = int(round(self.tuner.local * n))
        local = self._near_best(mean, free, n_local)
        free[local] = False
        rest = self._ucb_pick(mean, spread, free, n - len(local))
        return np.concatenate([local, rest]).astype(np.int64)

    def _ucb_pick(self, mean: np.ndarray, spread: np.ndarray, free: np.ndarray, k: int) -> np.ndarray:
        ucb = mean + self.tuner.kappa * spread
        if self.tuner.novelty:
            ucb = ucb + self.tuner.novelty * self._distance_to_measured()
        ucb = np.where(free, ucb, -np.inf)
        order = np.argsort(-ucb, kind="stable")
        order = order[np.isfinite(ucb[order])]
        return self._diverse(order, k) if self.tuner.per_family else order[:k]

    def _distance_to_measured(self) -> np.ndarray:
        """Knobs in which each config differs from its nearest measured config (kept up to date
        as measurements arrive)."""
        new = [self.position[i] for i in self.trials.indices[self.counted:]]
        np.minimum(self.distance, knob_distance(self.digits, self.digits[new]), out=self.distance)
        self.counted = len(self.trials.indices)
        return self.distance

    def _diverse(self, order: np.ndarray, k: int) -> np.ndarray:
        """The first ``k`` of ``order`` taking at most ``per_family`` configs that differ only in
        ``group_m``: the tuner's knob most like a re-roll, which would fill a batch with one tile."""
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        keys = self.family[order[: 64 * k]]
        seen: dict[int, int] = {}
        out: list[int] = []
        for r, key in zip(order[: 64 * k].tolist(), keys.tolist()):
            if seen.get(key, 0) < self.tuner.per_family:
                seen[key] = seen.get(key, 0) + 1
                out.append(r)
                if len(out) == k:
                    break
        return np.array(out, dtype=np.int64)

    def _near_best(self, mean: np.ndarray, free: np.ndarray, k: int) -> np.ndarray:
        """The ``k`` best-predicted free configs that differ from one of the best measured configs
        in at most ``radius`` knobs (each to any of its values)."""
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        order = np.argsort(np.array(self.trials.times), kind="stable")[: self.tuner.top_measured]
        best = [self.position[self.trials.indices[int(i)]] for i in order]
        near = knob_distance(self.digits, self.digits[best]) <= self.tuner.radius
        cand = np.flatnonzero(near & free)
        return cand[np.argsort(-mean[cand], kind="stable")[:k]]
