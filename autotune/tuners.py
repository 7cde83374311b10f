"""The tuner base layer and the simple tuners, on one interface:
``tune(workload, n_trials, measurer, seed) -> TuneResult``.

Every tuner only proposes configs and reads back measurements; the best config it returns is the
fastest *measured* one (noise included), as a real tuner's would be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .measure import Measurer, MeasureResult
from .resources import legal
from .space import SPACE, Config, Space
from .workload import Workload


@dataclass
class TuneResult:
    """The measurement history of one tuning run and its best measured config."""

    tuner: str
    workload: Workload
    history: list[MeasureResult] = field(default_factory=list)
    cached: bool = False  # answered from a cache without measuring (Triton autotune, same key)

    @property
    def best(self) -> MeasureResult | None:
        ok = [r for r in self.history if r.ok]
        return min(ok, key=lambda r: r.time_us) if ok else None

    def best_after(self, n: int) -> MeasureResult | None:
        ok = [r for r in self.history[:n] if r.ok]
        return min(ok, key=lambda r: r.time_us) if ok else None

    @property
    def clock_s(self) -> float:
        return self.history[-1].clock_s if self.history else 0.0

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "tuner": self.tuner,
            "workload": self.workload.key,
            "trials": len(self.history),
            "best_config": None if best is None else best.config.as_dict(),
            "best_measured_us": None if best is None else best.time_us,
            "clock_s": self.clock_s,
            "errors": sum(not r.ok for r in self.history),
            "cached": self.cached,
            "history": [
                {
                    "config": r.config.as_dict(),
                    "time_us": r.time_us if r.ok else None,
                    "error": r.error,
                    "clock_s": r.clock_s,
                }
                for r in self.history
            ],
        }


def unvisited(candidates: Sequence[int] | np.ndarray, visited: set[int], k: int) -> np.ndarray:
    """The first ``k`` distinct candidates not in ``visited``, in order (empty for k <= 0)."""
    out: list[int] = []
    seen = set(visited)
    for i in candidates:
        if len(out) >= k:
            break
        i = int(i)
        if i not in seen:
            seen.add(i)
            out.append(i)
    return np.array(out, dtype=np.int64)


@dataclass
class Trials:
    """What a model-based tuner has measured so far: flat config indices and measured times."""

    indices: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    @property
    def visited(self) -> set[int]:
        return set(self.indices)

    def measure(
        self, workload: Workload, batch: Sequence[int], measurer: Measurer, result: TuneResult, space: Space = SPACE
    ) -> None:
        """Measure ``batch``, remember it, and append it to ``result``'s history."""
        results = measurer.measure(workload, [space.config(int(i)) for i in batch])
        self.indices.extend(int(i) for i in batch)
        self.times.extend(r.time_us for r in results)
        result.history.extend(results)


def reselect(result: TuneResult, measurer: Measurer, top_k: int = 5, repeats: int = 5) -> Config | None:
    """Against the winner's curse: re-measure the ``top_k`` fastest measured configs ``repeats``
    times each and return the one with the best mean (the measurements are charged as usual)."""
    finalists = sorted((r for r in result.history if r.ok), key=lambda r: r.time_us)[:top_k]
    if not finalists:
        return None
    means = [
        float(np.mean([x.time_us for x in measurer.measure(result.workload, [f.config] * repeats)])) for f in finalists
    ]
    return finalists[int(np.argmin(means))].config


def measure_all(
    workload: Workload, configs: Sequence[Config], measurer: Measurer, batch: int, result: TuneResult
) -> None:
    for k in range(0, len(configs), batch):
        result.history.extend(measurer.measure(workload, configs[k : k + batch]))


