"""The cost-model interface: what the searches, the extractor, PET and the reports take from any
cost model (:class:`CostModel`), and the values it returns (:class:`OpCost`, :class:`CostReport`).
Kept apart from the implementations (the roofline in :mod:`eqsat.cost.roofline`, the measured model in
:mod:`eqsat.cost.measured`) so each can import it without importing the other."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eqsat.ir.graph import Graph, Node
from eqsat.ir.ops import Shape


@dataclass(frozen=True)
class OpCost:
    """The price of one op: ``kind`` is compute, memory, folded (weight-only), view or leaf."""

    op: str
    shape: tuple
    flops: int
    bytes: int
    time_us: float
    kind: str
    node: str = ""


def node_in_shapes(n: Node) -> tuple[Shape, ...]:
    """The shapes an op reads (a tuple-reading op reads all its producer's outputs)."""
    if n.spec.takes_tuple:
        return n.inputs[0].shapes
    return tuple(x.shapes[0] for x in n.inputs)


@dataclass(frozen=True)
class CostReport:
    """Total and per-op breakdown of a graph on a device (rows in topological order)."""

    graph: str
    device: str
    dtype: str
    total_us: float
    rows: tuple[OpCost, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph, "device": self.device, "dtype": self.dtype, "total_us": self.total_us,
            "ops": [r.__dict__ for r in self.rows if r.kind not in ("leaf", "view")],
        }


@dataclass(frozen=True)
class Layout:
    """The memory layout a runtime runs a graph in, chosen by timing the graph end to end in its
    default layout and in another (``tried``): ``name`` is the one chosen, taken over ``default``
    only when it is faster by more than ``threshold`` (the model's resolution: its measured
    noise). The latencies are the median pair of interleaved timings, in µs."""

    name: str
    default: str
    default_us: float
    tried: str
    tried_us: float
    threshold: float

    @property
    def gain(self) -> float:
        """``default_us / tried_us``: what the tried layout measured against the default."""
        return self.default_us / self.tried_us if self.tried_us > 0 else 1.0

    @property
    def changed(self) -> bool:
        return self.name != self.default

    def summary(self) -> str:
        if self.changed:
            return (f"layout {self.name}: {self.tried_us / 1e3:.2f} ms end to end against {self.default_us / 1e3:.2f} "
                    f"ms {self.default} ({self.gain:.3f}x)")
        return (f"layout {self.default} kept: {self.tried} measured {self.gain:.3f}x end to end, not above the "
                f"{self.threshold:.1%} threshold")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "default": self.default, "default_us": self.default_us, "tried": self.tried,
                "tried_us": self.tried_us, "gain": self.gain, "threshold": self.threshold}


def has_layout(graph: Graph) -> bool:
    """Whether ``graph`` has a 4-D weight or input, so that the memory layout of its 4-D tensors is
    a runtime's choice (a graph without one computes every 4-D value from 2-D or 3-D tensors, and
    PyTorch lays those out contiguous whatever its caller does)."""
    return any(len(n.shape) == 4 for n in graph.nodes() if n.is_const or n.op == "input")


class CostModel(Protocol):
    """Everything a search or a command asks of a cost model (roofline or measured): a name for
    reports, the price of one op from its signature (the e-graph extractor has no nodes, only
    shapes), of a node and of a whole graph, and what only a model of a real runtime can answer
    (``end_to_end_us``, ``latency_us``: None from a formula). Callers use these members and
    nothing else, so a new model is one class with them."""

    @property
    def name(self) -> str: ...

    @property
    def resolution(self) -> float:
        """The relative price difference the model can tell apart (0: exact; a measured model's
        timing noise): a search's gain below it is not taken."""
        ...

    def op_time_us(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape],
                   out_shapes: Sequence[Shape], is_const: bool, dtype: str,
                   const_inputs: Sequence[bool] | None = None) -> float: ...

    def node_time_us(self, n: Node, dtype: str) -> float: ...

    def graph_time_us(self, graph: Graph) -> float: ...

    def report(self, graph: Graph) -> CostReport: ...

    def end_to_end_us(self, a: Graph, b: Graph) -> tuple[float, float] | None:
        """Both graphs run end to end (the last word on a pick whose gain is near the
        ``resolution``), or None from a model that runs nothing."""
        ...

    def latency_us(self, graph: Graph) -> float | None:
        """The predicted latency of one run of the graph in the runtime the model times (its
        kernels plus the runtime's fixed cost), or None from a model of kernels alone. A model
        that answers prices the runtime's own fusions already."""
        ...

    def calibrate(self, graph: Graph) -> Any | None:
        """Fit the model's prices to ``graph`` run end to end (its calibration record), or None
        from a model that runs nothing."""
        ...

    def choose_layout(self, graph: Graph) -> Layout | None:
        """The memory layout the runtime should run ``graph`` in, measured end to end, or None
        from a model that runs nothing or whose runtime lays tensors out itself (onnxruntime)."""
        ...

    def timing_s(self) -> dict[str, float]:
        """Wall seconds this process spent running graphs to price them, by kind
        (``kernel_timing``: kernels alone; ``end_to_end_timing``: whole graphs), so a job's phases
        can name time spent inside them; empty from a model that runs nothing."""
        ...

    def provenance(self) -> str:
        """Where the prices come from, in one line for reports (the device's figures; the
        measurements: how many were timed now and where the rest were read)."""
        ...
