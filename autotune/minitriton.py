"""A numpy "minitriton": run a config's blocked, split-K matmul program for real.

Inputs are FP16, each block accumulates its K steps in FP32, split-K partials are reduced in
FP32, and the output is rounded to FP16, the way the Triton kernel does it. Configs change only
the order of additions, so every config agrees with float64 up to FP16 rounding of the output:
tuning is safe because it changes how, never what, is computed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autotune.space import Config


def run(a: np.ndarray, b: np.ndarray, config: Config, relu: bool = False, dtype: type = np.float16) -> np.ndarray:
    """C = A·B (``dtype`` in and out, FP32 accumulation) computed block by block as ``config`` says."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul shapes do not match: {a.shape} x {b.shape}")
    a16, b16 = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    M, K = a16.shape
    N = b16.shape[1]
    bm, bn, bk, sk = config.block_m, config.block_n, config.block_k, config.split_k
    k_per_split = -(-K // sk)
    partial = np.zeros((sk, M, N), dtype=np.float32)
    tiles_m, tiles_n = -(-M // bm), -(-N // bn)
    for s in range(sk):
        k_lo, k_hi = s * k_per_split, min(K, (s + 1) * k_per_split)
        for pid in range(tiles_m * tiles_n):
            tm, tn = _grouped_tile(pid, tiles_m, tiles_n, config.group_m)
            rows, cols = slice(tm * bm, min(M, (tm + 1) * bm)), slice(tn * bn, min(N, (tn + 1) * bn))
            acc = np.zeros((rows.stop - rows.start, cols.stop - cols.start), dtype=np.float32)
            for k in range(k_lo, k_hi, bk):
                ks = slice(k, min(k_hi, k + bk))
                acc += a16[rows, ks].astype(np.float32, copy=False) @ b16[ks, cols].astype(np.float32, copy=False)
            partial[s, rows, cols] = acc
    out = partial.sum(axis=0, dtype=np.float32)
    if relu:
        out = np.maximum(out, 0)
    return out.astype(dtype, copy=False)


def _grouped_tile(pid: int, tiles_m: int, tiles_n: int, group_m: int) -> tuple[int, int]:
    """Triton's grouped launch order: GROUP_M row tiles at a time, column-major inside a group."""
    per_group = group_m * tiles_n
    group = pid // per_group
    first_m = group * group_m
    size_m = min(tiles_m - first_m, group_m)
    return first_m + (pid % per_group) % size_m, (pid % per_group) // size_m


@dataclass(frozen=True)
class Agreement:
    config: str
    max_rel_error: float  # max |C - C64| / max |C64|


def check(configs: list[Config], M: int = 200, N: int = 300, K: int = 100, seed: int = 0) -> list[Agreement]:
    """Run each config on the same random FP16 inputs and compare with float64."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = float(np.abs(ref).max())
    return [Agreement(str(c), float(np.abs(run(a, b, c).astype(np.float64) - ref).max() / scale)) for c in configs]
