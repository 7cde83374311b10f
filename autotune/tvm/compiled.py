"""Measuring configs of a real compiled kernel, as TVM's builder and runner do.

A :class:`Target` turns a (workload, config) into a compiled artifact (a file) and times an
artifact, checking its output against a reference. :class:`CompiledMeasurer` is a
:class:`autotune.measure.Measurer` over a target: a batch is built in a pool of processes (a build
that fails or outlives its timeout is a record with an error), then every artifact runs alone in a
runner process, one at a time (a run that crashes or outlives its timeout is an error record; a
config whose first run is ``cutoff`` times slower than the best so far is not repeated). Every
measurement is appended to the same JSON-lines records as HypoGPU's, with the target, this machine
and the load average it was taken under, so a run resumes from its records.
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autotune.measure import MeasureResult, RecordLog, _record
from autotune.space import Config, Space
from autotune.workload import Workload

CONTENTION = 0.2  # a load average moving by more than this fraction (of at least 1) is a busy machine


class Target(Protocol):
    """A real kernel target: ``build`` writes an artifact under ``folder`` and returns its path
    (raising on a failure); ``run`` returns the median time in µs of ``repeats`` runs of the
    artifact, stopping after one run when it exceeds ``cutoff_us``, and raises on a wrong result;
    ``space`` is the knob space worth searching on it for a workload (its restriction of the knobs)."""

    name: str

    def machine(self) -> str: ...

    def space(self, workload: Workload) -> Space: ...

    def build(self, workload: Workload, config: Config, folder: str) -> str: ...

    def run(self, workload: Workload, artifact: str, repeats: int, cutoff_us: float) -> float: ...


@dataclass(frozen=True)
class Built:
    """A build's outcome: the artifact's path, or the error."""

    config: Config | None  # None: a module another tuner scheduled
    artifact: str
    error: str
    build_s: float


def _build(target: Target, workload: Workload, config: Config, folder: str) -> Built:
    start = time.perf_counter()
    try:
        return Built(config, target.build(workload, config, folder), "", time.perf_counter() - start)
    except Exception as exc:  # a failed build is a record, whatever the compiler raised
        return Built(config, "", f"build error: {type(exc).__name__}: {exc}", time.perf_counter() - start)


def _run(target: Target, workload: Workload, artifact: str, repeats: int, cutoff_us: float) -> tuple[float, str]:
    try:
        return target.run(workload, artifact, repeats, cutoff_us), ""
    except Exception as exc:  # a crash or a wrong result is a record
        return float("inf"), f"run error: {type(exc).__name__}: {exc}"


def _ready(target: Target) -> str:
    """A no-op task: a new worker has started and can unpickle the target."""
    return target.name


class CompiledMeasurer:
    """Builds in a pool of ``build_workers`` processes, runs one at a time in a runner process."""

    def __init__(self, target: Target, records: str | Path | None = None, resume: bool = True,
                 build_workers: int = 2, build_timeout_s: float = 60.0, run_timeout_s: float = 20.0,
                 repeats: int = 10, cutoff: float = 10.0):
        if build_workers < 1 or repeats < 1 or not build_timeout_s > 0 or not run_timeout_s > 0 or not cutoff > 1:
            raise ValueError("build_workers and repeats must be >= 1, the timeouts > 0 and cutoff > 1")
        self.target, self.name = target, target.name
        self.build_workers, self.build_timeout_s, self.run_timeout_s = build_workers, build_timeout_s, run_timeout_s
        self.repeats, self.cutoff = repeats, cutoff
        self.log = RecordLog(records, f"{target.name}:{target.machine()}", resume)
        self.count: dict[tuple[str, tuple[int, ...]], int] = {}
        self.best_us: dict[str, float] = {}
        self.measured = 0
        self.loads: list[float] = []  # the 1-minute load average at each fresh measurement
        self._start = time.perf_counter()
        self._folder = tempfile.mkdtemp(prefix=f"{target.name}-")
        self._context = multiprocessing.get_context("spawn")
        self._pools: dict[str, Any] = {}

    @property
    def contended(self) -> bool:
        """The machine's load moved by more than :data:`CONTENTION` during the run (a busy machine
        moves timings by up to 2x, so the tuners' best times are not comparable with each other)."""
        return bool(self.loads) and max(self.loads) - min(self.loads) > CONTENTION * max(min(self.loads), 1.0)

    @property
    def clock_s(self) -> float:
        return time.perf_counter() - self._start

    def measure(self, workload: Workload, configs: Sequence[Config]) -> list[MeasureResult]:
        out: dict[int, MeasureResult] = {}
        todo: list[tuple[int, Config]] = []
        for i, c in enumerate(configs):
            key = (workload.key, c.as_tuple())
            n = self.count.get(key, 0)
            self.count[key] = n + 1
            rec = self.log.recorded(workload, c, n)
            if rec is None:
                todo.append((i, c))
            else:
                out[i] = MeasureResult(c, float("inf") if rec["time_us"] is None else rec["time_us"], rec["error"],
                                       rec["clock_s"])
        built = self._build_all(workload, [c for _, c in todo])
        fresh = []
        for (i, c), b in zip(todo, built):
            start = time.perf_counter()
            load = os.getloadavg()[0]
            self.loads.append(load)
            time_us, error = (float("inf"), b.error) if b.error else self._run_one(workload, b.artifact)
            if time_us < self.best_us.get(workload.key, float("inf")):
                self.best_us[workload.key] = time_us
            out[i] = MeasureResult(c, time_us, error, self.clock_s)
            self.measured += 1
            fresh.append(_record(workload, out[i], self.log.measurer, b.build_s + time.perf_counter() - start)
                         | {"target": self.name, "machine": self.target.machine(), "loadavg": round(load, 2)})
        self.log.append(fresh)
        return [out[i] for i in range(len(configs))]

    def _pool(self, kind: str, size: int) -> Any:
        """The persistent pool ``kind`` (builders or the runner), started on first use."""
        pool = self._pools.get(kind)
        if pool is None:
            pool = self._pools[kind] = self._context.Pool(size)
            pool.map(_ready, [self.target] * size)  # start-up is not the task's time: wait it out first
        return pool

    def _restart(self, kind: str) -> None:
        """Kill a pool whose task hung; the next use starts a fresh one."""
        pool = self._pools.pop(kind, None)
        if pool is not None:
            pool.terminate()

    def close(self) -> None:
        """Stop the pools and delete the artifacts (a run left one folder in /tmp per measurer)."""
        for kind in list(self._pools):
            self._restart(kind)
        shutil.rmtree(self._folder, ignore_errors=True)

    @property
    def folder(self) -> str:
        """Where the artifacts go (a fresh temporary folder)."""
        return self._folder

    def _build_all(self, workload: Workload, configs: Sequence[Config]) -> list[Built]:
        return self.build_tasks([(_build, (self.target, workload, c, self._folder)) for c in configs])

    def build_tasks(self, tasks: Sequence[tuple[Callable[..., Built], tuple[Any, ...]]]) -> list[Built]:
        """``fn(*args)`` for each task in the build pool, under the build timeout (a hung one is
        a timeout record and restarts the pool): also how another tuner's modules get built."""
        if not tasks:
            return []
        pool = self._pool("build", self.build_workers)
        pending = [pool.apply_async(fn, args) for fn, args in tasks]
        deadline = time.perf_counter() + self.build_timeout_s * -(-len(tasks) // self.build_workers)
        done, hung = [], False
        for (_, args), job in zip(tasks, pending):
            try:
                done.append(job.get(timeout=max(deadline - time.perf_counter(), 0.01)))
            except multiprocessing.TimeoutError:
                hung = True
                config = next((a for a in args if isinstance(a, Config)), None)
                done.append(Built(config, "", f"build timeout: not built within {self.build_timeout_s:g} s", 0.0))
        if hung:
            self._restart("build")
        return done

    def remeasure(self, workload: Workload, config: Config) -> tuple[float, str]:
        """``config`` built and timed afresh with every repeat (no cutoff, not recorded): how a
        tuner's best is re-measured."""
        built = self._build_all(workload, [config])[0]
        return (float("inf"), built.error) if built.error else self.time_artifact(workload, built.artifact)

    def time_artifact(self, workload: Workload, artifact: str) -> tuple[float, str]:
        """An artifact built by anyone, checked and timed by this measurer's runner with every repeat."""
        return self._run_one(workload, artifact, float("inf"))

    def _run_one(self, workload: Workload, artifact: str, cutoff_us: float | None = None) -> tuple[float, str]:
        if cutoff_us is None:
            cutoff_us = self.cutoff * self.best_us.get(workload.key, float("inf"))
        job = self._pool("run", 1).apply_async(_run, (self.target, workload, artifact, self.repeats, cutoff_us))
        try:
            return job.get(timeout=self.run_timeout_s)
        except multiprocessing.TimeoutError:
            self._restart("run")
            return float("inf"), f"run timeout: no result within {self.run_timeout_s:g} s"


def gflops(workload: Workload, time_us: float) -> float:
    """Throughput of a measured time."""
    return workload.flops / (time_us * 1e3) if time_us > 0 else 0.0


def _tvm_llvm(threads: int) -> Target:
    try:
        import tvm  # noqa: F401
    except ImportError:
        raise ValueError("the tvm-llvm target needs the optional extra: pip install '.[tvm]'") from None
    from autotune.tvm.target import TvmLlvmTarget

    return TvmLlvmTarget(threads)


TARGETS: dict[str, Callable[[int], Target]] = {"tvm-llvm": _tvm_llvm}
"""Real kernel targets by name: threads -> a :class:`Target` (a test adds a fake compiler here)."""
