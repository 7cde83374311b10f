"""Ansor (Zheng et al., OSDI'20): sketches, random annotation, evolutionary fine-tuning.

Each batch: build a population (the best measured programs, 20%, plus random annotations of the
sketches), evolve it for a few generations on the cost model's predicted throughput (mutation of
one knob with probability 0.85, otherwise crossover of the tiling decisions of one parent with the
other decisions of another), then measure the best unvisited programs plus ε·b random ones and
retrain the model. Ansor regresses throughput, weighted by it (``prior="none"``); by default the
model instead learns how far the datasheet estimate (:func:`autotune.analytic.estimate_us`, the
prior the robust tuner uses) is off for each program, in log time: the estimate ranks programs it
has never seen, so a small budget is spent near its best rather than on what the model guesses.
Also added to Ansor's recipe: each batch first measures, for the best measured programs of four
distinct warp counts and each knob, the best-predicted program that differs in that knob alone,
because a mutant survives only by the model's score and a knob value the model has not seen pay is
otherwise never tried. And the candidates are ranked by their score plus ``novelty`` per knob in
which they differ from the nearest measured program, as the robust tuner does, because models fit
to the same measurements agree far from them. What each addition measured is in
docs/results/README.md (the Ansor section).

Ablation variants share the interface:

* ``"beam"``: sequential construction in knob order (split-K, BLOCK_M, BLOCK_N, BLOCK_K, warps,
  stages, GROUP_M), pruning partial programs by the model's score with undecided knobs at their
  "not done yet" defaults, no fine-tuning;
* ``"no-finetune"``: random annotation only, the model picks the best of 1,280 samples;
* ``"limited"``: a template-like space: no rfactor sketch, tiles of 32, 64 or 128 only.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.analytic import estimate_us
from autotune.cost_model import XGBCostModel, normalized_throughput
from autotune.features import featurize
from autotune.resources import allowed
from autotune.sketch import Compute, Sketch, generate_sketches, sketch_space
from autotune.space import COLUMN, SPACE, Config, Space, knob_distance
from autotune.tuners import IncrementalTuner, IndexSession, configure, unvisited
from autotune.workload import Workload

VARIANTS = ("full", "beam", "no-finetune", "limited")
PRIORS = ("analytic", "none")
"""``analytic``: the model learns the log-time correction to the datasheet estimate; ``none``:
Ansor's own throughput regression from the measurements alone."""
TILING = ("split_k", "block_m", "block_n", "block_k")
PARTIAL_DEFAULTS = {"split_k": 1, "block_m": 16, "block_n": 16, "block_k": 16, "num_warps": 4, "num_stages": 1,
                    "group_m": 1}
LIMITED_TILES = (32, 64, 128)


def allowed_configs(workload: Workload, variant: str = "full", space: Space = SPACE) -> tuple[list[Sketch], np.ndarray]:
    """The sketches of ``workload`` and the legal configs they express (restricted for "limited")."""
    sketches = generate_sketches(Compute.of(workload))
    if variant == "limited":
        sketches = [s for s in sketches if "split_k" not in s.holes]
    allv = space.all_values()
    idx = sketch_space(sketches, allv)
    idx = idx[allowed(space, allv[idx])]
    if variant == "limited":
        v = allv[idx]
        ok = np.ones(len(idx), dtype=bool)
        for knob in ("block_m", "block_n", "block_k"):
            ok &= np.isin(v[:, COLUMN[knob]], LIMITED_TILES)
        idx = idx[ok]
    return sketches, idx


def random_annotation(sketches: list[Sketch], pool: np.ndarray, n: int, rng: np.random.Generator,
                      space: Space = SPACE) -> np.ndarray:
    """``n`` complete programs: a sketch chosen uniformly, each hole filled uniformly among the
    values that keep the program legal (rejection sampling against ``pool``)."""
    allowed = np.zeros(len(space), dtype=bool)
    allowed[pool] = True
    out: list[int] = []
    sizes = space.sizes
    while len(out) < n:
        k = max(4 * (n - len(out)), 64)
        which = rng.integers(0, len(sketches), size=k)
        digits = np.stack([rng.integers(0, s, size=k) for s in sizes], axis=1)
        for i, sk in enumerate(sketches):
            rows = which == i
            for knob, value in sk.fixed:
                digits[rows, COLUMN[knob]] = space.knobs[COLUMN[knob]].index(value)
            if "split_k" in sk.holes:  # the rfactor sketch splits the reduction: split-K > 1
                digits[rows, COLUMN["split_k"]] = rng.integers(1, sizes[COLUMN["split_k"]], size=int(rows.sum()))
        idx = space.index_of_digits(digits)
        out.extend(int(i) for i in idx[allowed[idx]][: n - len(out)])
    return np.array(out, dtype=np.int64)


