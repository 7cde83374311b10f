"""A gradient-boosted cost model (xgboost) with scikit-learn conventions.

``fit(X, y, groups)`` learns from measured configs; ``predict(X)`` scores configs, higher is
faster. The target is throughput normalized per workload (each workload's best measured config
scores 1, errors 0), so samples from different shapes share one scale. ``objective="rank"``
uses xgboost's pairwise ranking loss within each workload (AutoTVM's rank loss), ``"reg"``
squared error. A ``base`` model (transfer learning, as TVM's XGBTuner does it) supplies the
starting margin, and this model learns the correction on the current workload.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xgboost as xgb

OBJECTIVES = {"rank": "rank:pairwise", "reg": "reg:squarederror"}


def normalized_throughput(times_us: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """1 / time scaled so each group's best is 1; inf (errors) become 0."""
    thr = np.where(np.isfinite(times_us), 1.0 / np.where(np.isfinite(times_us), times_us, 1.0), 0.0)
    out = np.zeros_like(thr)
    for g in np.unique(groups):
        m = groups == g
        top = thr[m].max()
        out[m] = thr[m] / top if top > 0 else 0.0
    return out


class XGBCostModel:
    def __init__(self, objective: str = "rank", n_estimators: int = 80, max_depth: int = 6, learning_rate: float = 0.3,
                 random_state: int = 0, base: XGBCostModel | None = None):
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
        self.objective, self.n_estimators, self.max_depth = objective, n_estimators, max_depth
        self.learning_rate, self.random_state, self.base = learning_rate, random_state, base
        self.booster: xgb.Booster | None = None

    def _params(self) -> dict:
        params = {"objective": OBJECTIVES[self.objective], "max_depth": self.max_depth, "eta": self.learning_rate,
                  "seed": self.random_state, "nthread": 1, "verbosity": 0, "min_child_weight": 1e-3, "lambda": 1.0}
        if self.objective == "rank":  # every sample against 32 random opponents (not LambdaMART's top-k pairs)
            params |= {"lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 32}
        return params

    def _margin(self, X: np.ndarray) -> np.ndarray | None:
        return None if self.base is None else self.base.predict(X)

    def fit(self, X: np.ndarray, y: np.ndarray, groups: Sequence[int] | np.ndarray | None = None,
            sample_weight: np.ndarray | None = None) -> XGBCostModel:
        """Fit on features ``X`` and targets ``y`` (normalized throughput); ``groups`` labels each
        sample's workload (pairs are formed within a group for the rank objective);
        ``sample_weight`` weighs the squared error (Ansor weighs by throughput)."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if len(X) != len(y) or len(X) == 0:
            raise ValueError(f"fit needs as many targets as samples (got {len(X)} and {len(y)})")
        groups = np.zeros(len(X), dtype=np.int64) if groups is None else np.asarray(groups)
        order = np.argsort(groups, kind="stable")
        X, y, groups = X[order], y[order], groups[order]
        weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)[order]
        d = xgb.DMatrix(X, label=y, base_margin=self._margin(X), weight=weight if self.objective == "reg" else None)
        if self.objective == "rank":
            _, sizes = np.unique(groups, return_counts=True)
            d.set_group(sizes)
        self.booster = xgb.train(self._params(), d, num_boost_round=self.n_estimators)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        if self.booster is None:
            raise RuntimeError("predict before fit")
        X = np.asarray(X, dtype=np.float64)
        return self.booster.predict(xgb.DMatrix(X, base_margin=self._margin(X)), output_margin=True)
