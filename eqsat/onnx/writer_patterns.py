"""Patterns of the IR that the writer writes back as the exporter wrote them, found once per graph
before any node is written: a product and its bias as one Gemm, the parts of a split the graph
reads, and an N-D activation times a 2-D weight as one MatMul."""
from __future__ import annotations

from eqsat.ir.graph import Graph, Node


def gemm_pairs(graph: Graph) -> dict[Node, Node]:
    """Bias adds (``chadd`` on the columns of a 2-D product) whose input is a plain ``matmul`` read
    by nothing else: each pair is written as one ONNX Gemm, as the importer read it."""
    users = graph.users()
    pairs = {}
    for n in graph.nodes():
        if n.op == "chadd" and len(n.shape) == 2 and n.attr("axis") == 1:
            mm = n.inputs[0]
            if (mm.op == "matmul" and len(mm.shape) == 2 and mm.attr("act") == "none" and not mm.is_const
                    and len(users[mm]) == 1 and mm not in graph.outputs):
                pairs[n] = mm
    return pairs


def parts_read(graph: Graph) -> dict[Node, set[int]]:
    """Per split node, the indices of the parts the graph reads (through its ``proj`` nodes)."""
    read: dict[Node, set[int]] = {}
    for n in graph.nodes():
        if n.op == "proj" and n.inputs[0].op == "split":
            read.setdefault(n.inputs[0], set()).add(n.attr("index"))
    return read


def batched_products(graph: Graph) -> tuple[dict[Node, Node], set[Node]]:
    """``reshape(matmul(reshape(x, (rows, k)), w), lead + (n,))`` with ``x`` of shape ``lead +
    (k,)``: how the importer reads an N-D activation times a 2-D weight (every ``nn.Linear`` on a
    batch). Written back as that one N-D MatMul of ``x``, as the exporter wrote it: the same GEMM
    in onnxruntime, without two Reshapes per product. Returns the reshapes back -> their products,
    and the product and flattening reshape each one replaces (read by nothing else)."""
    users = graph.users()
    outputs = set(graph.outputs)
    products: dict[Node, Node] = {}
    folded: set[Node] = set()
    for n in graph.nodes():
        if n.op != "reshape" or n.inputs[0].op != "matmul":
            continue
        mm = n.inputs[0]
        flat = mm.inputs[0]
        if flat.op != "reshape" or mm.attr("act") != "none" or mm.is_const or len(mm.shape) != 2:
            continue
        x = flat.inputs[0]
        if len(x.shape) < 2 or x.shape[-1] != flat.shape[1] or n.shape != x.shape[:-1] + (mm.shape[1],):
            continue
        if any(len(users[v]) != 1 or v in outputs for v in (mm, flat)):
            continue
        products[n] = mm
        folded |= {mm, flat}
    return products, folded