@dataclass(frozen=True)
class AnsorConfig:
    """Ansor's settings as one value (checked when made): ``variant`` selects an ablation,
    ``prior`` one of :data:`PRIORS`, ``novelty`` the ranking bonus per knob of distance to the
    measured programs (in the model's score units: log time with the prior)."""

    variant: str = "full"
    batch: int = 64
    population: int = 2048
    generations: int = 4
    mutation_prob: float = 0.85
    measured_fraction: float = 0.2
    epsilon: float = 0.05
    beam_width: int = 64
    samples_per_batch: int = 1280
    lines: int = 4
    niche: tuple[str, ...] = ("num_warps",)
    prior: str = "analytic"
    novelty: float = 0.01
    space: Space = SPACE

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown Ansor variant {self.variant!r}; choose from {', '.join(VARIANTS)}")
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}; choose from {', '.join(PRIORS)}")
        if self.novelty < 0:
            raise ValueError(f"novelty must be at least 0, got {self.novelty}")
        object.__setattr__(self, "novelty", float(self.novelty))

    @property
    def name(self) -> str:
        return ("ansor" if self.variant == "full" else f"ansor-{self.variant}") + (
            "-no-prior" if self.prior == "none" else "")


ANSOR_PRESETS: dict[str, AnsorConfig] = {c.name: c for c in (
    AnsorConfig(), AnsorConfig(prior="none"), *(AnsorConfig(variant=v) for v in VARIANTS if v != "full"))}
"""Named settings, by the tuner name each gives: ``ansor``, ``ansor-no-prior`` and one per ablation."""


class Ansor(IncrementalTuner):
    """Sketch-based tuner on the common interface, set by an :class:`AnsorConfig` (a preset of
    :data:`ANSOR_PRESETS`, or the default) with any of its fields overridden by keyword."""

    name = "ansor"
    presets = ANSOR_PRESETS

    def __init__(self, config: AnsorConfig = AnsorConfig(), **overrides: Any):
        configure(self, config, overrides)
        self.name = self.config.name

    def start(self, workload: Workload, seed: int = 0) -> AnsorSession:
        return AnsorSession(self, workload, seed)

    def _features(self, workload: Workload, idx: np.ndarray) -> np.ndarray:
        """Program features, and with the prior the log of the datasheet estimate last."""
        values = self.space.values(np.asarray(idx, dtype=np.int64))
        X = featurize("program", workload, values)
        if self.prior == "analytic":
            X = np.hstack([X, np.log(estimate_us(workload, values))[:, None]])
        return X

    def _scorer(self, workload: Workload, measured: list[int],
                times: list[float]) -> Callable[[np.ndarray], np.ndarray]:
        """The model fit on the measurements, as a function from config indices to scores
        (higher is faster)."""
        X, t = self._features(workload, np.array(measured)), np.array(times)
        seed = len(measured)
        if self.prior == "none":
            y = normalized_throughput(t, np.zeros(len(t)))
            model = XGBCostModel("reg", random_state=seed).fit(X, y, sample_weight=np.maximum(y, 1e-3))
            return lambda idx: model.predict(self._features(workload, idx))
        ok = np.isfinite(t)
        if not ok.any():
            return lambda idx: -self._features(workload, idx)[:, -1]
        correction = XGBCostModel("reg", random_state=seed).fit(X[ok], X[ok, -1] - np.log(t[ok]))

        def score(idx: np.ndarray) -> np.ndarray:
            F = self._features(workload, idx)
            return correction.predict(F) - F[:, -1]  # minus the corrected log time
        return score

    def _evolve(self, score, sketches: list[Sketch], pool: np.ndarray, allowed: np.ndarray, measured: list[int],
                times: list[float], rng: np.random.Generator) -> np.ndarray:
        n_best = int(self.measured_fraction * self.population)
        best = np.array(measured, dtype=np.int64)[np.argsort(np.array(times))][:n_best]
        pop = np.concatenate([best, random_annotation(sketches, pool, self.population - len(best), rng, self.space)])
        seen = [pop]
        tiling_cols = [COLUMN[k] for k in TILING]
        for _ in range(self.generations):
            s = score(pop)
            fitness = np.exp((s - s.max()) / max(s.std(), 1e-9))
            parents = rng.choice(len(pop), size=(len(pop), 2), p=fitness / fitness.sum())
            d1, d2 = self.space.digits(pop[parents[:, 0]]), self.space.digits(pop[parents[:, 1]])
            child = d1.copy()
            mutate = rng.random(len(pop)) < self.mutation_prob
            knob = rng.integers(0, len(self.space.sizes), size=len(pop))
            value = rng.integers(0, self.space.sizes[knob])
            rows = np.flatnonzero(mutate)
            child[rows, knob[rows]] = value[rows]
            cross = np.flatnonzero(~mutate)  # tiling decisions from one parent, the rest from the other
            for j in range(child.shape[1]):
                if j not in tiling_cols:
                    child[cross, j] = d2[cross, j]
            kids = self.space.index_of_digits(child)
            pop = np.where(allowed[kids], kids, pop[parents[:, 0]])
            seen.append(pop)
        return np.unique(np.concatenate(seen))

    def _knob_lines(self, score, allowed: np.ndarray, measured: list[int], times: list[float],
                    visited: set[int]) -> np.ndarray:
        """For each of the ``lines`` best measured programs (with ``niche``, the best of distinct
        values of those knobs: four bests of one warp count are four copies of one local optimum)
        and each knob, the best-predicted unvisited legal program that differs in that knob alone.
        Mutation changes one knob too, but its children survive only by the model's score; a knob
        whose effect the model has not seen (wgrad: 2 warps where 8 were measured) is then never
        tried. A line per knob is measured whatever the model thinks of it, so the incumbent moves
        one knob per batch."""
        if self.lines <= 0 or not measured:
            return np.empty(0, dtype=np.int64)
        order = np.array(measured, dtype=np.int64)[np.argsort(np.array(times), kind="stable")]
        if self.niche:
            names = [k.name for k in self.space.knobs]
            cols = [names.index(k) for k in self.niche]
            keys = [tuple(r) for r in self.space.values(order)[:, cols]]
            first: dict[tuple, int] = {}
            for i, key in zip(order.tolist(), keys):
                first.setdefault(key, i)
            best = np.array(list(first.values())[: self.lines], dtype=np.int64)
        else:
            best = order[: self.lines]
        out: list[int] = []
        taken = set(visited)
        for d in self.space.digits(best):
            for j, size in enumerate(self.space.sizes):
                line = np.repeat(d[None, :], size, axis=0)
                line[:, j] = np.arange(size)
                idx = self.space.index_of_digits(line)
                idx = np.array([i for i in idx[allowed[idx]] if int(i) not in taken], dtype=np.int64)
                if len(idx):
                    out.append(int(idx[np.argmax(score(idx))]))
                    taken.add(out[-1])
        return np.array(out, dtype=np.int64)

    def _beam(self, score, allowed: np.ndarray) -> np.ndarray:
        """Sequential construction pruned by scores of partial programs (undecided knobs at defaults)."""
        order = [k.name for k in self.space.knobs]
        default = np.array([self.space.knobs[COLUMN[n]].index(PARTIAL_DEFAULTS[n]) for n in order])
        beams = default[None, :].copy()
        for j in range(len(order)):
            grown = np.repeat(beams, self.space.sizes[j], axis=0)
            grown[:, j] = np.tile(np.arange(self.space.sizes[j]), len(beams))
            idx = self.space.index_of_digits(grown)
            if j == len(order) - 1:
                grown, idx = grown[allowed[idx]], idx[allowed[idx]]
            keep = np.argsort(-score(idx), kind="stable")[: self.beam_width if j < len(order) - 1 else 4 * self.batch]
            beams = grown[keep]
        return self.space.index_of_digits(beams)


