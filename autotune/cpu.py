"""A real measurer: time the minitriton tiled matmul on this CPU, behind the same interface.

Tile sizes, split-K and the launch order change real costs here (Python overhead per tile,
cache reuse, BLAS call sizes); num_warps and num_stages have no CPU meaning and only add noise.
Every tuner can run against it unchanged, on real, noisy hardware.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from autotune.measure import MeasureResult, RecordLog, _record
from autotune.minitriton import run
from autotune.space import Config
from autotune.workload import Workload

MAX_WORK = 2 ** 28  # M*N*K above this is too slow for a Python tile loop: use a smaller shape


class CpuMeasurer:
    """Wall-clock timing (best of ``repeats``) of the tiled FP32 kernel on seeded random inputs."""

    name = "cpu"

    def __init__(self, seed: int = 0, repeats: int = 3, records: str | Path | None = None, resume: bool = True):
        self.seed, self.repeats = seed, repeats
        self.log = RecordLog(records, f"{self.name}:seed={seed}", resume)
        self._start = time.perf_counter()
        self._inputs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.count: dict[tuple[str, tuple[int, ...]], int] = {}
        self.measured = 0

    @property
    def clock_s(self) -> float:
        return time.perf_counter() - self._start

    def _operands(self, workload: Workload) -> tuple[np.ndarray, np.ndarray]:
        if workload.M * workload.N * workload.K > MAX_WORK:
            raise ValueError(f"{workload.key} is too large for the CPU measurer (M*N*K > {MAX_WORK}); "
                             f"use a shape like 256x256x256")
        if workload.key not in self._inputs:
            rng = np.random.default_rng(self.seed)
            self._inputs[workload.key] = (rng.standard_normal((workload.M, workload.K), dtype=np.float32),
                                          rng.standard_normal((workload.K, workload.N), dtype=np.float32))
        return self._inputs[workload.key]

    def measure(self, workload: Workload, configs: Sequence[Config]) -> list[MeasureResult]:
        a, b = self._operands(workload)
        out, fresh = [], []
        for c in configs:
            key = (workload.key, c.as_tuple())
            n = self.count.get(key, 0)
            self.count[key] = n + 1
            rec = self.log.recorded(workload, c, n)
            if rec is not None:
                out.append(MeasureResult(c, rec["time_us"], rec["error"], rec["clock_s"]))
                continue
            t0 = time.perf_counter()
            best = float("inf")
            for _ in range(self.repeats):
                s = time.perf_counter()
                run(a, b, c, relu=workload.epilogue == "relu", dtype=np.float32)
                best = min(best, time.perf_counter() - s)
            self.measured += 1
            r = MeasureResult(c, best * 1e6, "", self.clock_s)
            out.append(r)
            fresh.append(_record(workload, r, self.log.measurer, time.perf_counter() - t0))
        self.log.append(fresh)
        return out
