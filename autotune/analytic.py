"""A public analytical estimate of a config's run time, from the device's datasheet alone.

Triton prunes its autotune configs with such a model (``perf_model``: compute at peak, loads at
DRAM bandwidth, a store pass for split-K), and learned tuners use one as a prior: the model
learns the correction, not the whole landscape, so 16 measurements are enough to start. Every
input is something a compiler knows before running anything: the datasheet's SM count, peak
tensor throughput, DRAM and L2 bandwidth and memory latency, the config's resource use
(:mod:`autotune.resources`), and the shape. The run-time model in :mod:`autotune.hypogpu`
stays hidden; this estimate is coarser (no MMA tile efficiency, register spills, L2 reuse by
launch order, or anything unmodeled), which is what a learned correction is for.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autotune.resources import Limits, blocks_per_sm
from autotune.space import column
from autotune.workload import Workload


@dataclass(frozen=True)
class Datasheet:
    """What a vendor publishes about a GPU (A100-SXM-like numbers by default)."""

    sms: int = 108
    peak_flops: float = 312e12        # dense FP16 tensor-core throughput
    dram_bw: float = 2.0e12           # bytes/s
    l2_bw: float = 5.0e12             # bytes/s, all SMs together
    smem_bw_per_sm: float = 128 * 1.41e9  # bytes/s: 128 bytes per clock at the boost clock
    l2_miss: float = 0.2              # share of repeated tile loads that go to DRAM
    sub_partitions: int = 4           # warp schedulers per SM, one tensor core each
    memory_latency_s: float = 0.6e-6  # one global load, issue to use
    smem_per_sm: int = 164 * 1024
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    launch_s: float = 3e-6


A100_DATASHEET = Datasheet()


def estimate_us(workload: Workload, configs: np.ndarray, sheet: Datasheet = A100_DATASHEET) -> np.ndarray:
    """Estimated µs per config: launch, plus the slowest of compute (padded tiles at peak, in
    waves over the SMs), operand traffic (L2 for every tile's loads, DRAM for the unique bytes)
    and un-hidden memory latency (one load per K step, overlapped ``num_stages - 1`` deep), plus
    split-K's reduction pass."""
    configs = np.atleast_2d(configs)
    M, N, K = workload.M, workload.N, workload.K
    sk, bm, bn, bk, w, st = (column(configs, n).astype(np.float64) for n in
                             ("split_k", "block_m", "block_n", "block_k", "num_warps", "num_stages"))
    tiles_m, tiles_n = np.ceil(M / bm), np.ceil(N / bn)
    blocks = tiles_m * tiles_n * sk
    k_steps = np.ceil(np.ceil(K / sk) / bk)
    per_sm = blocks_per_sm(configs, sheet.smem_per_sm, sheet.max_threads_per_sm, sheet.max_blocks_per_sm,
                           Limits(regs_per_sm=sheet.regs_per_sm))
    resident = np.minimum(per_sm, np.ceil(blocks / sheet.sms))
    waves = np.ceil(blocks / (sheet.sms * resident))
    block_flops = 2 * bm * bn * bk * k_steps
    busy = np.minimum(1.0, resident * w / sheet.sub_partitions)  # a tensor core idles without a warp
    compute = waves * resident * block_flops / (sheet.peak_flops / sheet.sms * busy)
    # each warp reads its rows of A and columns of B from shared memory every K step
    warps_m = np.clip(2.0 ** np.round(np.log2(np.sqrt(w * bm / bn))), 1, w)
    fragments = waves * resident * k_steps * bk * (bm * (w / warps_m) + bn * warps_m) * 2 / sheet.smem_bw_per_sm
    loads = blocks * k_steps * (bm + bn) * bk * 2
    operands = (M * K + K * N) * 2
    # Triton's perf model: a tile loaded again by another block hits L2 four times in five
    dram = operands + sheet.l2_miss * np.maximum(loads - operands, 0) + np.where(sk > 1, M * N * 4 * sk, M * N * 2)
    # L2 serves each SM its share of the bandwidth: a grid that fills few SMs cannot use it all
    l2 = waves * resident * k_steps * (bm + bn) * bk * 2 / (sheet.l2_bw / sheet.sms)
    memory = np.maximum(l2, dram / sheet.dram_bw)
    # one stage: a block's K step waits for its loads, then computes (co-resident blocks fill the
    # wait, which the compute term counts); more stages overlap a block's own loads and compute
    block_step = compute / np.maximum(waves * k_steps * resident, 1)
    exposed = np.where(st > 1, sheet.memory_latency_s / np.maximum(st - 1, 1), sheet.memory_latency_s + block_step)
    latency = waves * (k_steps + 1) * exposed
    reduction = np.where(sk > 1, sheet.launch_s + (M * N * 4 * sk + M * N * 2) / sheet.dram_bw, 0.0)
    return 1e6 * (sheet.launch_s + np.maximum.reduce([compute, fragments, memory, latency]) + reduction)
