"""``tvm-llvm``: the tuners' knobs as a TIR schedule of a matmul, compiled by TVM's LLVM backend for
this CPU and timed with TVM's evaluator (the optional extra: ``pip install '.[tvm]'``).

The seven knobs of :mod:`autotune.space` map onto a CPU schedule of ``C[M, N] = A[M, K] B[K, N]``:

- ``block_m``, ``block_n``, ``block_k``: the cache tile of i, j and k (loop order i0 j0 k0 i1 j1 k1 i2 j2 j3);
- ``num_warps``: the register tile's rows (i2, unrolled), at most ``block_m``;
- ``num_stages``: the register tile's columns in vectors (j2, unrolled), at most ``block_n / lanes``;
  the innermost j3 is one vector (``lanes`` = 8 floats for AVX2, 16 for AVX-512) and is vectorized;
- ``group_m``: 1 runs the i0 tiles in parallel; more fuses i0 and j0 into one parallel loop;
- ``split_k``: 1 accumulates in C; more accumulates each tile in a local buffer written back once
  (``cache_write``), so 2, 4, 8 and 16 build the same schedule.

Every build is checked against numpy before it is timed (a wrong schedule can run fast and compute
garbage). TVM runs ``TVM_NUM_THREADS`` threads (set here to the target's ``threads``).
"""
from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autotune.space import Config
from autotune.workload import Workload


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class TvmLlvmTarget:
    """A matmul compiled by TVM for this CPU with ``threads`` threads."""

    threads: int = 2
    name: str = "tvm-llvm"

    def machine(self) -> str:
        return f"{_cpu_model()} x{os.cpu_count()}"

    def _llvm(self) -> object:
        import tvm
        import tvm.target.codegen as codegen

        cpu = codegen.llvm_get_system_cpu()
        return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": self.threads})

    def lanes(self) -> int:
        """Floats per vector register on this CPU."""
        import tvm.target.codegen as codegen

        avx512 = codegen.llvm_cpu_has_features(["avx512f"], self._llvm())
        return 16 if avx512 else 8

    def schedule(self, workload: Workload, config: Config) -> object:
        """The scheduled TIR module of ``workload`` under ``config``."""
        import tvm.s_tir as s_tir
        from tvm import te

        M, N, K = workload.M, workload.N, workload.K
        a, b = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
        k = te.reduce_axis((0, K), name="k")
        c = te.compute((M, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
        block = sch.get_sblock("C")
        lanes = self.lanes()
        bm, bn, bk = min(config.block_m, M), min(config.block_n, max(N, lanes)), min(config.block_k, K)
        ri = max(1, min(config.num_warps, bm))
        rj = max(1, min(config.num_stages, bn // lanes))
        i, j, kk = sch.get_loops(block)
        i0, i1, i2 = sch.split(i, [None, max(bm // ri, 1), ri])
        j0, j1, j2, j3 = sch.split(j, [None, max(bn // (rj * lanes), 1), rj, lanes])
        k0, k1 = sch.split(kk, [None, bk])
        sch.reorder(i0, j0, k0, i1, j1, k1, i2, j2, j3)
        if config.split_k > 1:
            local = sch.cache_write(block, 0, "local")
            sch.reverse_compute_at(local, j1)
        outer = sch.fuse(i0, j0) if config.group_m > 1 else i0
        sch.parallel(outer)
        sch.unroll(i2)
        sch.unroll(j2)
        sch.vectorize(j3)
        return sch.mod

    def build(self, workload: Workload, config: Config, folder: str) -> str:
        import tvm

        name = hashlib.blake2b(f"{workload.key}|{config.as_tuple()}".encode(), digest_size=8).hexdigest()
        path = Path(folder) / f"{name}.so"
        tvm.compile(self.schedule(workload, config), target=self._llvm()).export_library(str(path))
        return str(path)

    def run(self, workload: Workload, artifact: str, repeats: int, cutoff_us: float) -> float:
        os.environ["TVM_NUM_THREADS"] = str(self.threads)
        import tvm

        dev = tvm.cpu()
        rng = np.random.default_rng(0)
        a = rng.standard_normal((workload.M, workload.K), dtype=np.float32)
        b = rng.standard_normal((workload.K, workload.N), dtype=np.float32)
        mod = tvm.runtime.load_module(artifact)
        ta, tb = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)
        tc = tvm.runtime.tensor(np.zeros((workload.M, workload.N), np.float32), dev)
        mod["main"](ta, tb, tc)
        want = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.abs(tc.numpy() - want).max() / max(np.abs(want).max(), 1.0))
        if not err < 1e-4:
            raise ValueError(f"wrong result: max relative difference {err:.3g} against numpy")
        first = mod.time_evaluator("main", dev, number=1, repeat=1)(ta, tb, tc).median * 1e6
        if first > cutoff_us:
            return first
        number = max(1, int(2e4 // max(first, 1.0)))  # about 20 ms a repeat
        timer = mod.time_evaluator("main", dev, number=number, repeat=repeats)
        return float(np.median(timer(ta, tb, tc).results)) * 1e6


def openblas_us(workload: Workload, repeats: int = 10) -> float:
    """numpy's matmul (OpenBLAS) on the same float32 problem: the reference a tuner should reach."""
    import time

    rng = np.random.default_rng(0)
    a = rng.standard_normal((workload.M, workload.K), dtype=np.float32)
    b = rng.standard_normal((workload.K, workload.N), dtype=np.float32)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6
