"""``ort-cpu``: a cost model measured on this machine in onnxruntime's CPU provider.

Each distinct kernel (op, attributes, input shapes, which inputs are weights, fused activation)
is exported alone and timed once (:mod:`.timer`); the timing goes to the measurement database
(:mod:`.database`) that every later run reuses. A kernel's price is its median run time less the
runtime's fixed cost of one ``run`` call (an empty-ish model timed the same way), so a graph's
price is the sum of its kernels' and its predicted end-to-end latency adds that fixed cost once
(:meth:`OrtCpuCost.latency_us`).

Pricing follows the runtime, not the roofline: weight-only subgraphs fold (cost 0, as
onnxruntime folds initializers); ``proj`` and ``noop`` are renames (0); every other op is timed,
so a view is free only where onnxruntime makes it free (a Reshape aliases, a Split copies). A
graph's dtype is ignored: onnxruntime's CPU kernels are timed in float32. A node that
onnxruntime fuses into its producer (:data:`~.kernels.RUNTIME_FUSIONS`: a conv's activation,
bias, batch norm or residual sum, a product's column bias) costs what it adds to the fused
kernel, so a rewrite that "fuses" what the runtime fuses anyway gains nothing. (The fusion is
assumed whenever the pattern is there; the runtime also needs the producer to have no other
reader.)

An imported node the op table does not know is timed as it is in its file (its own opset, domain,
input types and constants: :meth:`.kernels.Kernel.write_stored_model`). A kernel onnxruntime cannot run
alone is priced by :func:`estimate_us`, a stated roofline estimate, never by refusing the model.
:meth:`OrtCpuCost.calibrate` scales all prices to the input model's end-to-end time. What every
measured device shares (the database, the calibration, the end-to-end check) is :mod:`.base`.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from eqsat.cost.devices import ORT_CPU
from eqsat.cost.measured.base import OVERHEAD_RUNS, Calibration, MeasuredCost, estimate_us, overhead_graph
from eqsat.cost.measured.database import Context
from eqsat.cost.measured.kernels import RUNTIME_FUSIONS, Kernel
from eqsat.cost.measured.timer import RUNS, WARMUP, Timing, time_graph, time_graph_sessions, time_model
from eqsat.ir.graph import Graph

__all__ = ["RESOLUTION", "Calibration", "OrtCpuCost", "estimate_us"]

RESOLUTION = 0.02  # run-to-run spread of a kernel's median on this 2-core machine is 1-3%


class OrtCpuCost(MeasuredCost):
    """The measured cost model (see the module doc). ``threads`` is onnxruntime's intra-op thread
    count; ``path`` the database (default :func:`~.database.default_path`)."""

    runtime = "onnxruntime"
    fusions = RUNTIME_FUSIONS

    @property
    def export(self) -> str:  # type: ignore[override]
        """A graph timed end to end is the file the writer wrote: its version keys the timings."""
        from eqsat.onnx.writer import EXPORT_TAG

        return EXPORT_TAG

    def __init__(self, threads: int = 1, path: str | None = None, warmup: int = WARMUP, runs: int = RUNS,
                 progress: bool = True, resolution: float = RESOLUTION):
        super().__init__(ORT_CPU, threads, Context.here(threads), path, warmup, runs, progress, resolution)
        self._exports: dict[str, Path] = {}  # graph digest -> its export, timed end to end again (the input)
        self._exports_dir: tempfile.TemporaryDirectory[str] | None = None

    def _time_kernel(self, kernel: Kernel) -> Timing:
        if kernel.stored_node:  # an imported node: as it was in its file
            return time_model(kernel.write_stored_model, self.threads, self.warmup, self.runs,
                              cold_weights=kernel.cold_weights)
        return time_graph(kernel.graph(), self.threads, self.warmup, self.runs, cold_weights=kernel.cold_weights)

    def _time_overhead(self) -> Timing:
        return time_graph(overhead_graph(), self.threads, self.warmup * 4, OVERHEAD_RUNS)

    def _time_graphs(self, graphs: Sequence[Graph], seed: int) -> list[Timing]:
        return self._time_sessions(graphs, 1, seed)[0]

    def _time_sessions(self, graphs: Sequence[Graph], sessions: int, seed: int = 0) -> list[list[Timing]]:
        """All sessions in one interleaved timing (:func:`.timer.time_graph_sessions`)."""
        if self._exports_dir is None:  # removed when this model is collected (or at exit)
            self._exports_dir = tempfile.TemporaryDirectory(prefix="eqsat-time-")
        return time_graph_sessions(graphs, sessions, self.threads, seed=seed, exports=self._exports,
                                   folder=self._exports_dir.name)
