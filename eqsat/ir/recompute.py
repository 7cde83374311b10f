"""Recomputation: a fused node whose inner result the graph also computes on its own.

SiLU is ``x * sigmoid(x)``: when ``x`` is a conv's output, fusing the sigmoid into the conv
(``conv2d :act sigmoid``) leaves the plain conv in the graph for the ``Mul``, so the conv runs twice.
A roofline prices that copy like the sigmoid kernel it replaces (a memory-bound depthwise conv
moves the same bytes: 5.438 µs each on h100 for 96x112x112), so an extractor may take it at a tie,
but it is the whole conv's work again: EfficientNet-B0 written that way ran 0.56-0.64x in
onnxruntime. :func:`without_recomputation` undoes such fusions (the activation reads the plain
node again), which never adds work and removes the duplicate's FLOPs.
"""
from __future__ import annotations

from dataclasses import dataclass

from eqsat.ir.graph import Graph, Node, node, rebuild


def node_flops(n: Node) -> int:
    """Arithmetic of one computed node (leaves, views and weight-only nodes, folded, do none)."""
    if n.is_leaf or n.is_const or n.spec.is_view:
        return 0
    ins = n.inputs[0].shapes if n.spec.takes_tuple else tuple(x.shapes[0] for x in n.inputs)
    return int(n.spec.flops(n.attr_dict, ins, n.shapes))


def graph_flops(graph: Graph) -> int:
    """Arithmetic of the graph as it runs: every computed node once."""
    return sum(map(node_flops, graph.nodes()))


@dataclass(frozen=True)
class Recomputation:
    """``fused`` is ``plain`` with an activation fused in; both are in the graph."""

    fused: Node
    plain: Node


def _plain_key(n: Node) -> tuple:
    return n.op, n.inputs, tuple((k, v) for k, v in n.attrs if k != "act")


def recomputations(graph: Graph) -> list[Recomputation]:
    """Every fused node of ``graph`` whose unfused form the graph computes too."""
    nodes = [n for n in graph.nodes() if not n.is_leaf and not n.is_const and "act" in n.attr_dict]
    plain = {_plain_key(n): n for n in nodes if n.attr("act") == "none"}
    return [Recomputation(n, plain[_plain_key(n)]) for n in nodes
            if n.attr("act") != "none" and _plain_key(n) in plain]


def without_recomputation(graph: Graph) -> Graph:
    """``graph`` with each recomputing fusion replaced by its activation applied to the plain node."""
    found = recomputations(graph)
    if not found:
        return graph
    mapping: dict[Node, Node] = {r.fused: node(r.fused.attr("act"), r.plain) for r in found}
    for n in graph.nodes():
        if n not in mapping and n.inputs and any(x in mapping for x in n.inputs):
            mapping[n] = rebuild(n, tuple(mapping.get(x, x) for x in n.inputs))
    return graph.with_outputs(mapping.get(o, o) for o in graph.outputs)
