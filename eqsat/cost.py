"""The cost-model interface and the roofline cost model.

Per op: ``time = max(FLOPs / peak, bytes / bandwidth) + launch``, where bytes are
every input read plus every output written at the dtype's width. Weight-only
subgraphs are folded at compile time (cost 0); views (split, proj, reshape,
noop) and leaves cost 0; a concat of activations is a real kernel; a fused
activation adds nothing but its FLOPs.

:func:`op_cost` prices one op from shapes alone, so the e-graph extractor
and the searches can price e-nodes and rewritten nodes without rebuilding a
graph; :class:`RooflineCost` caches node prices so that a search re-pricing a
rewritten graph only pays for the nodes that are new.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .devices import Device, get_device
from .graph import Graph, Node
from .ops import Shape, get_op

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int8": 1}


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise KeyError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})") from None


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


def op_cost(op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape], out_shapes: Sequence[Shape],
            is_const: bool, device: Device, dtype: str = "bf16") -> OpCost:
    """Price one op from its shapes (no graph needed)."""
    spec = get_op(op)
    shown = tuple(out_shapes[0]) if len(out_shapes) == 1 else tuple(tuple(s) for s in out_shapes)
    if spec.is_leaf:
        return OpCost(op, shown, 0, 0, 0.0, "leaf")
    if spec.is_view:
        return OpCost(op, shown, 0, 0, 0.0, "view")
    flops = int(spec.flops(attrs, in_shapes, out_shapes))
    nbytes = spec.elements_moved(in_shapes, out_shapes) * dtype_bytes(dtype)
    if is_const:
        return OpCost(op, shown, flops, nbytes, 0.0, "folded")
    compute_s, memory_s = flops / device.peak_flops, nbytes / device.bandwidth
    time_us = max(compute_s, memory_s) * 1e6 + device.launch_us
    return OpCost(op, shown, flops, nbytes, time_us, "compute" if compute_s >= memory_s else "memory")


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


class CostModel(Protocol):
    """What the searches need from a cost model (roofline or measured): a name for reports, the
    price of one op from its signature (the e-graph extractor has no nodes, only shapes), of a
    node, and of a whole graph."""

    @property
    def name(self) -> str: ...

    def op_time_us(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape],
                   out_shapes: Sequence[Shape], is_const: bool, dtype: str) -> float: ...

    def node_time_us(self, n: Node, dtype: str) -> float: ...

    def graph_time_us(self, graph: Graph) -> float: ...


class RooflineCost:
    """The roofline model for one device, with a per-node price cache."""

    def __init__(self, device: str | Device):
        self.device = get_device(device)
        self._cache: dict[tuple[Node, str], OpCost] = {}

    @property
    def name(self) -> str:
        return self.device.name

    def op_time_us(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape],
                   out_shapes: Sequence[Shape], is_const: bool, dtype: str = "bf16") -> float:
        return op_cost(op, attrs, in_shapes, out_shapes, is_const, self.device, dtype).time_us

    def node_cost(self, n: Node, dtype: str = "bf16") -> OpCost:
        key = (n, dtype)
        found = self._cache.get(key)
        if found is None:
            found = op_cost(n.op, n.attr_dict, node_in_shapes(n), n.shapes, n.is_const, self.device, dtype)
            found = OpCost(**{**found.__dict__, "node": n.digest[:12]})
            self._cache[key] = found
        return found

    def node_time_us(self, n: Node, dtype: str = "bf16") -> float:
        return self.node_cost(n, dtype).time_us

    def graph_time_us(self, graph: Graph) -> float:
        return sum(self.node_time_us(n, graph.dtype) for n in graph.nodes())

    def report(self, graph: Graph) -> CostReport:
        rows = tuple(self.node_cost(n, graph.dtype) for n in graph.nodes())
        return CostReport(graph.name, self.device.name, graph.dtype, sum(r.time_us for r in rows), rows)


def cost_model(device: str | Device | CostModel) -> CostModel:
    """A cost model: given, or the roofline model of a device name, profile file or Device."""
    if isinstance(device, (str, Device)):
        return RooflineCost(device)
    return device


def cost(graph: Graph, device: str | Device) -> CostReport:
    """Total cost and per-op breakdown of ``graph`` on ``device``."""
    return RooflineCost(device).report(graph)