class AnsorSession(IndexSession):
    """One Ansor run: the first batch is random annotation of the sketches; each later one retrains
    the model and evolves (or, per variant, beam-searches or samples) candidates."""

    def __init__(self, tuner: Ansor, workload: Workload, seed: int):
        super().__init__(tuner.space)
        self.tuner, self.workload = tuner, workload
        self.batch_size = tuner.batch
        self.rng = np.random.default_rng(seed)
        self.sketches, self.pool = allowed_configs(workload, tuner.variant, tuner.space)
        self.allowed = np.zeros(len(tuner.space), dtype=bool)
        self.allowed[self.pool] = True

    def next_batch(self, b: int) -> list[Config]:
        t, space, rng, workload = self.tuner, self.tuner.space, self.rng, self.workload
        visited = self.proposed
        if not self.trials.indices:
            batch = unvisited(random_annotation(self.sketches, self.pool, 4 * b, rng, space), visited, b)
        else:
            score = t._scorer(workload, self.trials.indices, self.trials.times)
            if t.variant == "beam":
                cands = t._beam(score, self.allowed)
            elif t.variant == "no-finetune":
                cands = random_annotation(self.sketches, self.pool, t.samples_per_batch, rng, space)
            else:
                cands = t._evolve(score, self.sketches, self.pool, self.allowed, self.trials.indices,
                                  self.trials.times, rng)
            if len(cands):
                rank = score(cands)
                if t.novelty:  # a bonus per knob of distance to the nearest measured program
                    rank = rank + t.novelty * knob_distance(space.digits(cands), space.digits(self.trials.indices))
                cands = cands[np.argsort(-rank, kind="stable")]
            n_random = int(round(t.epsilon * b))
            lines = (t._knob_lines(score, self.allowed, self.trials.indices, self.trials.times, visited)
                     if t.variant == "full" else np.empty(0, dtype=np.int64))[: max(0, b - n_random)]
            batch = np.concatenate([lines, unvisited(cands, visited | set(lines.tolist()),
                                                     b - n_random - len(lines))])
            batch = np.concatenate([batch, unvisited(random_annotation(self.sketches, self.pool, 8 * b, rng, space),
                                                       visited | set(batch.tolist()), b - len(batch))])
        return self.propose(batch)
