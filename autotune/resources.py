"""What a config asks of the hardware, known at compile time: shared memory, registers, threads.

Tuners may use these (a compiler knows them without running anything); the run-time model in
:mod:`autotune.hypogpu` stays hidden.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autotune.space import Space, column


@dataclass(frozen=True)
class Limits:
    """Per-block resource limits of a device (A100-like by default)."""

    smem_per_block: int = 163 * 1024
    max_regs_per_thread: int = 255
    regs_per_sm: int = 65536
    mma_tile: int = 128  # a 16x8 MMA tile per warp at least


A100_LIMITS = Limits()


def smem_bytes(configs: np.ndarray) -> np.ndarray:
    """FP16 shared-memory buffers of the pipeline: stages x (A tile + B tile)."""
    bm, bn, bk, st = (column(configs, n) for n in ("block_m", "block_n", "block_k", "num_stages"))
    return st * (bm * bk + bk * bn) * 2


def accumulators_per_thread(configs: np.ndarray) -> np.ndarray:
    """FP32 accumulator registers each thread holds for its share of the output tile."""
    return column(configs, "block_m") * column(configs, "block_n") / (32 * column(configs, "num_warps"))


def registers_per_thread(configs: np.ndarray, limits: Limits = A100_LIMITS) -> np.ndarray:
    """Registers a thread is given: accumulators plus 40 for addresses and operands, capped at the
    per-thread limit (the rest spills)."""
    return np.minimum(accumulators_per_thread(configs) + 40, limits.max_regs_per_thread)


def block_registers(configs: np.ndarray, limits: Limits = A100_LIMITS) -> np.ndarray:
    return 32 * column(configs, "num_warps") * registers_per_thread(configs, limits)


def legal(configs: np.ndarray, limits: Limits = A100_LIMITS) -> np.ndarray:
    """Shared memory fits one block, the accumulators fit twice the per-thread register limit
    (beyond that the compiler gives up; between 255 and twice that it spills), the block's
    registers fit one SM, and every warp gets at least one MMA tile. Triton reports "out of
    resources" for the rest."""
    configs = np.atleast_2d(configs)
    w = column(configs, "num_warps")
    tile = column(configs, "block_m") * column(configs, "block_n")
    return ((smem_bytes(configs) <= limits.smem_per_block)
            & (accumulators_per_thread(configs) <= 2 * limits.max_regs_per_thread)
            & (block_registers(configs, limits) <= limits.regs_per_sm)
            & (tile >= w * limits.mma_tile))


def allowed(space: Space, configs: np.ndarray) -> np.ndarray:
    """The configs of ``space`` a tuner may propose: the space's own restriction (a real target's,
    :class:`autotune.tvm.cpu_tiles.CpuTiles`) where it has one, else :func:`legal`."""
    return legal(configs) if space.restriction is None else np.asarray(space.restriction(configs), dtype=bool)


def why_illegal(configs: np.ndarray, limits: Limits = A100_LIMITS) -> list[str]:
    """An "out of resources" message per config ('' when legal)."""
    configs = np.atleast_2d(configs)
    smem, acc = smem_bytes(configs), accumulators_per_thread(configs)
    tile = column(configs, "block_m") * column(configs, "block_n")
    out = []
    regs = block_registers(configs, limits)
    for s, a, r, t, w in zip(smem, acc, regs, tile, column(configs, "num_warps")):
        if s > limits.smem_per_block:
            out.append(f"out of resources: shared memory, required {s} > {limits.smem_per_block} bytes")
        elif a > 2 * limits.max_regs_per_thread:
            out.append(f"out of resources: {a:.0f} accumulator registers per thread > {2 * limits.max_regs_per_thread}")
        elif r > limits.regs_per_sm:
            out.append(f"out of resources: registers, {r:.0f} per block > {limits.regs_per_sm}")
        elif t < w * limits.mma_tile:
            out.append(f"out of resources: {w} warps for a {t}-element tile")
        else:
            out.append("")
    return out


def blocks_per_sm(configs: np.ndarray, smem_per_sm: int, max_threads_per_sm: int, max_blocks_per_sm: int,
                  limits: Limits = A100_LIMITS) -> np.ndarray:
    """Thread blocks one SM holds at once: the tightest of its block slots, shared memory,
    threads and registers (at least 1; :func:`legal` guarantees one block fits)."""
    w = column(configs, "num_warps").astype(np.float64)
    return np.maximum(np.minimum.reduce([
        np.full(len(configs), float(max_blocks_per_sm)),
        np.floor(smem_per_sm / np.maximum(smem_bytes(configs).astype(np.float64), 1)),
        np.floor(max_threads_per_sm / (32 * w)),
        np.floor(limits.regs_per_sm / (32 * w * registers_per_thread(configs, limits))),
    ]), 1)
