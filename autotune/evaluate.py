"""Judging tuners against the truth: % of the optimum, and curves over trials and seeds.

Only evaluation reads the hidden model: a tuner's chosen config (its best *measured* one) is
re-timed without noise and compared with the exhaustive optimum of the shape.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from autotune import hypogpu
from autotune.measure import SimulatedMeasurer
from autotune.tuners import TuneResult, TunerRow
from autotune.workload import Workload

BOUNDS: dict[str, TunerRow] = {"oracle": TunerRow("autotune.oracle:ModeledOracle")}
"""What a perfect cost model reaches with the same measurements: run like a tuner, never one."""


@lru_cache(maxsize=64)
def optimum_us(workload: Workload) -> float:
    return hypogpu.optimum(workload).time_us


def true_us(workload: Workload, config: Any) -> float:
    return float(hypogpu.time_us(workload, np.array([config.as_tuple()]))[0])


def evaluate(result: TuneResult) -> dict[str, Any]:
    """``optimum_us``, ``best_true_us`` (the chosen config, re-timed without noise) and
    ``fraction_of_optimum`` = optimum / best_true (1.0: the tuner found the optimum)."""
    best = result.best
    opt = optimum_us(result.workload)
    true = true_us(result.workload, best.config) if best else float("inf")
    return {"optimum_us": opt, "best_true_us": true, "fraction_of_optimum": opt / true,
            "measured_optimism": (true - best.time_us) / true if best else None}


def fraction_after(result: TuneResult, n: int) -> float:
    best = result.best_after(n)
    return 0.0 if best is None else optimum_us(result.workload) / true_us(result.workload, best.config)


@dataclass(frozen=True)
class CurvePoint:
    tuner: str
    workload: str
    trials: int
    median_pct: float
    per_seed_pct: tuple[float, ...]


def curves(make_tuner: Callable[[], Any], tuner_name: str, workloads: Sequence[Workload], checkpoints: Sequence[int],
           seeds: Sequence[int]) -> list[CurvePoint]:
    """Median % of optimum over ``seeds`` after each checkpoint (one run per seed, to the last)."""
    points = []
    for w in workloads:
        runs = [make_tuner().tune(w, max(checkpoints), SimulatedMeasurer(seed=s), seed=s) for s in seeds]
        for n in checkpoints:
            pct = tuple(100 * fraction_after(r, n) for r in runs)
            points.append(CurvePoint(tuner_name, w.name or w.key, n, statistics.median(pct), pct))
    return points
