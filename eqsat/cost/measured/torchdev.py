"""``torch-cpu`` and ``torch-cuda``: cost models measured on this machine in PyTorch eager.

Each distinct kernel (:mod:`.kernels`: op, attributes, input shapes, which inputs are weights) is
built alone as the module the PyTorch executor runs (:func:`eqsat.pytorch.module.to_module`) and
timed once (:mod:`.torchtime`: the wall clock on a CPU, CUDA events on a GPU); the timing goes to
the measurement database that ``ort-cpu`` keeps too, under a context naming the device, PyTorch's
version, the dtype, the GPU and the thread count. Everything else is :class:`.base.MeasuredCost`'s,
as for ``ort-cpu``: a kernel's price is its median less the fixed cost of one module call (a module
that runs no op), the prices are calibrated on the input model timed end to end, and the
calibration's measured noise is the least gain a rewrite must promise.

PyTorch also leaves the layout of a model's tensors to its caller, and oneDNN's convolutions and
pools run much faster in ``channels_last`` than in the default NCHW: :meth:`TorchCost.choose_layout`
times the chosen graph end to end in both and the optimize job reports the faster (by more than
the noise), which a module built from the result then uses.

PyTorch eager fuses nothing at run time: every op is a kernel launch and pays its dispatch (a
kernel's price includes it: :attr:`TorchCost.dispatch_us` is what the smallest op costs), so three
projections are three products and a batch norm is a kernel. A fused op of the IR (a convolution
with ``act="relu"``) is one kernel of the IR, timed as the executor runs it (convolution then
relu). Weight-only subgraphs cost nothing: the module folds them once, when it is built.

PyTorch is imported only when one of these models is built, never by ``import eqsat.cost``.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.cost.costmodel import Layout, has_layout
from eqsat.cost.devices import DEFAULT_DEVICE, TORCH_CPU, TORCH_CUDA, Device
from eqsat.cost.measured.base import (
    END_TO_END_PAIRS,
    OVERHEAD_RUNS,
    Calibration,
    MeasuredCost,
    median_pair,
    overhead_graph,
    roofline_us,
)
from eqsat.cost.measured.database import Context, machine_fingerprint
from eqsat.cost.measured.kernels import Kernel
from eqsat.cost.measured.timer import FLUSH_BYTES, RUNS, WARMUP, Timing
from eqsat.errors import UnsupportedError
from eqsat.ir.graph import Graph, input_

RESOLUTION = 0.02  # the least gain taken before a calibration measures the noise (ort-cpu's figure)
DISPATCH_KEY = "op-dispatch"  # the smallest op's module less the empty module's
CUDA_GRAPH_KEY = "cuda-graph:overhead"  # the smallest op's module replayed in a CUDA graph
LAYOUTS = ("contiguous", "channels_last")  # PyTorch's default first, then the one tried against it
GPU_ESTIMATE = Device("gpu-estimate", 20e12, 1e12, 0.0, "a GPU profile of 20 TFLOP/s float32 and 1 TB/s")


def empty_graph() -> Graph:
    """A module that runs no op (its output is its input): its call is the fixed cost of one call."""
    return Graph((input_("x", (1,)),), name="empty")


def _torch_timing() -> Any:
    """:mod:`.torchtime` (which imports torch), or one sentence saying how to install PyTorch."""
    try:
        from eqsat.cost.measured import torchtime
    except ImportError as exc:
        raise UnsupportedError(f"{TORCH_CPU.name} and {TORCH_CUDA.name} need PyTorch, which is not installed "
                               f"({exc}): pip install 'eqsat-lab[torch]'") from None
    return torchtime


class TorchCost(MeasuredCost):
    """The PyTorch eager cost model (see the module doc) on ``device`` (``"cpu"`` or ``"cuda"``),
    with ``threads`` intra-op threads, timing kernels in ``dtype``; ``path`` the database."""

    runtime = "PyTorch"

    def __init__(self, threads: int = 1, device: str = "cpu", path: str | Path | None = None, warmup: int = WARMUP,
                 runs: int = RUNS, progress: bool = True, resolution: float = RESOLUTION, dtype: str = "float32"):
        if device not in ("cpu", "cuda"):
            raise UnsupportedError(f"device {device!r}: the PyTorch cost model times on cpu or cuda")
        row = TORCH_CUDA if device == "cuda" else TORCH_CPU
        self.tt = _torch_timing()
        torch = self.tt.torch
        if device == "cuda" and not torch.cuda.is_available():
            raise UnsupportedError(f"{row.name}: this PyTorch ({torch.__version__}) sees no CUDA GPU "
                                   f"(torch.cuda.is_available() is False); price on {TORCH_CPU.name} or a GPU's "
                                   f"roofline profile ({DEFAULT_DEVICE}) instead")
        self.tt.torch_dtype(dtype)  # one sentence for a dtype PyTorch's executor does not run
        self.device, self.dtype = device, dtype
        gpu = f" {torch.cuda.get_device_name()}" if device == "cuda" else ""
        context = Context(machine_fingerprint(), f"{row.name} torch {torch.__version__} {dtype}{gpu}", threads)
        super().__init__(row, threads, context, path, warmup, runs, progress, resolution)
        self._dispatch: float | None = None
        self.cold_weights = True  # products read their weights out of cache (see calibrate)

    def cache_bytes(self) -> int:
        """The last-level cache: a model whose weights fit in it reads them warm, run after run
        (the CPU's L3, else :data:`.timer.FLUSH_BYTES` over two; the GPU's L2)."""
        if self.device == "cuda":
            return int(self.tt.torch.cuda.get_device_properties(0).L2_cache_size)
        try:
            found = os.sysconf("SC_LEVEL3_CACHE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = 0
        return found if found > 0 else FLUSH_BYTES // 2

    def calibrate(self, graph: Graph) -> Calibration | None:
        """:meth:`.base.MeasuredCost.calibrate`, after choosing how products read their weights:
        cold (timed rotating over copies of them) when the model's weights exceed
        :meth:`cache_bytes`, else warm, as they are run after run. Timed cold, the products of a
        QKV of 64-wide weights were priced at 5.7 µs each, 2.3x what they take in the model."""
        nbytes = sum(int(np.prod(w.shape)) for w in graph.leaves("weight")) * self.tt.torch_dtype(self.dtype).itemsize
        self.cold_weights = nbytes > self.cache_bytes()
        self._node_cache.clear()
        return super().calibrate(graph)

    def priced(self, kernel: Kernel) -> Kernel:
        """``kernel``, timed with its weights warm where the model's fit in the cache (see :meth:`calibrate`)."""
        return replace(kernel, warm=True) if kernel.cold_weights and not self.cold_weights else kernel

    def _time_kernel(self, kernel: Kernel) -> Timing:
        return self.tt.time_graph(kernel.graph(), self.device, self.dtype, self.threads, self.warmup, self.runs,
                                  cold_weights=kernel.cold_weights)

    def _time_overhead(self) -> Timing:
        return self.tt.time_graph(empty_graph(), self.device, self.dtype, self.threads, self.warmup * 4,
                                  OVERHEAD_RUNS)

    def _time_graphs(self, graphs: Sequence[Graph], seed: int) -> list[Timing]:
        return self.tt.time_graphs(graphs, self.device, self.dtype, self.threads, seed=seed)

    def choose_layout(self, graph: Graph) -> Layout | None:
        """``graph`` timed end to end with its 4-D tensors contiguous (PyTorch's default) and in
        ``channels_last`` (:data:`eqsat.pytorch.module.MEMORY_FORMATS`), interleaved, in
        :data:`.base.END_TO_END_PAIRS` pairs of fresh modules; ``channels_last`` is chosen when the
        median pair measures it faster by more than the :attr:`resolution`. None when the graph
        has no 4-D constant or input (nothing to lay out) or cannot be run. The timings are
        recorded, so a repeated run chooses alike. PyTorch eager runs a model in the layout its
        caller gives, and oneDNN's convolutions and pools are much faster in ``channels_last``."""
        if not has_layout(graph):
            return None
        default, tried = LAYOUTS
        try:
            pairs = [self._timed_layouts(graph, k) for k in range(END_TO_END_PAIRS)]
        except Exception as exc:  # PyTorch's errors have no common base class
            print(f"{self.name}: layout not chosen ({default} kept): {' '.join(str(exc).split())}", file=sys.stderr)
            return None
        a, b = median_pair(pairs)
        found = Layout(default, default, a.median_us, tried, b.median_us, self.resolution)
        return replace(found, name=tried) if found.gain > 1 + self.resolution else found

    def _timed_layouts(self, graph: Graph, seed: int) -> list[Timing]:
        return self.recorded([f"layout:{graph.digest}:{seed}:{name}" for name in LAYOUTS],
                             lambda: self.tt.time_graphs([graph] * len(LAYOUTS), self.device, self.dtype,
                                                         self.threads, seed=seed, layouts=LAYOUTS))

    @property
    def dispatch_us(self) -> float:
        """What the smallest op (a relu of one float) adds to a module's call (µs): PyTorch's
        per-op dispatch, every kernel's price includes it. Measured once per database."""
        if self._dispatch is None:
            relu = self.db.measure(DISPATCH_KEY, lambda: self.tt.time_graph(
                overhead_graph(), self.device, self.dtype, self.threads, self.warmup * 4, OVERHEAD_RUNS))
            self._dispatch = max(relu.median_us - self.overhead_us, 0.0)
        return self._dispatch

    def cuda_graph_us(self) -> float | None:
        """The smallest op's module replayed in a CUDA graph (µs; None on a CPU): against its
        eager call (:attr:`dispatch_us` plus :attr:`~.base.MeasuredCost.overhead_us`), what
        launching from Python costs. Measured once per database."""
        if self.device != "cuda":
            return None
        return self.db.measure(CUDA_GRAPH_KEY, lambda: self.tt.cuda_graph_us(overhead_graph(), self.device,
                                                                             self.dtype)).median_us

    def estimate_device(self) -> Device:
        return GPU_ESTIMATE if self.device == "cuda" else super().estimate_device()

    def estimate_kernel_us(self, kernel: Kernel) -> float:
        """The roofline of its bytes and FLOPs, plus one op's dispatch."""
        return roofline_us(kernel, self.estimate_device()) + self.dispatch_us

    def provenance(self) -> str:
        graph = self.cuda_graph_us()
        replay = f", {graph:.1f} µs replayed in a CUDA graph" if graph is not None else ""
        weights = "cold" if self.cold_weights else "warm (the model's weights fit in the cache)"
        return (f"{super().provenance()}; a module call {self.overhead_us:.1f} µs, each op's dispatch "
                f"{self.dispatch_us:.1f} µs{replay}; products read their weights {weights}")


class TorchCpuCost(TorchCost):
    """``torch-cpu[:threads]``: :class:`TorchCost` on this CPU."""

    def __init__(self, threads: int = 1, **kwargs: Any):
        super().__init__(threads, "cpu", **kwargs)


class TorchCudaCost(TorchCost):
    """``torch-cuda[:threads]``: :class:`TorchCost` on this machine's GPU (``threads``: the CPU's)."""

    def __init__(self, threads: int = 1, **kwargs: Any):
        super().__init__(threads, "cuda", **kwargs)
