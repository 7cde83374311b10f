"""The shape of the search landscape on HypoGPU (docs/reference.md).

These analyses read the hidden model directly: they describe the problem, they are not a
tuner. Every function returns plain data for tables, tests and the ``tune landscape`` command.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autotune.hypogpu import time_us
from autotune.space import COLUMN, SPACE, Config
from autotune.tuners import TRITON_SLIDE_CONFIGS
from autotune.workload import SHAPES, Workload


@dataclass(frozen=True)
class Summary:
    workload: str
    configs: int
    legal: int
    optimum_us: float
    best: str
    median_slowdown: float     # median legal config / optimum
    within_5pct: int           # configs within 5% of the optimum


def _all_times(workload: Workload) -> np.ndarray:
    return time_us(workload, SPACE.all_values())


def summary(workload: Workload) -> Summary:
    t = _all_times(workload)
    legal = np.isfinite(t)
    i = int(np.argmin(t))
    return Summary(workload.name or workload.key, len(t), int(legal.sum()), float(t[i]), str(SPACE.config(i)),
                   float(np.median(t[legal]) / t[i]), int((t <= 1.05 * t[i]).sum()))


def stages_vs_block_k(workload: Workload) -> dict[int, dict[int, float]]:
    """Slowdown against the optimum as BLOCK_K and num_stages vary, the other knobs at their best
    values for each (BLOCK_K, num_stages) pair (inf: no legal config)."""
    allv = SPACE.all_values()
    t = time_us(workload, allv)
    best = float(t.min())
    table: dict[int, dict[int, float]] = {}
    for bk in SPACE.knobs[COLUMN["block_k"]].values:
        row = {}
        for st in SPACE.knobs[COLUMN["num_stages"]].values:
            mask = (allv[:, COLUMN["block_k"]] == bk) & (allv[:, COLUMN["num_stages"]] == st)
            row[st] = float(t[mask].min() / best)
        table[bk] = row
    return table


def best_stages(table: dict[int, dict[int, float]]) -> dict[int, int]:
    return {bk: min(row, key=row.get) for bk, row in table.items()}


@dataclass(frozen=True)
class SlideRow:
    workload: str
    illegal: int
    best_slide_us: float
    optimum_us: float
    slowdown: float
    best_slide: str
    optimum: str


def slide_configs_on(shapes: Sequence[Workload], configs: Sequence[Config] = TRITON_SLIDE_CONFIGS) -> list[SlideRow]:
    """The slides' autotune list on each shape: how many are illegal, and how far its best is from
    the optimum of the whole space."""
    arr = np.array([c.as_tuple() for c in configs])
    rows = []
    for w in shapes:
        t = time_us(w, arr)
        full = _all_times(w)
        i, o = int(np.argmin(t)), int(np.argmin(full))
        rows.append(SlideRow(w.name, int((~np.isfinite(t)).sum()), float(t[i]), float(full[o]),
                             float(t[i] / full[o]), str(configs[i]), str(SPACE.config(o))))
    return rows


def cross_shape(shapes: Sequence[Workload]) -> dict[str, dict[str, float]]:
    """Slowdown of each shape's best config run on every other shape (row: tuned on)."""
    times = {w.name: _all_times(w) for w in shapes}
    best = {n: int(np.argmin(t)) for n, t in times.items()}
    return {src: {dst: float(times[dst][best[src]] / times[dst].min()) for dst in times} for src in times}


def off_diagonal(matrix: dict[str, dict[str, float]]) -> list[float]:
    return [v for s, row in matrix.items() for d, v in row.items() if s != d]


@dataclass(frozen=True)
class DynamicM:
    m: int
    best_block_m: int
    optimum_us: float
    with_m16_config_us: float


def dynamic_m(base: Workload = SHAPES["decode"], ms: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
              ) -> list[DynamicM]:
    """Best BLOCK_M as the token count M varies, and the cost of keeping M=16's config."""
    allv = SPACE.all_values()
    fixed = allv[int(np.argmin(time_us(base.with_m(16), allv)))]
    out = []
    for m in ms:
        t = time_us(base.with_m(m), allv)
        i = int(np.argmin(t))
        out.append(DynamicM(m, int(allv[i, COLUMN["block_m"]]), float(t[i]),
                            float(time_us(base.with_m(m), fixed[None])[0])))
    return out
