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
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from eqsat.cost.costmodel import CostReport, OpCost, node_in_shapes
from eqsat.cost.measured.database import Context, MeasurementDB, default_path
from eqsat.cost.measured.kernels import Kernel, fused_kernel, node_kernel, op_kernel
from eqsat.cost.measured.timer import RUNS, WARMUP, Timing, time_graph, time_graphs
from eqsat.ir.graph import Graph, Node, input_, node
from eqsat.ir.ops import Shape, get_op

FREE_OPS = frozenset({"proj", "noop"})
OVERHEAD_KEY = "run-call-overhead"
OVERHEAD_RUNS = 200
RESOLUTION = 0.02  # run-to-run spread of a kernel's median on this 2-core machine is 1-3%


def overhead_graph() -> Graph:
    """The smallest real model: one relu of one float (its run is onnxruntime's fixed cost)."""
    return Graph((node("relu", input_("x", (1,))),), name="overhead")


class OrtCpuCost:
    """The measured cost model (see the module doc). ``threads`` is onnxruntime's intra-op thread
    count; ``path`` the database (default :func:`~.database.default_path`)."""

    def __init__(self, threads: int = 1, path: str | None = None, warmup: int = WARMUP, runs: int = RUNS,
                 progress: bool = True, resolution: float = RESOLUTION):
        if threads < 1:
            raise ValueError(f"ort-cpu: threads must be at least 1, got {threads}")
        self.threads, self.warmup, self.runs, self.progress = threads, warmup, runs, progress
        self.resolution = resolution  # gains below this are noise (see eqsat.search.keep_unresolved_gain)
        self.db = MeasurementDB.shared(Context.here(threads), path if path is not None else default_path())
        self.measured = 0  # kernels timed by this process (not found in the database)
        self._bar: Any = None
        self._overhead: float | None = None
        self._node_cache: dict[Node, float] = {}
        self._kernel_cache: dict[Kernel, float] = {}

    @property
    def name(self) -> str:
        return "ort-cpu" if self.threads == 1 else f"ort-cpu:{self.threads}"

    # ------------------------------------------------------------------ measuring
    def timing(self, kernel: Kernel) -> Timing:
        """The kernel's timing from the database, measured now if it is not there."""
        def time_it() -> Timing:  # under the database's measuring lock (see MeasurementDB.measure)
            self._tick(kernel.name)
            try:
                timed = time_graph(kernel.graph(), self.threads, self.warmup, self.runs,
                                   cold_weights=kernel.cold_weights)
            except Exception as exc:  # onnxruntime's own errors have no common base class
                raise ValueError(f"{self.name}: onnxruntime cannot run the kernel {kernel.name} alone on random "
                                 f"inputs ({str(exc).splitlines()[0][:200]}); price this model on a roofline "
                                 f"device instead") from None
            self.measured += 1
            return timed

        return self.db.measure(kernel.key, time_it)

    def _tick(self, what: str) -> None:
        """A progress bar counting kernels timed (opened on the first one, on stderr)."""
        if not self.progress:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(desc=f"{self.name}: timing kernels", unit="kernel", file=sys.stderr, leave=False,
                              disable=None)  # None: no bar when stderr is not a terminal
        self._bar.set_postfix_str(what, refresh=False)
        self._bar.update()

    @property
    def overhead_us(self) -> float:
        """The fixed cost of one ``session.run`` call (µs), measured once per database."""
        if self._overhead is None:
            found = self.db.measure(OVERHEAD_KEY, lambda: time_graph(overhead_graph(), self.threads,
                                                                      self.warmup * 4, OVERHEAD_RUNS))
            self._overhead = found.median_us
        return self._overhead

    def kernel_us(self, kernel: Kernel) -> float:
        """A kernel's price: its median less the fixed cost of a run call (memoized: the extractor
        prices every e-node, and many share a kernel)."""
        found = self._kernel_cache.get(kernel)
        if found is None:
            found = self._kernel_cache[kernel] = max(self.timing(kernel).median_us - self.overhead_us, 0.0)
        return found

    # ------------------------------------------------------------------ the CostModel interface
    def op_time_us(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape],
                   out_shapes: Sequence[Shape], is_const: bool, dtype: str = "float32",
                   const_inputs: Sequence[bool] | None = None) -> float:
        spec = get_op(op)
        if is_const or spec.is_leaf or op in FREE_OPS or spec.takes_tuple:
            return 0.0
        if op == "opaque" and dict(attrs).get("index", 0) != 0:
            return 0.0  # one ONNX node, priced once (with its first output)
        consts = tuple(const_inputs) if const_inputs is not None else (False,) * len(in_shapes)
        return self.kernel_us(op_kernel(op, attrs, in_shapes, consts))

    def node_time_us(self, n: Node, dtype: str = "float32") -> float:
        found = self._node_cache.get(n)
        if found is None:
            fused = fused_kernel(n)
            if fused is not None:
                kernel, producer = fused
                found = max(self.kernel_us(kernel) - self.kernel_us(node_kernel(producer)), 0.0)
            else:
                found = self.op_time_us(n.op, n.attr_dict, node_in_shapes(n), n.shapes, n.is_const, dtype,
                                        [x.is_const for x in n.inputs])
            self._node_cache[n] = found
        return found

    def graph_time_us(self, graph: Graph) -> float:
        return sum(self.node_time_us(n, graph.dtype) for n in graph.nodes())

    def end_to_end_us(self, a: Graph, b: Graph) -> tuple[float, float]:
        """Both graphs timed end to end, alternately (the last word on a search's pick: kernels
        timed one at a time can be wrong together by more than their spread)."""
        ta, tb = time_graphs([a, b], self.threads)
        return ta.median_us, tb.median_us

    def latency_us(self, graph: Graph) -> float:
        """Predicted end-to-end latency of one run of the graph's model: kernels plus the run call."""
        return self.graph_time_us(graph) + self.overhead_us

    def report(self, graph: Graph) -> CostReport:
        rows = []
        for n in graph.nodes():
            spec = n.spec
            kind = ("leaf" if spec.is_leaf else "folded" if n.is_const else "view" if n.op in FREE_OPS
                    else "measured")
            flops = 0 if spec.is_leaf or spec.is_view else int(spec.flops(n.attr_dict, node_in_shapes(n), n.shapes))
            nbytes = spec.elements_moved(node_in_shapes(n), n.shapes) * 4
            shown = tuple(n.shapes[0]) if len(n.shapes) == 1 else tuple(tuple(s) for s in n.shapes)
            rows.append(OpCost(n.op, shown, flops, nbytes, self.node_time_us(n), kind, n.digest[:12]))
        return CostReport(graph.name, self.name, "float32", sum(r.time_us for r in rows), tuple(rows))
