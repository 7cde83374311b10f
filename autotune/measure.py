"""Measurers: the only way a tuner learns how fast a config is.

:class:`SimulatedMeasurer` runs configs on HypoGPU: it charges compile time plus the repeated
run time to a simulated clock (nothing sleeps), adds seeded noise, and reports illegal configs as
errors, as Triton's "out of resources" does. Every measurement is appended to a JSON-lines
record file. Reopening the file resumes: a tuner that replays its run (same seed) gets the
recorded results back for the configs already measured, without measuring them again.
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from autotune import hypogpu
from autotune.resources import why_illegal
from autotune.space import Config
from autotune.workload import Workload


@dataclass(frozen=True)
class MeasureResult:
    """One measurement: the measured time (inf on error), the error text, and the measurer's clock
    (simulated or real seconds since it started) when it finished."""

    config: Config
    time_us: float
    error: str
    clock_s: float

    @property
    def ok(self) -> bool:
        return not self.error


class Measurer(Protocol):
    name: str

    def measure(self, workload: Workload, configs: Sequence[Config]) -> list[MeasureResult]: ...

    @property
    def clock_s(self) -> float: ...


def _record(workload: Workload, r: MeasureResult, measurer: str, wall_s: float) -> dict[str, Any]:
    return {"workload": workload.key, "M": workload.M, "N": workload.N, "K": workload.K,
            "epilogue": workload.epilogue, "kind": workload.kind, "batch": workload.batch, "config": r.config.as_dict(),
            "time_us": None if not np.isfinite(r.time_us) else r.time_us, "error": r.error,
            "clock_s": r.clock_s, "wall_s": wall_s, "measurer": measurer}


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file. A torn last line (a kill while appending leaves one, with
    no newline after it) is dropped with a warning; any other malformed line is an error naming it."""
    out = []
    with open(path) as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            Config.from_dict(rec["config"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if i == len(lines) and not line.endswith("\n"):
                warnings.warn(f"{path}:{i}: dropped a torn last record (a run was killed while writing it)",
                              stacklevel=2)
                break
            raise ValueError(f"{path}:{i}: not a measurement record ({exc})") from None
        out.append(rec)
    return out


def best_from_records(path: str | Path, workload: Workload) -> tuple[Config, float] | None:
    """The fastest error-free measured config for ``workload`` in a record file (None if none)."""
    best: tuple[Config, float] | None = None
    for rec in read_records(path):
        if rec["workload"] != workload.key or rec["error"] or rec["time_us"] is None:
            continue
        if best is None or rec["time_us"] < best[1]:
            best = (Config.from_dict(rec["config"]), float(rec["time_us"]))
    return best


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line that has no newline (a killed append), so the next append starts clean."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        read_records(path)  # warns about the torn line, or raises if another line is bad
        with open(path, "r+b") as fh:
            fh.truncate(cut)


class RecordLog:
    """Appends records to a JSON-lines file and serves earlier ones back in order on resume."""

    def __init__(self, path: str | Path | None, measurer: str, resume: bool = True):
        self.path = None if path is None else Path(path)
        self.measurer = measurer
        self.replay: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]] = {}
        if self.path is not None and self.path.exists() and resume:
            _drop_torn_tail(self.path)
            for rec in read_records(self.path):
                if rec.get("measurer") == measurer:
                    key = (rec["workload"], Config.from_dict(rec["config"]).as_tuple())
                    self.replay.setdefault(key, []).append(rec)
        elif self.path is not None and self.path.exists():
            self.path.unlink()

    def recorded(self, workload: Workload, config: Config, occurrence: int) -> dict[str, Any] | None:
        found = self.replay.get((workload.key, config.as_tuple()), [])
        return found[occurrence] if occurrence < len(found) else None

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")


class SimulatedMeasurer:
    """HypoGPU behind a noisy, clocked measurement interface.

    The noise of the n-th measurement of a config is drawn from a generator seeded by
    (``seed``, workload, config, n): a resumed run sees exactly the numbers the first run saw.
    """

    name = "hypogpu"

    def __init__(self, seed: int = 0, noise: float = 0.015, compile_s: float = 1.0, repeats: int = 100,
                 records: str | Path | None = None, resume: bool = True, spec: hypogpu.GPUSpec = hypogpu.A100_LIKE):
        self.seed, self.noise, self.compile_s, self.repeats, self.spec = seed, noise, compile_s, repeats, spec
        self.log = RecordLog(records, f"{self.name}:seed={seed}:noise={noise}", resume)
        self._clock = 0.0
        self.count: dict[tuple[str, tuple[int, ...]], int] = {}
        self.measured = 0  # measurements actually run (not replayed from records)

    @property
    def clock_s(self) -> float:
        return self._clock

    def _noise(self, workload: Workload, config: Config, n: int) -> float:
        digest = hashlib.blake2b(f"{self.seed}|{workload.key}|{config.as_tuple()}|{n}".encode(), digest_size=8)
        return float(np.random.default_rng(int.from_bytes(digest.digest(), "little")).normal())

    def measure(self, workload: Workload, configs: Sequence[Config]) -> list[MeasureResult]:
        t0 = time.perf_counter()
        arr = np.array([c.as_tuple() for c in configs], dtype=np.int64).reshape(-1, 7)
        true = hypogpu.time_us(workload, arr, self.spec) if len(arr) else np.zeros(0)
        errors = why_illegal(arr, self.spec.limits)
        out: list[MeasureResult] = []
        fresh: list[dict[str, Any]] = []
        for c, t, err in zip(configs, true, errors):
            key = (workload.key, c.as_tuple())
            n = self.count.get(key, 0)
            self.count[key] = n + 1
            rec = self.log.recorded(workload, c, n)
            if rec is not None:
                self._clock = max(self._clock, rec["clock_s"])
                out.append(MeasureResult(c, float("inf") if rec["time_us"] is None else rec["time_us"],
                                         rec["error"], rec["clock_s"]))
                continue
            self.measured += 1
            self._clock += self.compile_s
            if err:
                r = MeasureResult(c, float("inf"), err, self._clock)
            else:
                value = float(t) * (1.0 + self.noise * self._noise(workload, c, n))
                self._clock += self.repeats * float(t) * 1e-6
                r = MeasureResult(c, value, "", self._clock)
            out.append(r)
            fresh.append(_record(workload, r, self.log.measurer, time.perf_counter() - t0))
        self.log.append(fresh)
        return out

    def true_time_us(self, workload: Workload, config: Config) -> float:
        """For evaluation only (never for tuning): the noiseless time."""
        return float(hypogpu.time_us(workload, np.array([config.as_tuple()]), self.spec)[0])
