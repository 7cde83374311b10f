"""AutoTVM (Chen et al., NeurIPS'18): a learned cost model steering what gets measured.

Each batch: fit the XGBoost model on everything measured so far, walk the space with parallel
simulated annealing on the model's scores (persistent chains, a neighbour moves one knob to an
adjacent value, temperature falling linearly, early stop when the best-seen set stops
changing), take the top unvisited candidates (optionally a diversity-aware pick among the top
λ·b) and add ε·b random configs. The first batch is random. Defaults follow TVM's XGBTuner and
SimulatedAnnealingOptimizer: plan size 64, 128 chains, 500 steps, early stop 50, ε = 0.05.
Transfer learning: records of other workloads train a global model whose scores are the base
margin of the local one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.cost_model import XGBCostModel, normalized_throughput
from autotune.features import featurize
from autotune.measure import read_records
from autotune.resources import allowed
from autotune.space import COLUMN, SPACE, Config, Space
from autotune.tuners import IncrementalTuner, IndexSession, Trials, configure, unvisited
from autotune.workload import Workload


@dataclass
class Overhead:
    """Tuner-side seconds per batch: model fitting and exploration."""

    fit_s: list[float] = field(default_factory=list)
    explore_s: list[float] = field(default_factory=list)


class SimulatedAnnealing:
    """Parallel simulated annealing over a scoring function; chains persist between calls."""

    def __init__(self, space: Space = SPACE, n_chains: int = 128, steps: int = 500, early_stop: int = 50,
                 temperature: tuple[float, float] = (1.0, 0.0)):
        self.space, self.n_chains, self.steps, self.early_stop = space, n_chains, steps, early_stop
        self.temperature = temperature
        self.chains: np.ndarray | None = None

    def top(self, score, k: int, exclude: set[int], rng: np.random.Generator, pool: np.ndarray,
            starts: np.ndarray | None = None) -> np.ndarray:
        """The ``k`` best-scored configs seen on the walk that are not in ``exclude``; ``starts``
        (e.g. the best measured configs) replace as many chains before the walk."""
        if self.chains is None:
            self.chains = rng.choice(pool, size=self.n_chains)
        if starts is not None and len(starts):
            self.chains = self.chains.copy()
            self.chains[:min(len(starts), self.n_chains)] = starts[:self.n_chains]
        banned = np.fromiter(exclude, dtype=np.int64, count=len(exclude))
        cur = self.chains
        cur_s = score(cur)
        top_i, top_s = self._merge(np.empty(0, np.int64), np.empty(0), cur, cur_s, banned, k)
        t0, t1 = self.temperature
        stale = 0
        for step in range(self.steps):
            temp = t0 + (t1 - t0) * step / max(self.steps - 1, 1)
            new = self.space.random_neighbours(cur, rng)
            new_s = score(new)
            with np.errstate(over="ignore"):
                accept = (new_s > cur_s) | (rng.random(len(cur)) < np.exp((new_s - cur_s) / max(temp, 1e-9)))
            cur = np.where(accept, new, cur)
            cur_s = np.where(accept, new_s, cur_s)
            nxt_i, nxt_s = self._merge(top_i, top_s, new, new_s, banned, k)
            stale = stale + 1 if np.array_equal(np.sort(nxt_i), np.sort(top_i)) else 0
            top_i, top_s = nxt_i, nxt_s
            if stale >= self.early_stop:
                break
        self.chains = cur
        return top_i[np.argsort(-top_s, kind="stable")]

    @staticmethod
    def _merge(top_i: np.ndarray, top_s: np.ndarray, new_i: np.ndarray, new_s: np.ndarray, banned: np.ndarray,
               k: int) -> tuple[np.ndarray, np.ndarray]:
        keep = ~np.isin(new_i, banned) & ~np.isin(new_i, top_i)
        new_i, new_s = new_i[keep], new_s[keep]
        new_i, first = np.unique(new_i, return_index=True)
        new_s = new_s[first]
        all_i, all_s = np.concatenate([top_i, new_i]), np.concatenate([top_s, new_s])
        if len(all_i) <= k:
            return all_i, all_s
        part = np.argpartition(-all_s, k - 1)[:k]
        return all_i[part], all_s[part]


def diverse_pick(candidates: np.ndarray, scores: np.ndarray, k: int, space: Space) -> np.ndarray:
    """Greedy submodular pick: score (normalized) plus how many new knob values a config covers."""
    digits = space.digits(candidates)
    s = (scores - scores.min()) / (np.ptp(scores) or 1.0)
    covered: list[set[int]] = [set() for _ in range(digits.shape[1])]
    chosen: list[int] = []
    left = list(range(len(candidates)))
    while left and len(chosen) < k:
        gain = [s[i] + sum(digits[i, j] not in covered[j] for j in range(digits.shape[1])) / digits.shape[1]
                for i in left]
        best = left.pop(int(np.argmax(gain)))
        chosen.append(best)
        for j in range(digits.shape[1]):
            covered[j].add(int(digits[best, j]))
    return candidates[chosen]


@dataclass(frozen=True)
class AutoTVMConfig:
    """AutoTVM's settings as one value (checked when made); ``transfer`` is a tuple of record
    files, ``no_rfactor`` a template space without split-K (as AutoTVM's matmul templates),
    ``restart_from_best`` the chains restarted at the best measured configs each batch."""

    features: str = "program"
    objective: str = "rank"
    plan_size: int = 64
    n_chains: int = 128
    sa_steps: int = 500
    early_stop: int = 50
    epsilon: float = 0.05
    diversity: bool = False
    diversity_ratio: int = 3
    transfer: tuple[str | Path, ...] = ()
    space: Space = SPACE
    temperature: tuple[float, float] = (1.0, 0.0)
    no_rfactor: bool = False
    restart_from_best: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.epsilon <= 1:
            raise ValueError(f"epsilon must be in [0, 1], got {self.epsilon}")
        object.__setattr__(self, "transfer", tuple(self.transfer))


AUTOTVM_PRESETS: dict[str, AutoTVMConfig] = {
    "autotvm": AutoTVMConfig(),
    "autotvm-b16": AutoTVMConfig(plan_size=16, restart_from_best=16),
    "autotvm-no-rfactor": AutoTVMConfig(no_rfactor=True),
}
"""Named settings: AutoTVM as published; refitting every 16 measurements with 16 chains restarted
each batch at the best measured configs (Ansor seeds its evolution the same way); without split-K."""


class AutoTVM(IncrementalTuner):
    """Model-guided tuner on the common interface (see the module docstring), set by an
    :class:`AutoTVMConfig` (a preset of :data:`AUTOTVM_PRESETS`, or the default) with any of its
    fields overridden by keyword."""

    name = "autotvm"
    presets = AUTOTVM_PRESETS

    def __init__(self, config: AutoTVMConfig = AutoTVMConfig(), **overrides: Any):
        configure(self, config, overrides)
        self.name = "autotvm" + ("-no-rfactor" if self.no_rfactor else "")
        self.overhead = Overhead()

    # ------------------------------------------------------------------ transfer
    def global_model(self, target: Workload, random_state: int) -> XGBCostModel | None:
        """A model trained on the transfer records of workloads other than ``target``."""
        X, y, groups = [], [], []
        for path in self.transfer:
            by_key: dict[str, list[dict]] = {}
            for rec in read_records(path):
                if rec["workload"] != target.key:
                    by_key.setdefault(rec["workload"], []).append(rec)
            for gi, recs in enumerate(by_key.values(), start=len(groups)):
                w = Workload(recs[0]["M"], recs[0]["N"], recs[0]["K"], recs[0].get("epilogue", "none"),
                             kind=recs[0].get("kind", "matmul"), batch=recs[0].get("batch", 1))
                cfg = np.array([Config.from_dict(r["config"]).as_tuple() for r in recs])
                t = np.array([np.inf if r["time_us"] is None else r["time_us"] for r in recs])
                X.append(featurize(self.features, w, cfg))
                y.append(normalized_throughput(t, np.zeros(len(t))))
                groups.append(np.full(len(t), gi))
        if not X:
            return None
        return XGBCostModel(self.objective, random_state=random_state).fit(
            np.concatenate(X), np.concatenate(y), np.concatenate(groups))

    # ------------------------------------------------------------------ tuning
    def start(self, workload: Workload, seed: int = 0) -> AutoTVMSession:
        return AutoTVMSession(self, workload, seed if self.seed is None else self.seed)

    def _random(self, pool: np.ndarray, visited: set[int], k: int, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(0, dtype=np.int64)
        while len(out) < k:
            draw = rng.choice(pool, size=2 * k)
            out = np.concatenate([out, unvisited(draw, visited | set(out.tolist()), k - len(out))])
        return out

    def _model_batch(self, model: XGBCostModel, workload: Workload, sa: SimulatedAnnealing, pool: np.ndarray,
                     visited: set[int], b: int, rng: np.random.Generator, trials: Trials) -> np.ndarray:
        legal_mask = np.zeros(len(self.space), dtype=bool)
        legal_mask[pool] = True
        # the model's score of every legal config, predicted at once: the walk's 64,000 look-ups
        # (128 chains x 500 steps) then cost nothing, where 500 predictions of 128 rows cost ~1 s
        table = np.full(len(self.space), -1e9)
        table[pool] = model.predict(featurize(self.features, workload, self.space.values(pool)))

        def score(idx: np.ndarray) -> np.ndarray:
            return table[idx]

        n_random = int(round(self.epsilon * b))
        n_model = b - n_random
        want = n_model * (self.diversity_ratio if self.diversity else 1)
        starts = None
        if self.restart_from_best and trials.indices:
            order = np.argsort(np.array(trials.times))[:self.restart_from_best]
            starts = np.array(trials.indices, dtype=np.int64)[order]
        cands = sa.top(score, want, visited, rng, pool, starts)
        cands = cands[legal_mask[cands]]
        if self.diversity and len(cands) > n_model:
            cands = diverse_pick(cands, score(cands), n_model, self.space)
        picked = [int(i) for i in cands[:n_model]]
        taken = visited | set(picked)
        picked += [int(i) for i in self._random(pool, taken, b - len(picked), rng)]
        return np.array(picked, dtype=np.int64)


class AutoTVMSession(IndexSession):
    """One AutoTVM run: each batch refits the model on everything measured so far (the first
    batch is random, or the transfer model's pick) and walks the space with the persistent
    annealing chains."""

    def __init__(self, tuner: AutoTVM, workload: Workload, seed: int):
        super().__init__(tuner.space)
        self.tuner, self.workload, self.seed = tuner, workload, seed
        self.batch_size = tuner.plan_size
        self.rng = np.random.default_rng(seed)
        space = tuner.space
        allv = space.all_values()
        ok = allowed(space, allv) & ((allv[:, COLUMN["split_k"]] == 1) if tuner.no_rfactor else True)
        self.pool = np.flatnonzero(ok)
        self.base = tuner.global_model(workload, seed) if tuner.transfer else None
        self.sa = SimulatedAnnealing(space, tuner.n_chains, tuner.sa_steps, tuner.early_stop, tuner.temperature)
        tuner.overhead = Overhead()

    def next_batch(self, n: int) -> list[Config]:
        t, space = self.tuner, self.tuner.space
        t0 = time.perf_counter()
        visited = self.proposed
        if not self.trials.indices and self.base is None:
            batch = t._random(self.pool, visited, n, self.rng)
            t.overhead.fit_s.append(0.0)
        else:
            model = XGBCostModel(t.objective, random_state=self.seed, base=self.base)
            if self.trials.indices:
                cfg = space.values(np.array(self.trials.indices))
                model.fit(featurize(t.features, self.workload, cfg),
                          normalized_throughput(np.array(self.trials.times), np.zeros(len(self.trials.times))))
            else:
                model = self.base  # transfer: the first batch comes from the global model alone
            t1 = time.perf_counter()
            t.overhead.fit_s.append(t1 - t0)
            t0 = t1
            batch = t._model_batch(model, self.workload, self.sa, self.pool, visited, n, self.rng, self.trials)
        t.overhead.explore_s.append(time.perf_counter() - t0)
        return self.propose(batch)
