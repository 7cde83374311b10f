"""Features of configs for learned cost models, vectorized over many configs.

``knob``: log2 of the seven knobs (what AutoTVM's knob features are). ``program``: quantities a
compiler can compute from the generated program without knowing the hardware's timing: thread
blocks, threads, shared memory, accumulators, warp tile, work and traffic per K step, tile
arithmetic intensity, K steps, stages, padding efficiency, effective GROUP_M, split-K and the
shape. They mean the same thing on every shape, which is what transfer learning needs.
"""
from __future__ import annotations

import numpy as np

from autotune.resources import accumulators_per_thread, smem_bytes
from autotune.space import column
from autotune.workload import Workload

KNOB_FEATURES = ("log2_split_k", "log2_block_m", "log2_block_n", "log2_block_k", "log2_num_warps",
                 "num_stages", "log2_group_m")
PROGRAM_FEATURES = ("log2_blocks", "log2_waves", "threads", "smem_kb", "accumulators", "log2_warp_tile",
                    "log2_flops_per_step", "log2_bytes_per_step", "tile_intensity", "log2_k_steps", "num_stages",
                    "padding_efficiency", "effective_group_m", "split_k", "log2_M", "log2_N", "log2_K",
                    "log2_output_tiles", "wave_efficiency", "blocks_per_sm_smem", "warps_per_sm",
                    "log2_wave_footprint", "log2_global_bytes", "log2_splitk_bytes", "log2_global_intensity")


def knob_features(workload: Workload, configs: np.ndarray) -> np.ndarray:
    c = np.atleast_2d(configs).astype(np.float64)
    out = np.log2(c)
    out[:, 5] = c[:, 5]  # stages are small counts: linear
    return out


def program_features(workload: Workload, configs: np.ndarray) -> np.ndarray:
    configs = np.atleast_2d(configs)
    M, N, K = workload.M, workload.N, workload.K
    sk, bm, bn, bk, w, st, g = (column(configs, n).astype(np.float64) for n in
                                ("split_k", "block_m", "block_n", "block_k", "num_warps", "num_stages", "group_m"))
    tiles_m, tiles_n = np.ceil(M / bm), np.ceil(N / bn)
    blocks = tiles_m * tiles_n * sk
    k_steps = np.ceil(np.ceil(K / sk) / bk)
    flops = 2 * bm * bn * bk
    bytes_ = (bm * bk + bk * bn) * 2
    padded = tiles_m * bm * tiles_n * bn * sk * k_steps * bk
    smem = smem_bytes(configs)
    per_sm = np.maximum(np.minimum.reduce([np.floor(164 * 1024 / np.maximum(smem, 1)), np.floor(64 / w),
                                           np.full(len(configs), 32.0)]), 1)
    resident = np.minimum(per_sm, np.ceil(blocks / 108))
    wave = np.ceil(blocks / (108 * resident))
    concurrent = np.maximum(np.floor(108 * resident / sk), 1)
    rows = np.where(g <= 1, np.ceil(concurrent / tiles_n), np.minimum(g, tiles_m))
    cols = np.minimum(tiles_n, np.ceil(concurrent / np.maximum(rows, 1)))
    footprint = (np.minimum(rows, tiles_m) * bm + cols * bn) * np.ceil(K / sk) * 2
    # global traffic of the whole kernel: A is read once per column of tiles, B once per row,
    # and split-K writes (and the reduction reads) fp32 partial sums
    global_bytes = (M * K * tiles_n + K * N * tiles_m) * 2 + M * N * 2
    splitk_bytes = np.where(sk > 1, 2 * M * N * 4 * sk, 1.0)
    return np.stack([
        np.log2(blocks), np.log2(np.ceil(blocks / 108)), 32 * w, smem_bytes(configs) / 1024,
        accumulators_per_thread(configs), np.log2(bm * bn / w), np.log2(flops), np.log2(bytes_), flops / bytes_,
        np.log2(k_steps), st, (M * N * K) / padded, np.minimum(g, tiles_m), sk,
        np.full(len(configs), np.log2(M)), np.full(len(configs), np.log2(N)), np.full(len(configs), np.log2(K)),
        np.log2(tiles_m * tiles_n), blocks / (wave * 108 * resident), per_sm, resident * w, np.log2(footprint),
        np.log2(global_bytes), np.log2(splitk_bytes), np.log2(2 * M * N * K / (global_bytes + splitk_bytes)),
    ], axis=1)


FEATURE_SETS = {"knob": knob_features, "program": program_features}


def featurize(kind: str, workload: Workload, configs: np.ndarray) -> np.ndarray:
    if kind not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {kind!r}; choose from {', '.join(FEATURE_SETS)}")
    return FEATURE_SETS[kind](workload, configs)
