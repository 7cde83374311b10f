"""``tvm-llvm``: the tuners' knobs as a TIR schedule of a matmul, a batched matmul or a 3x3 conv
(the rows of :data:`autotune.tvm.kernels.KERNELS`), compiled by TVM's LLVM backend for this CPU and
timed with TVM's evaluator (the optional extra: ``pip install '.[tvm]'``).

The seven knobs of :mod:`autotune.space` map onto the classic CPU schedule of the kernel's GEMM
``C[M, N] = A[M, K] B[K, N]`` (a batch loop and a conv's 3x3 window sit outside the tiles), read by
:meth:`autotune.tvm.cpu_tiles.CpuTiles.tiles`:

- the right operand is packed into panels ``[N / width, K, width]`` (``width`` = the register
  tile's width) so the register tile reads it contiguously (matmul and bmm; a conv's weights are
  already contiguous in the output channel);
- ``num_warps`` x ``num_stages``: the register tile, rows x vectors (``lanes`` floats each, 8 for
  AVX2, 16 for AVX-512), accumulated in registers (a local buffer) and written back once (a conv
  accumulates in C: TVM 0.27 writes a local tile over its fused output pixels back wrong, as the
  numpy check showed at 7x7 and 56x56 images even when the tiles divide the pixels);
- ``block_m``, ``block_n``: the cache tile of rows and columns; ``block_k``: the k tile (below K the
  accumulators become a ``block_m`` x ``block_n`` local tile kept across k tiles);
- ``split_k``: the k loop inside the register tile unrolled by this factor;
- ``group_m``: 1 runs the row tiles (and batches) in parallel; more fuses rows and columns into
  one parallel loop.

:meth:`TvmLlvmTarget.space` restricts the knobs to register tiles that fit this CPU's register
file and tiles without predicated tails (:meth:`autotune.tvm.cpu_tiles.CpuTiles.space`).

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

from autotune.space import Config, Space
from autotune.tvm.cpu_tiles import CpuTiles
from autotune.tvm.kernels import inputs, kernel
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

    def llvm(self) -> object:
        import tvm
        import tvm.target.codegen as codegen

        cpu = codegen.llvm_get_system_cpu()
        return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": self.threads})

    def cpu(self) -> CpuTiles:
        """This CPU's vector register file (AVX-512: 32 registers of 16 floats; else AVX2's 16 of 8)."""
        import tvm.target.codegen as codegen

        avx512 = codegen.llvm_cpu_has_features(["avx512f"], self.llvm())
        return CpuTiles(16, 32) if avx512 else CpuTiles(8, 16)

    def lanes(self) -> int:
        """Floats per vector register on this CPU."""
        return self.cpu().lanes

    def space(self, workload: Workload) -> Space:
        """The knob space tuners search on this CPU for ``workload`` (:meth:`CpuTiles.space`)."""
        return self.cpu().space(workload)

    def function(self, workload: Workload) -> object:
        """The unscheduled TIR module of ``workload`` (its kind's row of :data:`autotune.tvm.kernels.KERNELS`)."""
        from tvm import te

        return te.create_prim_func(kernel(workload).compute(workload))

    def schedule(self, workload: Workload, config: Config) -> object:
        """The scheduled TIR module of ``workload`` under ``config`` (see the module's docstring)."""
        import tvm.s_tir as s_tir

        row = kernel(workload)
        sch = s_tir.Schedule(self.function(workload))
        block = sch.get_sblock("C")
        g = row.gemm_loops(sch, block)
        M, N, K = (int(sch.get(loop).extent) for loop in (g.i, g.j, g.k))
        cpu = self.cpu()
        t = cpu.tiles(config.as_tuple(), M, N, K)
        if row.pack and N % t.width == 0:
            packed = sch.cache_read(block, 1, "global")
            sch.transform_layout(packed, ("write", 0),
                                 lambda *ax: (*ax[:-2], ax[-1] // t.width, ax[-2], ax[-1] % t.width))
            loops = sch.get_loops(packed)
            sch.parallel(sch.fuse(*loops[:-1]))
            if N % cpu.lanes == 0:
                sch.vectorize(sch.split(loops[-1], [None, cpu.lanes])[1])
        i0, i1, i2 = sch.split(g.i, [None, t.block_m // t.rows, t.rows])
        j0, j1, j2, j3 = sch.split(g.j, [None, t.block_n // t.width, t.vectors, cpu.lanes])
        if t.block_k < K:  # the accumulators outlive a k tile: a block_m x block_n local tile at j0
            k0, k1, k2 = sch.split(g.k, [None, t.block_k // t.unroll_k, t.unroll_k])
            sch.reorder(*g.outer, i0, j0, k0, i1, j1, *g.window, k1, k2, i2, j2, j3)
            at, first = j0, k0
        else:  # the register tile accumulates over all of k
            k1, k2 = sch.split(g.k, [None, t.unroll_k])
            sch.reorder(*g.outer, i0, j0, i1, j1, *g.window, k1, k2, i2, j2, j3)
            at, first = j1, (g.window[0] if g.window else k1)
        local = None
        if not g.window:  # a conv accumulates in C: TVM 0.27 writes a local tile over fused pixels back wrong
            local = sch.cache_write(block, 0, "local")
            sch.reverse_compute_at(local, at)
        sch.parallel(sch.fuse(*g.outer, i0, j0) if t.fuse_columns else sch.fuse(*g.outer, i0) if g.outer else i0)
        sch.unroll(k2)
        sch.unroll(i2)
        sch.unroll(j2)
        sch.vectorize(j3)
        back = None if local is None else sch.get_loops(local)[-1]
        if back is not None and int(sch.get(back).extent) % cpu.lanes == 0:
            sch.vectorize(sch.split(back, [None, cpu.lanes])[1])
        sch.decompose_reduction(block, first)
        return sch.mod

    def build(self, workload: Workload, config: Config, folder: str) -> str:
        import tvm

        name = hashlib.blake2b(f"{workload.key}|{config.as_tuple()}".encode(), digest_size=8).hexdigest()
        path = Path(folder) / f"{name}.so"
        tvm.compile(self.schedule(workload, config), target=self.llvm()).export_library(str(path))
        return str(path)

    def run(self, workload: Workload, artifact: str, repeats: int, cutoff_us: float) -> float:
        os.environ["TVM_NUM_THREADS"] = str(self.threads)
        import tvm

        dev = tvm.cpu()
        arrays = inputs(workload)
        mod = tvm.runtime.load_module(artifact)
        args = [tvm.runtime.tensor(a, dev) for a in arrays]
        args.append(tvm.runtime.tensor(np.zeros(kernel(workload).output(workload), np.float32), dev))
        mod["main"](*args)
        want = kernel(workload).reference(workload, arrays)
        err = float(np.abs(args[-1].numpy() - want).max() / max(np.abs(want).max(), 1.0))
        if not err < 1e-4:
            raise ValueError(f"wrong result: max relative difference {err:.3g} against numpy")
        first = mod.time_evaluator("main", dev, number=1, repeat=1)(*args).median * 1e6
        if first > cutoff_us:
            return first
        number = max(1, int(2e4 // max(first, 1.0)))  # about 20 ms a repeat
        timer = mod.time_evaluator("main", dev, number=number, repeat=repeats)
        return float(np.median(timer(*args).results)) * 1e6


def openblas_us(workload: Workload, repeats: int = 10, threads: int = 2) -> float | None:
    """numpy's matmul (OpenBLAS) on the same float32 problem with ``threads`` BLAS threads: the
    reference a tuner should reach (None for a kind numpy does not run as one BLAS call). It runs
    in a child process, because BLAS reads its thread count once, when NumPy loads, and the
    ``eqsat-lab`` process keeps one (experiments/blas.py)."""
    import json
    import subprocess
    import sys
    from dataclasses import asdict

    if not kernel(workload).blas:
        return None
    code = ("import json, sys; from autotune.workload import Workload; from autotune.tvm.target import _blas_us; "
            "print(_blas_us(Workload(**json.loads(sys.argv[1])), int(sys.argv[2])))")
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-c", code, json.dumps(asdict(workload)), str(repeats)],
                          capture_output=True, text=True, env=env, check=True)
    return float(done.stdout.split()[-1])


def _blas_us(workload: Workload, repeats: int) -> float:
    """The median of ``repeats`` timed numpy matmuls after one warm-up (in the child of :func:`openblas_us`)."""
    import time

    a, b = inputs(workload)
    np.matmul(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.matmul(a, b)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6
