"""The roofline cost model (the interface itself is :mod:`eqsat.cost.costmodel`; a device name
becomes a cost model in :mod:`eqsat.cost.registry`).

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

import math
from collections.abc import Mapping, Sequence
from typing import Any

from eqsat.cost.costmodel import CostModel, CostReport, OpCost, node_in_shapes
from eqsat.cost.devices import Device, get_device
from eqsat.ir.graph import Graph, Node
from eqsat.ir.ops import Shape, get_op

__all__ = ["CostModel", "CostReport", "OpCost", "RooflineCost", "cost", "node_in_shapes", "op_cost"]

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int8": 1}


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise KeyError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})") from None


def _g(n: int) -> str:
    """``n`` as ``1.23e+45``, also past a float's range."""
    return f"{n:.3g}" if n < 1e300 else f"~1e+{len(str(n)) - 1}"


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
    try:
        compute_s, memory_s = flops / device.peak_flops, nbytes / device.bandwidth
        time_us = max(compute_s, memory_s) * 1e6 + device.launch_us
    except OverflowError:
        time_us = math.inf
    if not math.isfinite(time_us):
        raise ValueError(f"{op} {shown} on device {device.name!r}: its time overflows ({_g(flops)} FLOPs, "
                         f"{_g(nbytes)} bytes at {device.peak_flops:.3g} FLOP/s, {device.bandwidth:.3g} B/s)")
    return OpCost(op, shown, flops, nbytes, time_us, "compute" if compute_s >= memory_s else "memory")


class RooflineCost:
    """The roofline model for one device, with a per-node price cache."""

    def __init__(self, device: str | Device):
        self.device = get_device(device)
        self._cache: dict[tuple[Node, str], OpCost] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its price cache, which the other process fills as it prices (a merge
        judge sent to the saturation worker: NASNet-A's cache was 88 KB of its job's 309 KB)."""
        return {**self.__dict__, "_cache": {}}

    # A formula tells every difference apart, but it is a model of a device, not the device: a gain
    # under 1% is inside its error, and taking one rewrites the whole file for nothing a runtime
    # shows (measured in docs/results/zoo: a tiny priced gain on GPT-2 wrote a slower file)
    resolution = 0.01

    @property
    def name(self) -> str:
        return self.device.name

    def op_cost(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape], out_shapes: Sequence[Shape],
                is_const: bool, dtype: str = "bf16") -> OpCost:
        """One op's price; a model that prices some ops otherwise (a tuned device) overrides this."""
        return op_cost(op, attrs, in_shapes, out_shapes, is_const, self.device, dtype)

    def op_time_us(self, op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape],
                   out_shapes: Sequence[Shape], is_const: bool, dtype: str = "bf16",
                   const_inputs: Sequence[bool] | None = None) -> float:
        """``const_inputs`` (which inputs are weights) does not change a roofline price."""
        return self.op_cost(op, attrs, in_shapes, out_shapes, is_const, dtype).time_us

    def node_cost(self, n: Node, dtype: str = "bf16") -> OpCost:
        key = (n, dtype)
        found = self._cache.get(key)
        if found is None:
            found = self.op_cost(n.op, n.attr_dict, node_in_shapes(n), n.shapes, n.is_const, dtype)
            found = OpCost(**{**found.__dict__, "node": n.digest[:12]})
            self._cache[key] = found
        return found

    def node_time_us(self, n: Node, dtype: str = "bf16") -> float:
        return self.node_cost(n, dtype).time_us

    def end_to_end_us(self, a: Graph, b: Graph) -> None:
        """A formula runs no graphs."""
        return None

    def latency_us(self, graph: Graph) -> None:
        """The roofline models kernels, not a runtime: no end-to-end latency."""
        return None

    def calibrate(self, graph: Graph) -> None:
        """A formula has nothing to fit."""
        return None

    def choose_layout(self, graph: Graph) -> None:
        """A formula runs no graphs."""
        return None

    def timing_s(self) -> dict[str, float]:
        """A formula runs nothing."""
        return {}

    def provenance(self) -> str:
        d = self.device
        return f"roofline of {d.name}: {d.peak_flops:.3g} FLOP/s, {d.bandwidth:.3g} B/s, {d.launch_us:g} µs a launch"

    def graph_time_us(self, graph: Graph) -> float:
        return sum(self.node_time_us(n, graph.dtype) for n in graph.nodes())

    def report(self, graph: Graph) -> CostReport:
        rows = tuple(self.node_cost(n, graph.dtype) for n in graph.nodes())
        return CostReport(graph.name, self.name, graph.dtype, sum(r.time_us for r in rows), rows)


def cost(graph: Graph, device: str | Device) -> CostReport:
    """Total cost and per-op breakdown of ``graph`` on a roofline ``device``."""
    return RooflineCost(device).report(graph)
