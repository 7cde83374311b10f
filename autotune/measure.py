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
import math
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


MAX_TIME_US = 1e12  # 11.6 days for one kernel: past it a record is damage (as eqsat.cost.measured.timer's)


def _positive_finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= MAX_TIME_US


def _non_negative_finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def record_problem(rec: Any) -> str | None:
    """Why ``rec`` is not a measurement record (a field missing, of the wrong type or out of range:
    a time that is not finite and positive), or None: a negative ``time_us`` became the best."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    for field, kind in (("workload", str), ("error", str), ("measurer", str), ("config", dict)):
        if not isinstance(rec.get(field), kind):
            return f"{field} missing or not a {kind.__name__}"
    for field in ("M", "N", "K"):
        if not (isinstance(rec.get(field), int) and not isinstance(rec[field], bool) and 0 < rec[field] <= 2**31):
            return f"{field} missing or not a positive integer"
    if not (rec.get("time_us") is None or _positive_finite(rec["time_us"])):
        return f"time_us neither null nor a time in (0, {MAX_TIME_US:g}] us"
    if rec["time_us"] is None and not rec["error"]:
        return "time_us null without an error"
    if not _non_negative_finite(rec.get("clock_s")):
        return "clock_s missing or not a finite number >= 0"
    try:
        Config.from_dict(rec["config"])
    except (TypeError, ValueError, OverflowError) as exc:
        return f"config: {exc}"
    return None


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The valid records of a JSON-lines file. A line that does not parse (a torn last line of a
    killed append among them) or is not a valid record is skipped, never used and never deleted:
    their count and first line numbers come in one warning naming the file."""
    out, bad = [], []
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            bad.append((i, "not JSON"))
            continue
        why = record_problem(rec)
        if why is not None:
            bad.append((i, why))
            continue
        out.append(rec)
    if bad:
        shown = "; ".join(f"line {i}: {why}" for i, why in bad[:3]) + ("; ..." if len(bad) > 3 else "")
        warnings.warn(f"{path}: {len(bad)} invalid record(s) skipped, kept in the file ({shown})", stacklevel=2)
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


class RecordLog:
    """Appends records to a JSON-lines file and serves earlier ones back in order on resume."""

    def __init__(self, path: str | Path | None, measurer: str, resume: bool = True):
        self.path = None if path is None else Path(path)
        self.measurer = measurer
        self.replay: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]] = {}
        if self.path is not None and self.path.exists() and resume:
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
        with open(self.path, "a+b") as fh:
            text = "".join(json.dumps(row) + "\n" for row in rows)
            if fh.tell() and (fh.seek(fh.tell() - 1), fh.read(1))[1] != b"\n":
                text = "\n" + text  # end a torn last line: it stays one invalid line, skipped on reading
            fh.write(text.encode())


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
