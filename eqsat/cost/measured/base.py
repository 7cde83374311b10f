"""What every measured device shares (``ort-cpu``, ``torch-cpu``, ``torch-cuda``): kernels timed
once and kept in the measurement database, a kernel's price as its median less the runtime's fixed
cost of one call, an estimate for a kernel the runtime cannot run alone, the calibration on the
input model timed end to end, and the end-to-end check of a pick.

A device is a subclass of :class:`MeasuredCost` that says how its runtime times a kernel, the
empty-ish call and a group of graphs interleaved (:meth:`~MeasuredCost._time_kernel`,
:meth:`~MeasuredCost._time_overhead`, :meth:`~MeasuredCost._time_graphs` or
:meth:`~MeasuredCost._time_sessions`), which producer/consumer
pairs the runtime fuses (:attr:`~MeasuredCost.fusions`), and the context its timings hold in.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.cost.costmodel import CostReport, Layout, OpCost, node_in_shapes
from eqsat.cost.devices import Device, MeasuredDevice
from eqsat.cost.measured.database import Context, MeasurementDB, default_path
from eqsat.cost.measured.kernels import Fusion, Kernel, fused_kernel, node_kernel, op_kernel
from eqsat.cost.measured.timer import RUNS, WARMUP, Timing
from eqsat.ir.graph import Graph, Node, input_, node
from eqsat.ir.ops import Shape, get_op

FREE_OPS = frozenset({"proj", "noop"})
OVERHEAD_KEY = "run-call-overhead"
OVERHEAD_RUNS = 200
END_TO_END_PAIRS = 3  # sessions of each of two graphs timed interleaved: pairs of sessions, of which the median is used
END_TO_END_MORE = 2  # pairs timed again when the first contradict the prediction (5 in all: a median of one pair)


@dataclass(frozen=True)
class Calibration:
    """One model's end-to-end calibration (µs): its priced latency before, its measured latency
    (the median over :data:`END_TO_END_PAIRS` pairs of sessions of it, timed interleaved), the scale every
    kernel price is multiplied by, and the measured noise (the median of the pairs' relative
    differences)."""

    priced_us: float
    measured_us: float
    scale: float
    noise: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def summary(self) -> str:
        return (f"calibrated on the input timed end to end: priced {self.priced_us / 1e3:.3f} ms, measured "
                f"{self.measured_us / 1e3:.3f} ms (noise {self.noise:.1%}); kernel prices x{self.scale:.3f}")


ESTIMATE_FLOPS_PER_THREAD = 50e9  # float32 FMA throughput of one x86 core, order of magnitude
ESTIMATE_BANDWIDTH = 10e9  # B/s one core streams from memory, order of magnitude


def relative_gap(a: float, b: float) -> float:
    """|a - b| over their mean: how far two timings of one model apart are (the noise)."""
    mean = (a + b) / 2
    return abs(a - b) / mean if mean > 0 else 0.0


def median_pair(pairs: Sequence[Sequence[Timing]]) -> tuple[Timing, Timing]:
    """The pair of timings (a, b) whose ratio a / b is the median of ``pairs``' ratios: one
    pair of sessions strays now and then by more than the gain it judges."""
    ordered = sorted(pairs, key=lambda p: p[0].median_us / p[1].median_us if p[1].median_us > 0 else float("inf"))
    a, b = ordered[len(ordered) // 2]
    return a, b


def estimate_device(threads: int) -> Device:
    """The CPU profile a kernel the runtime cannot run alone is priced on: a stated estimate."""
    return Device("cpu-estimate", ESTIMATE_FLOPS_PER_THREAD * threads, ESTIMATE_BANDWIDTH, 0.0,
                  f"a CPU profile of {ESTIMATE_FLOPS_PER_THREAD * threads / 1e9:.0f} GFLOP/s and "
                  f"{ESTIMATE_BANDWIDTH / 1e9:.0f} GB/s")


def roofline_us(kernel: Kernel, device: Device) -> float:
    """The roofline price (µs) of a kernel's ops on ``device``: the larger of its FLOPs over the
    peak and the float32 bytes it moves over the bandwidth, summed over its ops."""
    total = 0.0
    for n in kernel.graph().nodes():
        if n.spec.is_leaf or n.spec.is_view or n.op in FREE_OPS:
            continue
        ins = node_in_shapes(n)
        flops = n.spec.flops(n.attr_dict, ins, n.shapes)
        total += max(flops / device.peak_flops, n.spec.elements_moved(ins, n.shapes) * 4 / device.bandwidth) * 1e6
    return total


def estimate_us(kernel: Kernel, threads: int) -> float:
    """:func:`roofline_us` on :func:`estimate_device`."""
    return roofline_us(kernel, estimate_device(threads))


def overhead_graph() -> Graph:
    """The smallest real model: one relu of one float (its run is the runtime's fixed cost)."""
    return Graph((node("relu", input_("x", (1,))),), name="overhead")


class MeasuredCost:
    """A cost model timed on this machine (see the module doc). ``row`` is the device's row of
    :data:`~eqsat.cost.devices.MEASURED_DEVICES`, ``threads`` the runtime's intra-op threads,
    ``context`` where its timings hold, ``path`` the database (default :func:`~.database.default_path`)."""

    runtime = "the runtime"  # how messages name what times the kernels
    export = ""  # in end-to-end timings' keys: the version of what turns a graph into what the runtime runs
    fusions: tuple[Fusion, ...] = ()  # producer/consumer pairs the runtime runs as one kernel
    dtype = "float32"  # what the kernels are timed in

    def __init__(self, row: MeasuredDevice, threads: int, context: Context, path: str | Path | None = None,
                 warmup: int = WARMUP, runs: int = RUNS, progress: bool = True, resolution: float = 0.0):
        if threads < 1:
            raise ValueError(f"{row.name}: threads must be at least 1, got {threads}")
        self.row, self.threads, self.warmup, self.runs, self.progress = row, threads, warmup, runs, progress
        self.resolution = resolution  # gains below this are noise (see eqsat.search.keep_unresolved_gain)
        self.db = MeasurementDB.shared(context, path if path is not None else default_path())
        self.measured = 0  # kernels timed by this process (not found in the database)
        self.kernel_timing_s = 0.0  # wall seconds this process spent timing kernels alone (not read back)
        self.end_to_end_s = 0.0  # wall seconds spent timing whole graphs (calibration, end-to-end checks)
        self._bar: Any = None
        self._overhead: float | None = None
        self._node_cache: dict[Node, float] = {}
        self._kernel_cache: dict[Kernel, float] = {}
        self.calibration: Calibration | None = None  # set by calibrate(): every price is scaled by it
        self.estimated: dict[str, str] = {}  # kernel key -> why it is priced by an estimate, not timed

    @property
    def name(self) -> str:
        return self.row.with_threads(self.threads)

    # ------------------------------------------------------------------ what a runtime supplies
    def _time_kernel(self, kernel: Kernel) -> Timing:
        """One kernel timed alone (raises when the runtime cannot run it)."""
        raise NotImplementedError

    def _time_overhead(self) -> Timing:
        """The runtime's fixed cost of one call, timed as :meth:`_time_kernel` times a kernel."""
        raise NotImplementedError

    def _time_graphs(self, graphs: Sequence[Graph], seed: int) -> list[Timing]:
        """Whole graphs timed end to end, interleaved, with ``seed``'s inputs and order."""
        raise NotImplementedError

    def _time_sessions(self, graphs: Sequence[Graph], sessions: int) -> list[list[Timing]]:
        """Whole graphs timed end to end, interleaved, each in ``sessions`` sessions of its own:
        ``[session][graph]`` (default: :meth:`_time_graphs` once per session, each with its seed)."""
        return [self._time_graphs(graphs, seed=k) for k in range(sessions)]

    def priced(self, kernel: Kernel) -> Kernel:
        """The kernel whose timing prices ``kernel`` (itself; a device may time it otherwise)."""
        return kernel

    def estimate_device(self) -> Device:
        """The profile :meth:`estimate_kernel_us` prices on."""
        return estimate_device(self.threads)

    def estimate_kernel_us(self, kernel: Kernel) -> float:
        """A kernel the runtime cannot run alone: the roofline of its bytes and FLOPs."""
        return roofline_us(kernel, self.estimate_device())

    # ------------------------------------------------------------------ measuring
    def timing(self, kernel: Kernel) -> Timing | None:
        """The kernel's timing from the database, measured now if it is not there; None (with the
        reason in :attr:`estimated`) when the runtime cannot run it alone."""
        if kernel.key in self.estimated:
            return None

        def time_it() -> Timing:  # under the database's measuring lock (see MeasurementDB.measure)
            self._tick(kernel.name)
            start = time.perf_counter()
            try:
                timed = self._time_kernel(kernel)
            finally:
                self.kernel_timing_s += time.perf_counter() - start
            self.measured += 1
            return timed

        try:
            return self.db.measure(kernel.key, time_it)
        except Exception as exc:  # the runtimes' own errors have no common base class
            self._estimate_instead(kernel, exc)
            return None

    def _estimate_instead(self, kernel: Kernel, exc: Exception) -> None:
        """Record (and say once, on stderr, with the runtime's whole message) that ``kernel`` is
        priced by :meth:`estimate_kernel_us` because it cannot be timed alone."""
        what = " ".join(str(exc).split()) or type(exc).__name__
        step = kernel.steps[0]
        label = dict(step.attrs).get("op_type", kernel.name) if kernel.stored_node else kernel.name
        self.estimated[kernel.key] = f"{label}: {self.runtime} cannot run it alone ({what})"
        print(f"{self.name}: the kernel {label} is priced by an estimate (the roofline of its bytes and FLOPs on "
              f"{self.estimate_device().note}): {self.runtime} cannot run it alone: {what}", file=sys.stderr)

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
        """The fixed cost of one call of the runtime (µs), measured once per database."""
        if self._overhead is None:
            self._overhead = self.db.measure(OVERHEAD_KEY, self._time_overhead).median_us
        return self._overhead

    def kernel_us(self, kernel: Kernel) -> float:
        """A kernel's price: its median less the fixed cost of a call (memoized: the extractor
        prices every e-node, and many share a kernel), times the :attr:`calibration`'s scale."""
        kernel = self.priced(kernel)
        found = self._kernel_cache.get(kernel)
        if found is None:
            timing = self.timing(kernel)
            found = (self.estimate_kernel_us(kernel) if timing is None
                     else max(timing.median_us - self.overhead_us, 0.0))
            self._kernel_cache[kernel] = found
        return found * (self.calibration.scale if self.calibration is not None else 1.0)

    def calibrate(self, graph: Graph) -> Calibration | None:
        """Scale every later price so that ``graph`` (the input model) is priced at its end-to-end
        time: kernels timed alone run with other caches, layouts and neighbours than in the model,
        and their sum was off by 0.5-3x. The graph is timed against itself, interleaved, in
        :data:`END_TO_END_PAIRS` pairs of sessions (:meth:`timed_pairs`); the median of the pairs'
        relative differences is the measured noise (identical models in two sessions differ by a
        few percent, steadily, and one pair's gap swings too much on a shared machine to set a
        threshold by), and the :attr:`resolution` (the least gain a rewrite must promise) becomes
        at least that. A uniform scale changes no choice between graphs, only what their prices
        claim. The timings are recorded, so a repeated run calibrates alike. None (said on stderr)
        when the graph cannot be run end to end: the prices stay unscaled."""
        self.calibration = None
        self._node_cache.clear()
        priced = self.graph_time_us(graph)
        try:
            pairs = self.timed_pairs("calibration", graph, graph)
        except Exception as exc:  # the runtimes' errors have no common base class
            print(f"{self.name}: not calibrated (prices are kernels timed alone): {self.runtime} cannot run the "
                  f"model end to end: {' '.join(str(exc).split())}", file=sys.stderr)
            return None
        means = [(a.median_us + b.median_us) / 2 for a, b in pairs]
        measured = float(np.median(means))
        noise = float(np.median([relative_gap(a.median_us, b.median_us) for a, b in pairs]))
        kernels = max(measured - self.overhead_us, 0.0)
        scale = kernels / priced if priced > 0 and kernels > 0 else 1.0
        self.calibration = Calibration(priced + self.overhead_us, measured, scale, noise)
        self.resolution = max(self.resolution, noise)
        self._node_cache.clear()
        return self.calibration

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
            fused = fused_kernel(n, self.fusions)
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

    def timed_together(self, what: str, graphs: Sequence[Graph], sessions: int = 1) -> list[list[Timing]]:
        """``graphs`` timed end to end, interleaved, each in ``sessions`` sessions
        (:meth:`_time_sessions`, ``[session][graph]``), recorded in the database under ``what``: a
        later run reads the same timings, so it calibrates alike and confirms the same pick."""
        keys = [f"{what}:{j}:{k}" for j in range(sessions) for k in range(len(graphs))]
        flat = self.recorded(keys, lambda: [t for row in self._time_sessions(graphs, sessions) for t in row])
        return [flat[j * len(graphs):(j + 1) * len(graphs)] for j in range(sessions)]

    def recorded(self, keys: Sequence[str], time_them: Callable[[], Sequence[Timing]]) -> list[Timing]:
        """End-to-end timings under ``keys``: read from the database, else ``time_them()``, counted
        in :attr:`end_to_end_s` and recorded, so a repeated run decides alike."""
        def timed() -> Sequence[Timing]:
            start = time.perf_counter()
            try:
                return time_them()
            finally:
                self.end_to_end_s += time.perf_counter() - start
        return self.db.measure_all(keys, timed)

    def timed_pairs(self, what: str, a: Graph, b: Graph, pairs: int = END_TO_END_PAIRS) -> list[list[Timing]]:
        """``pairs`` pairs of timings of ``a`` and ``b``: each graph in that many sessions, all
        timed interleaved in one timing (a session opened once, kept for all its runs), the k-th
        of ``a``'s against the k-th of ``b``'s; recorded under ``what`` and both graphs' digests
        (after :attr:`export`, how a graph becomes what the runtime runs)."""
        return self.timed_together(f"{what}:{self.export}{a.digest}:{b.digest}", [a, b], pairs)

    def end_to_end_us(self, a: Graph, b: Graph) -> tuple[float, float]:
        """Both graphs timed end to end, alternately (the last word on a search's pick: kernels
        timed one at a time can be wrong together by more than their spread): the pair of
        :data:`END_TO_END_PAIRS` pairs of sessions (:meth:`timed_pairs`) whose ratio is the
        median. One session of a pair strays now and then by more than the gain it judges; the
        timings are recorded, so a repeated run decides alike. Where the prices promise ``b`` a
        gain beyond the resolution and the pairs show none, :data:`END_TO_END_MORE` pairs more
        are timed and the median is taken over all: with 4 runs per session of a 250 ms ViT, 3
        pairs measured 0.995x a pick that ran 1.013-1.021x timed apart."""
        pairs = self.timed_pairs("end-to-end", a, b)
        ta, tb = median_pair(pairs)
        if self._contradicted(a, b, ta.median_us / tb.median_us):
            ta, tb = median_pair(pairs + self.timed_pairs("end-to-end-more", a, b, END_TO_END_MORE))
        return ta.median_us, tb.median_us

    def _contradicted(self, a: Graph, b: Graph, measured: float) -> bool:
        """Whether the prices promise ``b`` a gain over ``a`` beyond the resolution that the
        measured ratio ``a / b`` does not show (as the guards read a gain: ``b < a * (1 - resolution)``)."""
        threshold = 1 / (1 - self.resolution) if self.resolution < 1 else float("inf")
        priced_b = self.graph_time_us(b)
        return priced_b > 0 and self.graph_time_us(a) / priced_b > threshold and measured <= threshold

    def choose_layout(self, graph: Graph) -> Layout | None:  # the CostModel interface (eqsat.cost.costmodel)
        """None: the runtime keeps its own layout (onnxruntime chooses its layouts as it runs a
        graph); a runtime that leaves it to the caller overrides this."""
        return None

    def timing_s(self) -> dict[str, float]:  # the CostModel interface (eqsat.cost.costmodel)
        return {"kernel_timing": self.kernel_timing_s, "end_to_end_timing": self.end_to_end_s}

    def provenance(self) -> str:  # the CostModel interface (eqsat.cost.costmodel)
        return f"{self.measured} kernel(s) timed now, the rest from {self.db.path}"

    def latency_us(self, graph: Graph) -> float:
        """Predicted end-to-end latency of one run of the graph's model: kernels plus the call."""
        return self.graph_time_us(graph) + self.overhead_us

    def _estimated(self, n: Node) -> bool:
        """Whether a kernel ``n``'s price reads was priced by an estimate."""
        fused = fused_kernel(n, self.fusions)
        kernels = (fused[0], node_kernel(fused[1])) if fused is not None else (node_kernel(n),)
        return any(self.priced(k).key in self.estimated for k in kernels)

    def report(self, graph: Graph) -> CostReport:
        rows = []
        for n in graph.nodes():
            spec = n.spec
            kind = ("leaf" if spec.is_leaf else "folded" if n.is_const else "view" if n.op in FREE_OPS
                    else "estimate" if self._estimated(n) else "measured")
            flops = 0 if spec.is_leaf or spec.is_view else int(spec.flops(n.attr_dict, node_in_shapes(n), n.shapes))
            nbytes = spec.elements_moved(node_in_shapes(n), n.shapes) * 4
            shown = tuple(n.shapes[0]) if len(n.shapes) == 1 else tuple(tuple(s) for s in n.shapes)
            rows.append(OpCost(n.op, shown, flops, nbytes, self.node_time_us(n), kind, n.digest[:12]))
        return CostReport(graph.name, self.name, self.dtype, sum(r.time_us for r in rows), tuple(rows))