class GridSearch:
    """Configs in lexicographic order of the knobs (split-K first, then BLOCK_M, ...)."""

    name = "grid"

    def __init__(self, space: Space = SPACE, skip_illegal: bool = True, batch: int = 64):
        self.space, self.skip_illegal, self.batch = space, skip_illegal, batch

    def tune(self, workload: Workload, n_trials: int, measurer: Measurer, seed: int = 0) -> TuneResult:
        result = TuneResult(self.name, workload)
        picked: list[int] = []
        start = 0
        while len(picked) < n_trials and start < len(self.space):
            idx = np.arange(start, min(start + 4096, len(self.space)))
            if self.skip_illegal:
                idx = idx[legal(self.space.values(idx))]
            picked.extend(int(i) for i in idx[: n_trials - len(picked)])
            start += 4096
        measure_all(workload, [self.space.config(i) for i in picked], measurer, self.batch, result)
        return result


class RandomSearch:
    """Configs drawn uniformly without replacement (among legal ones unless ``skip_illegal=False``)."""

    name = "random"

    def __init__(self, space: Space = SPACE, skip_illegal: bool = True, batch: int = 64):
        self.space, self.skip_illegal, self.batch = space, skip_illegal, batch

    def tune(self, workload: Workload, n_trials: int, measurer: Measurer, seed: int = 0) -> TuneResult:
        rng = np.random.default_rng(seed)
        pool = np.arange(len(self.space))
        if self.skip_illegal:
            pool = pool[legal(self.space.all_values())]
        picked = rng.choice(pool, size=min(n_trials, len(pool)), replace=False)
        result = TuneResult(self.name, workload)
        measure_all(workload, [self.space.config(int(i)) for i in picked], measurer, self.batch, result)
        return result


def _slide_configs() -> tuple[Config, ...]:
    """The lecture slides' @triton.autotune list: BM 128, BN 128|256, BK 64|128, stages 2|3|4,
    warps 4|8, GROUP_M 8 (24 configs, written for large matrices)."""
    return tuple(
        Config(1, 128, bn, bk, w, s, 8) for bn in (128, 256) for bk in (64, 128) for s in (2, 3, 4) for w in (4, 8)
    )


TRITON_SLIDE_CONFIGS = _slide_configs()

PruneHook = Callable[[Sequence[Config], Workload], Sequence[Config]]


class TritonAutotune:
    """``@triton.autotune``: measure every listed config once per key, cache the winner per key.

    ``key`` names the workload fields that select a cache entry (Triton's ``key=['M', 'N', 'K']``);
    ``prune_configs_by`` may drop configs before measuring, like Triton's hook of that name.
    A second call with the same key measures nothing.
    """

    name = "triton"

    def __init__(
        self,
        configs: Sequence[Config] = TRITON_SLIDE_CONFIGS,
        key: Sequence[str] = ("M", "N", "K"),
        prune_configs_by: PruneHook | None = None,
    ):
        if not configs:
            raise ValueError("TritonAutotune needs at least one config")
        self.configs, self.key, self.prune = tuple(configs), tuple(key), prune_configs_by
        self.cache: dict[tuple, TuneResult] = {}

    def key_of(self, workload: Workload) -> tuple:
        try:
            return tuple(getattr(workload, k) for k in self.key)
        except AttributeError as exc:
            raise ValueError(f"autotune key {self.key} names a field workloads do not have: {exc}") from None

    def tune(
        self, workload: Workload, n_trials: int | None = None, measurer: Measurer | None = None, seed: int = 0
    ) -> TuneResult:
        """``n_trials`` is ignored: autotune measures its whole list (that is its cost)."""
        k = self.key_of(workload)
        if k in self.cache:
            first = self.cache[k]
            return TuneResult(self.name, workload, list(first.history), cached=True)
        if measurer is None:
            raise ValueError("the first call for a key needs a measurer")
        configs = list(self.prune(self.configs, workload) if self.prune else self.configs)
        result = TuneResult(self.name, workload)
        measure_all(workload, configs, measurer, len(configs) or 1, result)
        self.cache[k] = result
        return result
