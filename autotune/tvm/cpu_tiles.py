"""The knobs read as a CPU GEMM schedule, and where in the knob space good CPU schedules live.

:class:`CpuTiles` is the data of one CPU's register file (``lanes`` floats per vector register,
``registers`` vector registers). :meth:`CpuTiles.tiles` turns a config into the loop tiles of the
classic CPU GEMM (the right operand packed into panels as wide as the register tile, a register
tile of ``rows`` x ``vectors`` accumulators, the k loop unrolled); :meth:`CpuTiles.space` is the
knob space restricted to the configs that can be fast on this CPU for one workload, so a tuner
does not spend trials on a schedule that spills its accumulators, on predicated tails, or on
configs that build the same schedule as another. No TVM is needed here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autotune.space import KNOBS, Knob, Space, column
from autotune.workload import Workload


@dataclass(frozen=True)
class Tiles:
    """One config's CPU schedule of a GEMM ``C[M, N] = A[M, K] B[K, N]``."""

    block_m: int  # rows per task (the cache tile of i)
    block_n: int  # columns per task (a multiple of the register tile's width)
    block_k: int  # the cache tile of k (== K: the register tile accumulates over all of k)
    rows: int  # register tile rows
    vectors: int  # register tile columns, in vectors
    unroll_k: int  # k unrolled by this factor inside the register tile
    fuse_columns: bool  # the column tiles run in parallel with the row tiles
    width: int  # the register tile's width in floats: the packed right operand's panel width


@dataclass(frozen=True)
class CpuTiles:
    """A CPU's vector register file: ``lanes`` floats per register, ``registers`` registers
    (AVX2: 8 and 16; AVX-512: 16 and 32)."""

    lanes: int = 8
    registers: int = 16

    def tiles(self, config: np.ndarray | tuple[int, ...], M: int, N: int, K: int) -> Tiles:
        """The tiles of one config (the seven knob values in :data:`autotune.space.KNOBS` order):
        ``num_warps`` = register rows, ``num_stages`` = register vectors, ``split_k`` = k unroll,
        ``group_m`` > 1 = column tiles in parallel too; tiles are clamped to the problem."""
        c = dict(zip((k.name for k in KNOBS), (int(v) for v in config)))
        rows = max(1, min(c["num_warps"], M))
        vectors = max(1, min(c["num_stages"], -(-N // self.lanes)))
        width = vectors * self.lanes
        block_m = max(rows, min(c["block_m"], M) // rows * rows)
        block_n = max(width, min(c["block_n"], N) // width * width)
        block_k = min(c["block_k"], K)
        unroll = max(1, min(c["split_k"], block_k))
        return Tiles(block_m, block_n, block_k, rows, vectors, unroll, c["group_m"] > 1, width)

    def registers_needed(self, configs: np.ndarray) -> np.ndarray:
        """Vector registers of each config's register tile: its accumulators, one row of the
        right operand and one broadcast of the left."""
        rows, vectors = column(configs, "num_warps"), column(configs, "num_stages")
        return rows * vectors + vectors + 1

    def fits(self, configs: np.ndarray, workload: Workload) -> np.ndarray:
        """Configs that can be fast: the register tile fits the register file, its rows divide
        M, its width divides N (no predicated tail) and fits in ``block_n``, its rows fit in
        ``block_m``, and the k unroll divides ``block_k``."""
        configs = np.atleast_2d(configs)
        M, N, K = workload.M, workload.N, workload.K
        rows, vectors = column(configs, "num_warps"), column(configs, "num_stages")
        width = vectors * self.lanes
        block_k = np.minimum(column(configs, "block_k"), K)
        return ((self.registers_needed(configs) <= self.registers) & (M % rows == 0) & (N % width == 0)
                & (rows <= np.minimum(column(configs, "block_m"), M))
                & (width <= np.minimum(column(configs, "block_n"), N))
                & (block_k % column(configs, "split_k") == 0))

    def space(self, workload: Workload) -> Space:
        """The knob space of ``workload`` on this CPU: tile values past the problem's size dropped
        (they build the same schedule as the size), ``group_m`` cut to 1 and 2 (all values above 1
        build one schedule), and :meth:`fits` as the space's restriction."""
        size = {"block_m": workload.M, "block_n": workload.N, "block_k": workload.K}
        knobs = []
        for knob in KNOBS:
            values = knob.values
            if knob.name in size:
                values = tuple(v for v in values if v <= size[knob.name]) or values[:1]
            elif knob.name == "group_m":
                values = values[:2]
            knobs.append(Knob(knob.name, values, knob.doc))
        return Space(knobs, restriction=lambda configs: self.fits(configs, workload))
