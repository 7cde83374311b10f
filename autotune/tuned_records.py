"""Tuned HypoGPU kernels by GEMM shape: tuned once, kept in a JSON-lines file, reused by every run.

A line holds the GEMM (M, N, K), who tuned it (``oracle`` or ``TUNER@TRIALS``), the tuner's seed,
the configuration it picked, the kernel's true HypoGPU time (re-measured without noise), and the
measurements the tuner spent. Lines are appended under an exclusive lock, one ``write`` each; a line
that does not parse (a torn write) is skipped with a warning naming the file. A file that cannot be
written leaves the kernels in memory, with a warning.
"""
from __future__ import annotations

import fcntl
import json
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from autotune import hypogpu
from autotune.measure import SimulatedMeasurer
from autotune.registry import make_tuner
from autotune.space import SPACE
from autotune.workload import Workload
from eqsat.cost.measured.timer import plausible_us
from eqsat.diskcache import database_path

ENV_PATH = "EQSAT_LAB_HYPOGPU_KERNELS"


@dataclass(frozen=True)
class TunedKernel:
    """The kernel chosen for one GEMM by one source."""

    M: int
    N: int
    K: int
    source: str
    seed: int
    config: tuple[int, ...]
    time_us: float
    trials: int

    def problem(self) -> str | None:
        """Why this kernel, read from a file, cannot be used (a field of the wrong type, a time not
        in (0, 1e12] µs), or None: a negative or 1e308 time became the best or summed to inf."""
        ints = (self.M, self.N, self.K, self.seed, self.trials, *self.config)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
            return "a size, seed, trial count or knob is not an integer >= 0"
        if not isinstance(self.source, str):
            return "source is not a string"
        return None if plausible_us(self.time_us) else "time_us is not a time in (0, 1e12] µs"

    @property
    def key(self) -> tuple[int, int, int, str, int]:
        return (self.M, self.N, self.K, self.source, self.seed)


def default_path() -> Path | None:
    """``$EQSAT_LAB_HYPOGPU_KERNELS``, else ``hypogpu-kernels.jsonl`` in the cache folder (None: the
    cache is off)."""
    return database_path(ENV_PATH)


def tune_kernel(M: int, N: int, K: int, source: str, seed: int) -> TunedKernel:
    """Tune one GEMM on HypoGPU: the oracle's optimum, or a tuner's best measured config after the
    stated trials (noisy measurements, as any tuner sees them), re-measured without noise."""
    workload = Workload(M, N, K)
    if source == "oracle":
        best = hypogpu.optimum(workload)
        config, trials = SPACE.config(best.index).as_tuple(), best.legal
    else:
        name, _, budget = source.partition("@")
        result = make_tuner(name).tune(workload, int(budget), SimulatedMeasurer(seed=seed), seed=seed)
        if result.best is None:
            raise ValueError(f"{source} found no legal kernel for the GEMM {M}x{N}x{K}")
        config, trials = result.best.config.as_tuple(), len(result.history)
    time_us = float(hypogpu.time_us(workload, np.array([config]))[0])
    return TunedKernel(M, N, K, source, seed, tuple(int(v) for v in config), time_us, trials)


class TunedKernels:
    """The tuned kernels of one records file (or of memory only, with ``path=None``)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.kernels: dict[tuple, TunedKernel] = {}
        self.tuned = 0  # kernels tuned by this process (not read from the file)
        self._read()

    def _read(self) -> None:
        if self.path is None or not self.path.exists():
            return
        skipped = 0
        for raw in self.path.read_bytes().splitlines():
            try:
                row = json.loads(raw)
                kernel = TunedKernel(**{**row, "config": tuple(row["config"])})
                if kernel.problem() is not None:
                    raise ValueError
            except (ValueError, TypeError, KeyError, RecursionError):
                skipped += 1
                continue
            self.kernels.setdefault(kernel.key, kernel)
        if skipped:
            warnings.warn(f"{self.path}: {skipped} line(s) that are not tuned kernels skipped", stacklevel=3)

    def get(self, M: int, N: int, K: int, source: str, seed: int) -> TunedKernel:
        """The recorded kernel, or a new one tuned now and appended to the file."""
        found = self.kernels.get((M, N, K, source, seed))
        if found is None:
            found = tune_kernel(M, N, K, source, seed)
            self.kernels[found.key] = found
            self.tuned += 1
            self._append(found)
        return found

    def _append(self, kernel: TunedKernel) -> None:
        if self.path is None:
            return
        line = (json.dumps({**asdict(kernel), "config": list(kernel.config)}) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # end a torn last line: it stays one skipped line of its own
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            warnings.warn(f"{self.path}: cannot keep tuned kernels there ({exc.strerror}); "
                          "they live only as long as this process", stacklevel=3)
            self.path = None
