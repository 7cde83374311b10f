"""The tuner base layer and the simple tuners, on one incremental interface (TVM's Tuner):
``tuner.start(workload, seed)`` opens a :class:`Session`; ``session.next_batch(n)`` proposes
configs and ``session.update(results)`` reads their measurements back. :func:`drive` runs a
session to a trial budget, and every tuner's ``tune(workload, n_trials, measurer, seed) ->
TuneResult`` is that loop, so the CLI, the experiments and the task scheduler (which hands a
session one unit of trials at a time, with nothing re-run or replayed) share it.

Every tuner only proposes configs and reads back measurements; the best config it returns is the
fastest *measured* one (noise included), as a real tuner's would be. Every tuner is set the same
way: one frozen config value (``Tuner(config, **overrides)``, see :func:`configure`), and every
registered one is a :class:`TunerRow` naming its class and the preset it starts from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

import numpy as np

from autotune.measure import Measurer, MeasureResult
from autotune.resources import allowed
from autotune.space import SPACE, Config, Space
from autotune.workload import Workload
from eqsat.refs import resolve


def configure(tuner: Any, config: Any, overrides: Mapping[str, Any]) -> None:
    """Set ``tuner`` by one frozen config value: ``config`` with ``overrides`` (field -> value)
    replaced, checked when made, kept as ``tuner.config`` and each field as an attribute of the
    same name (a misspelt field is a TypeError, not a silent default)."""
    tuner.config = replace(config, **overrides)
    for f in fields(tuner.config):
        setattr(tuner, f.name, getattr(tuner.config, f.name))


@dataclass(frozen=True)
class TunerRow:
    """A registered tuner (or bound): its class as ``"module:Class"``, imported when built so that
    listing the names loads neither XGBoost nor TVM; the name of the preset in that class's
    ``presets`` it starts from ("": its config's defaults); and whether it searches its own space
    rather than the knobs (MetaSchedule: no sessions, compiled targets only)."""

    tuner: str
    preset: str = ""
    own_space: bool = False

    def build(self, **overrides: Any) -> Any:
        """A new tuner: the row's config with ``overrides`` (config field -> value) replaced."""
        cls = resolve(self.tuner)
        return cls(cls.presets[self.preset], **overrides) if self.preset else cls(**overrides)


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

    def record(self, results: Sequence[MeasureResult], space: Space = SPACE) -> None:
        """Remember measured configs (a failed one as an infinite time)."""
        self.indices.extend(space.index(r.config) for r in results)
        self.times.extend(r.time_us for r in results)


class Session(Protocol):
    """One tuning run of one workload: propose configs, read their measurements back."""

    batch_size: int  # how many configs the tuner prefers to propose at once

    def next_batch(self, n: int) -> list[Config]:
        """At most ``n`` configs not proposed before (empty: nothing left to try)."""
        ...

    def update(self, results: Sequence[MeasureResult]) -> None:
        """The measurements of configs this session proposed."""
        ...


class IndexSession:
    """What every model-based session shares: the configs it proposed (flat indices, never
    proposed twice) and the measurements it read back (:class:`Trials`)."""

    def __init__(self, space: Space):
        self.space = space
        self.trials = Trials()
        self.proposed: set[int] = set()  # every measured config was proposed first

    def propose(self, batch: Sequence[int] | np.ndarray) -> list[Config]:
        """Remember ``batch`` as proposed and return it as configs."""
        self.proposed.update(int(i) for i in batch)
        return [self.space.config(int(i)) for i in batch]

    def update(self, results: Sequence[MeasureResult]) -> None:
        self.trials.record(results, self.space)


class Tuner(Protocol):
    name: str

    def start(self, workload: Workload, seed: int = 0) -> Session: ...

    def tune(self, workload: Workload, n_trials: int, measurer: Measurer, seed: int = 0) -> TuneResult: ...


def drive(session: Session, workload: Workload, n_trials: int, measurer: Measurer, result: TuneResult,
          propose_s: list[float] | None = None) -> TuneResult:
    """Propose, measure and update until ``result`` holds ``n_trials`` measurements (or the
    session has nothing left), in batches of the session's preferred size; the seconds each
    ``next_batch`` took (the tuner's own overhead) are appended to ``propose_s`` if given."""
    while len(result.history) < n_trials:
        start = time.perf_counter()
        configs = session.next_batch(min(session.batch_size, n_trials - len(result.history)))
        if propose_s is not None:
            propose_s.append(time.perf_counter() - start)
        if not configs:
            break
        results = measurer.measure(workload, configs)
        session.update(results)
        result.history.extend(results)
    return result


class IncrementalTuner:
    """``tune`` for a tuner that has ``start``: one session driven to the budget."""

    name = "tuner"

    def start(self, workload: Workload, seed: int = 0) -> Session:
        raise NotImplementedError

    def tune(self, workload: Workload, n_trials: int, measurer: Measurer, seed: int = 0) -> TuneResult:
        return drive(self.start(workload, seed), workload, n_trials, measurer, TuneResult(self.name, workload))


@dataclass
class ListSession:
    """Proposes a fixed sequence of configs in order (grid, random, a list, the oracle's order)."""

    configs: Sequence[Config]
    batch_size: int = 64
    position: int = 0

    def next_batch(self, n: int) -> list[Config]:
        out = list(self.configs[self.position:self.position + n])
        self.position += len(out)
        return out

    def update(self, results: Sequence[MeasureResult]) -> None:
        pass


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


class _Indexed(Sequence[Config]):
    """Configs of a space by flat index, built as they are read (a space has ~10^5 of them)."""

    def __init__(self, space: Space, order: np.ndarray):
        self.space, self.order = space, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self.space.config(int(i)) for i in self.order[k]]
        return self.space.config(int(self.order[k]))


