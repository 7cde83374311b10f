"""Identities with a constant 0 or 1: ``x + 0``, ``x - 0``, ``x * 1`` and ``x / 1`` removed, where
the 0 (or 1) is a weight whose every value is 0 (or 1), as a graph-level rewrite both searches apply.

Random initialization leaves such weights in exported models (a linear layer's zero bias, a norm's
unit scale, often one initializer shared by many adds); onnxsim and onnxoptimizer delete them. No
rule file can state this rewrite: it holds for those values only. So it is a
:class:`~eqsat.graph_rewrite.GraphRewrite` bound to the search's input graph, and it reads a weight's
value only where the graph keeps that value in every numerical check (:attr:`Graph.fixed`, set by
the ONNX importer for weights that act as attributes): the search's result is then checked, on
the real zeros and ones, by :func:`eqsat.search.run_verified` like any other. (The exact GF(p)
check keeps a fixed weight that is all 0 or all 1 too: see :func:`eqsat.ir.evaluate.kept_exactly`.)
The add or product is offered as its other operand; the search prices both and keeps the cheaper.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from eqsat.graph_rewrite import Alternative, GraphRewrite, nothing
from eqsat.ir.graph import Graph, Node, leaves_of
from eqsat.ir.ops import numel

UNITS: dict[str, float] = {"ewadd": 0.0, "chadd": 0.0, "sadd": 0.0, "ewmul": 1.0, "chmul": 1.0, "smul": 1.0}
"""Op -> the constant operand that makes it the identity on its other operand (the importers write
Sub of a constant as an add of its negation, Div as a product with its reciprocal)."""
MAX_ELEMENTS = 1 << 22  # a constant operand larger than this is not evaluated to look for zeros


def constant_value(c: Node, fixed: Mapping[str, Any], memo: dict[Node, np.ndarray | None]) -> np.ndarray | None:
    """The value of the weight-only node ``c`` when every weight it reads keeps its value in checks
    (``fixed``) and it has at most :data:`MAX_ELEMENTS` elements, else None."""
    if c in memo:
        return memo[c]
    from eqsat.ir.evaluate import evaluate

    value = None
    leaves = leaves_of([c])
    if (c.is_const and len(c.shapes) == 1 and numel(c.shape) <= MAX_ELEMENTS
            and all(leaf.op == "weight" and leaf.attr("name") in fixed for leaf in leaves)):
        value = evaluate(Graph((c,)), {leaf.attr("name"): fixed[leaf.attr("name")] for leaf in leaves})[0]
    memo[c] = value
    return value


def identity_at(n: Node, fixed: Mapping[str, Any], memo: dict[Node, np.ndarray | None]) -> tuple[Alternative, ...]:
    """``n``'s other operand as its alternative when ``n`` adds an all-zero constant or multiplies
    by an all-one constant (and the result has that operand's shape), else nothing."""
    unit = UNITS.get(n.op)
    if unit is None or len(n.inputs) != 2 or n.is_const:
        return ()
    slots = (1, 0) if n.op.startswith("ew") else (1,)  # ewadd and ewmul commute; the vector and scalar forms do not
    for k in slots:
        c, x = n.inputs[k], n.inputs[1 - k]
        if not c.is_const or x.shapes != n.shapes:
            continue
        value = constant_value(c, fixed, memo)
        if value is not None and value.size and bool(np.all(value == unit)):
            names = tuple(sorted({leaf.attr("name") for leaf in leaves_of([c])}))
            kind = "add-zero" if unit == 0.0 else "mul-one"
            return (Alternative(n, x, f"identity:{kind}", (("constant", ", ".join(names)),)),)
    return ()


def bind_identities(graph: Graph) -> Callable[[Node], Sequence[Alternative]]:
    """The identities of ``graph``'s fixed weights: ``at(node)``, memoized per node."""
    fixed = graph.fixed
    if not fixed:
        return nothing
    values: dict[Node, np.ndarray | None] = {}
    found: dict[Node, tuple[Alternative, ...]] = {}

    def at(n: Node) -> tuple[Alternative, ...]:
        if n not in found:
            found[n] = identity_at(n, fixed, values)
        return found[n]

    return at


IDENTITIES = GraphRewrite("identities", nothing, bind_identities)
"""The rewrite both searches apply by default (their limits' ``graph_rewrites``)."""
