"""``hypogpu``: a device on which every matmul-like op costs the run time of its tuned kernel.

The roofline sees FLOPs and bytes; it cannot see what makes a merge or a split pay on a GPU (tile
shapes, waves over the SMs, occupancy). HypoGPU (:mod:`autotune.hypogpu`) models exactly that, and
the tuners find its kernels. So on this device a matmul, a batched matmul, a conv2d (as implicit
GEMM) and their fused forms cost the true HypoGPU time of the best kernel a tuner found for that GEMM
(re-measured without noise), and every other op costs HypoGPU's own roofline (its peak, its DRAM
bandwidth, its launch overhead) through :func:`eqsat.cost.roofline.op_cost`.

Who tunes is part of the device name: ``hypogpu`` is ``hypogpu:ansor@64`` (Ansor, 64 measured
trials, seed 0); ``hypogpu:TUNER@TRIALS`` names any tuner of :data:`autotune.registry.TUNERS`;
``hypogpu:oracle`` takes the best kernel of the whole space (a bound no tuner is promised to
reach). Tuned kernels are kept in :class:`TunedKernels`, a records file keyed by GEMM shape and by
source, so a shape is tuned once across runs.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune import hypogpu
from autotune.registry import OWN_SPACE_TUNERS, TUNERS
from autotune.tuned_records import TunedKernels, default_path
from eqsat.cost.costmodel import OpCost, node_in_shapes
from eqsat.cost.devices import HYPOGPU, Device
from eqsat.cost.roofline import RooflineCost
from eqsat.ir.graph import Graph
from eqsat.ir.ops import Shape

PREFIX = HYPOGPU.name
DEFAULT_SOURCE = HYPOGPU.default_source
DEFAULT_RECORDS = object()  # the cache folder's file
SEED = 0  # the tuner's seed: one seed, so the same device name always prices the same


@dataclass(frozen=True)
class Gemm:
    """The GEMM an op runs: ``count`` launches of C[M, N] = A[M, K] B[K, N]."""

    M: int
    N: int
    K: int


def check_source(source: str, device: str = "") -> str:
    """Who tunes (``oracle`` or ``TUNER@TRIALS``), checked and written plainly; ``device`` the name
    it came in (``hypogpu:SOURCE``, read by :func:`eqsat.cost.registry.parse_device`)."""
    device = device or f"{PREFIX}:{source}"
    if source == "oracle":
        return source
    tuner, _, trials = source.partition("@")
    knob_tuners = [t for t in TUNERS if t not in OWN_SPACE_TUNERS]  # HypoGPU prices configs of the knob space
    if tuner not in knob_tuners:
        raise ValueError(f"device {device!r}: unknown tuner {tuner!r}; use {PREFIX}:oracle or "
                         f"{PREFIX}:TUNER@TRIALS with a tuner from {', '.join(knob_tuners)}")
    if not trials.isdigit() or not 1 <= int(trials) <= 4096:
        raise ValueError(f"device {device!r}: the trials after '@' must be a whole number from 1 to 4096")
    return f"{tuner}@{int(trials)}"


def gemm_of(op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape], out_shapes: Sequence[Shape]) -> Gemm | None:
    """The GEMM a matmul-like op runs, None for any other op. A batched matmul runs its batch as
    one launch of ``batch`` times the row blocks (HypoGPU's blocks fill waves the same way); a
    conv2d is implicit GEMM (rows: batch x output pixels, columns: output channels, depth:
    input channels x kernel window). A grouped conv is not a GEMM HypoGPU models: None."""
    if op == "matmul":
        a, b = in_shapes[0], in_shapes[1]
        return Gemm(int(math.prod(a[:-1])), int(b[-1]), int(a[-1]))
    if op == "conv2d" and attrs.get("groups", 1) == 1:
        (n, c_out, ho, wo), w = out_shapes[0], in_shapes[1]
        return Gemm(int(n * ho * wo), int(c_out), int(w[1] * w[2] * w[3]))
    return None


def graph_gemms(graph: Graph) -> list[str]:
    """The GEMMs a graph launches, as ``op MxNxK`` (conv2d as implicit GEMM), sorted, one per launch."""
    found = ((n, None if n.is_const else gemm_of(n.op, n.attr_dict, node_in_shapes(n), n.shapes))
             for n in graph.nodes())
    return sorted(f"{n.op} {g.M}x{g.N}x{g.K}" for n, g in found if g is not None)


class TunedHypoGPUCost(RooflineCost):
    """The ``hypogpu`` cost model (see the module docstring): HypoGPU's roofline, with every GEMM
    priced by its tuned kernel. ``records`` is the tuned-kernel file (default:
    ``hypogpu-kernels.jsonl`` in the cache folder; None keeps them in memory)."""

    def __init__(self, source: str = DEFAULT_SOURCE, records: str | Path | None | object = DEFAULT_RECORDS):
        spec = hypogpu.A100_LIKE
        super().__init__(Device(f"{PREFIX}-roofline", spec.peak_flops, spec.dram_bw, spec.launch_s * 1e6,
                                "HypoGPU's roofline, for the ops that are not GEMMs"))
        self.source = check_source(source)
        self.kernels = TunedKernels(default_path() if records is DEFAULT_RECORDS else records)

    @property
    def name(self) -> str:
        return f"{PREFIX}:{self.source}"

    def provenance(self) -> str:
        where = self.kernels.path or "memory only"
        return (f"HypoGPU: GEMMs by kernels tuned by {self.source} ({len(self.kernels.kernels)} known, "
                f"{self.kernels.tuned} tuned now; {where}), other ops by its roofline")

    def gemm_time_us(self, gemm: Gemm) -> float:
        """The tuned kernel's true HypoGPU time for ``gemm`` (tuned now if no record has it)."""
        return self.kernels.get(gemm.M, gemm.N, gemm.K, self.source, SEED).time_us

    def op_cost(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape], out_shapes: Sequence[Shape],
                is_const: bool, dtype: str = "bf16") -> OpCost:
        base = super().op_cost(op, attrs, in_shapes, out_shapes, is_const, dtype)
        gemm = None if base.kind in ("leaf", "view", "folded") else gemm_of(op, attrs, in_shapes, out_shapes)
        if gemm is None:
            return base
        return OpCost(op, base.shape, base.flops, base.bytes, self.gemm_time_us(gemm), "tuned")