@dataclass(frozen=True)
class EnumerationConfig:
    """Grid and random search's settings: the space walked, whether configs this machine cannot
    run are skipped, and the configs proposed per batch."""

    space: Space = SPACE
    skip_illegal: bool = True
    batch: int = 64


class GridSearch(IncrementalTuner):
    """Configs in lexicographic order of the knobs (split-K first, then BLOCK_M, ...)."""

    name = "grid"

    def __init__(self, config: EnumerationConfig = EnumerationConfig(), **overrides: Any):
        configure(self, config, overrides)

    def start(self, workload: Workload, seed: int = 0) -> Session:
        order = np.arange(len(self.space))
        if self.skip_illegal:
            order = order[allowed(self.space, self.space.all_values())]
        return ListSession(_Indexed(self.space, order), self.batch)


class RandomSearch(IncrementalTuner):
    """Configs drawn uniformly without replacement (among legal ones unless ``skip_illegal=False``)."""

    name = "random"

    def __init__(self, config: EnumerationConfig = EnumerationConfig(), **overrides: Any):
        configure(self, config, overrides)

    def start(self, workload: Workload, seed: int = 0) -> Session:
        pool = np.arange(len(self.space))
        if self.skip_illegal:
            pool = pool[allowed(self.space, self.space.all_values())]
        return ListSession(_Indexed(self.space, np.random.default_rng(seed).permutation(pool)), self.batch)


def _slide_configs() -> tuple[Config, ...]:
    """The lecture slides' @triton.autotune list: BM 128, BN 128|256, BK 64|128, stages 2|3|4,
    warps 4|8, GROUP_M 8 (24 configs, written for large matrices)."""
    return tuple(
        Config(1, 128, bn, bk, w, s, 8) for bn in (128, 256) for bk in (64, 128) for s in (2, 3, 4) for w in (4, 8)
    )


TRITON_SLIDE_CONFIGS = _slide_configs()

PruneHook = Callable[[Sequence[Config], Workload], Sequence[Config]]


@dataclass(frozen=True)
class TritonConfig:
    """``@triton.autotune``'s arguments: the configs listed, the workload fields that select a
    cache entry (Triton's ``key=['M', 'N', 'K']``) and the ``prune_configs_by`` hook that may drop
    configs before measuring (None: none)."""

    configs: tuple[Config, ...] = TRITON_SLIDE_CONFIGS
    key: tuple[str, ...] = ("M", "N", "K")
    prune_configs_by: PruneHook | None = None

    def __post_init__(self) -> None:
        if not self.configs:
            raise ValueError("TritonAutotune needs at least one config")
        object.__setattr__(self, "configs", tuple(self.configs))
        object.__setattr__(self, "key", tuple(self.key))


class TritonAutotune:
    """``@triton.autotune``: measure every listed config once per key, cache the winner per key
    (set by a :class:`TritonConfig`). A second call with the same key measures nothing."""

    name = "triton"

    def __init__(self, config: TritonConfig = TritonConfig(), **overrides: Any):
        configure(self, config, overrides)
        self.cache: dict[tuple, TuneResult] = {}

    def key_of(self, workload: Workload) -> tuple:
        try:
            return tuple(getattr(workload, k) for k in self.key)
        except AttributeError as exc:
            raise ValueError(f"autotune key {self.key} names a field workloads do not have: {exc}") from None

    def start(self, workload: Workload, seed: int = 0) -> Session:
        """Every listed config (after pruning), in one batch."""
        prune = self.prune_configs_by
        configs = list(prune(self.configs, workload) if prune else self.configs)
        return ListSession(configs, len(configs) or 1)

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
        session = self.start(workload, seed)
        result = drive(session, workload, len(session.configs), measurer, TuneResult(self.name, workload))
        self.cache[k] = result
        return result
