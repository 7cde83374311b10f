"""The kernels the ``tvm-llvm`` target compiles, as data: workload kind -> TIR builder, numpy reference.

Each row builds its TE computation (``te.create_prim_func`` turns it into TIR) and names, in a
scheduled function, the loops the tuners' knobs tile as a GEMM (:class:`GemmLoops`): rows ``i``,
columns ``j`` (the vectorized axis, contiguous in the output and the right-hand operand), depth
``k``, plus any loops outside that GEMM (a batch, a conv's kernel window). The schedule itself is
one mapping for every kind (:meth:`autotune.tvm.target.TvmLlvmTarget.schedule`), so a new kind is
a row here. Every input is seeded and every result is checked against the numpy reference.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from autotune.workload import Workload


@dataclass(frozen=True)
class GemmLoops:
    """A block's loops as a GEMM: ``outer`` spatial loops (run in parallel with the row tiles),
    ``window`` reduction loops kept outside the k tile, and the GEMM's i, j, k."""

    outer: tuple[Any, ...]
    window: tuple[Any, ...]
    i: Any
    j: Any
    k: Any


@dataclass(frozen=True)
class TirKernel:
    """One kind of kernel: its input shapes, its numpy reference, its TE computation (the inputs
    and the output tensor, in call order; the output is named ``C``), and its loops as a GEMM."""

    inputs: Callable[[Workload], list[tuple[int, ...]]]
    output: Callable[[Workload], tuple[int, ...]]
    reference: Callable[[Workload, Sequence[np.ndarray]], np.ndarray]
    compute: Callable[[Workload], list[Any]]
    gemm_loops: Callable[[Any, Any], GemmLoops]
    blas: bool  # numpy runs it as one BLAS call (the OpenBLAS reference exists)
    pack: bool  # the right operand's (k, j) axes are packed into panels (a conv's weights are contiguous in j)


def _matmul_compute(w: Workload) -> list[Any]:
    from tvm import te

    a, b = te.placeholder((w.M, w.K), name="A"), te.placeholder((w.K, w.N), name="B")
    k = te.reduce_axis((0, w.K), name="k")
    return [a, b, te.compute((w.M, w.N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")]


def _bmm_compute(w: Workload) -> list[Any]:
    from tvm import te

    a, b = te.placeholder((w.batch, w.M, w.K), name="A"), te.placeholder((w.batch, w.K, w.N), name="B")
    k = te.reduce_axis((0, w.K), name="k")
    return [a, b, te.compute((w.batch, w.M, w.N), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k),
                             name="C")]


def _conv_compute(w: Workload) -> list[Any]:
    """NHWC input, HWIO weights (output channels contiguous, so they vectorize), padding as its own block."""
    from tvm import te, tirx

    n, h, c, f = w.image
    x, wt = te.placeholder((n, h, h, c), name="A"), te.placeholder((3, 3, c, f), name="B")
    pad = te.compute((n, h + 2, h + 2, c), lambda b, y, z, ch: tirx.if_then_else(
        tirx.all(y >= 1, y <= h, z >= 1, z <= h), x[b, y - 1, z - 1, ch], tirx.const(0.0, "float32")), name="pad")
    rh, rw, rc = te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw"), te.reduce_axis((0, c), "rc")
    out = te.compute((n, h, h, f), lambda b, y, z, o: te.sum(pad[b, y + rh, z + rw, rc] * wt[rh, rw, rc, o],
                                                           axis=[rh, rw, rc]), name="C")
    return [x, wt, out]


def _matmul_loops(sch: Any, block: Any) -> GemmLoops:
    i, j, k = sch.get_loops(block)
    return GemmLoops((), (), i, j, k)


def _bmm_loops(sch: Any, block: Any) -> GemmLoops:
    b, i, j, k = sch.get_loops(block)
    return GemmLoops((b,), (), i, j, k)


def _conv_loops(sch: Any, block: Any) -> GemmLoops:
    """Output pixels (image, row, column fused) are the rows; the kernel window stays outside the k tile."""
    n, y, z, o, rh, rw, rc = sch.get_loops(block)
    pad = sch.get_sblock("pad")
    sch.parallel(sch.fuse(*sch.get_loops(pad)[:2]))
    return GemmLoops((), (rh, rw), sch.fuse(n, y, z), o, rc)


def _conv_reference(w: Workload, arrays: Sequence[np.ndarray]) -> np.ndarray:
    x, wt = (a.astype(np.float64) for a in arrays)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = sliding_window_view(padded, (3, 3), axis=(1, 2))  # n, y, z, c, rh, rw
    return np.einsum("nyzcrs,rscf->nyzf", windows, wt)


KERNELS: dict[str, TirKernel] = {
    "matmul": TirKernel(lambda w: [(w.M, w.K), (w.K, w.N)], lambda w: (w.M, w.N),
                        lambda w, a: a[0].astype(np.float64) @ a[1].astype(np.float64),
                        _matmul_compute, _matmul_loops, True, True),
    "bmm": TirKernel(lambda w: [(w.batch, w.M, w.K), (w.batch, w.K, w.N)], lambda w: (w.batch, w.M, w.N),
                     lambda w, a: np.matmul(a[0].astype(np.float64), a[1].astype(np.float64)),
                     _bmm_compute, _bmm_loops, True, True),
    "conv3x3": TirKernel(lambda w: [(w.image[0], w.image[1], w.image[1], w.image[2]), (3, 3, w.image[2], w.N)],
                         lambda w: (w.image[0], w.image[1], w.image[1], w.N),
                         _conv_reference, _conv_compute, _conv_loops, False, False),
}


def kernel(workload: Workload) -> TirKernel:
    """The row of ``workload``'s kind."""
    if workload.epilogue != "none":
        raise ValueError(f"tvm-llvm compiles no epilogue ({workload.key}): drop the +{workload.epilogue}")
    return KERNELS[workload.kind]


def inputs(workload: Workload, seed: int = 0) -> list[np.ndarray]:
    """Seeded float32 inputs of ``workload``."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape, dtype=np.float32) for shape in kernel(workload).inputs(workload)]

