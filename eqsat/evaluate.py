"""Evaluate graphs with the op table's NumPy reference implementations.

``evaluate(graph, values, domain)`` runs every node once (sharing is kept) in
float64, exact integers or integers mod p. ``random_leaves`` draws values for
every input and weight from a seeded generator, and ``allclose_graphs``
compares two graphs on the same random leaves: the numerical check every
rewrite and optimizer result goes through.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .domains import FLOAT, Domain
from .errors import DomainError, ShapeError
from .graph import Graph, Node, leaf_shapes

Values = Mapping[str, np.ndarray]


def evaluate_nodes(graph: Graph, values: Values, domain: Domain = FLOAT) -> dict[Node, Any]:
    """The value of every node of ``graph`` (tuples for multi-output nodes)."""
    out: dict[Node, Any] = {}
    for n in graph.nodes():
        spec = n.spec
        attrs = n.attr_dict
        if n.is_leaf:
            name = attrs["name"]
            if name not in values:
                raise KeyError(f"no value given for {n.op} {name!r} of shape {n.shape}")
            arr = domain.asarray(values[name])
            if arr.shape != n.shape:
                raise ShapeError(f"value for {n.op} {name!r} has shape {arr.shape}, the graph expects {n.shape}")
            out[n] = arr
            continue
        if not spec.defined_in(attrs, domain):
            raise DomainError(f"{n.op} {dict((k, v) for k, v in attrs.items() if k == 'act')} "
                              f"has no exact form in the {domain.name} domain")
        result = spec.evaluate(attrs, [out[x] for x in n.inputs], domain)
        if isinstance(result, tuple):
            result = tuple(domain.reduce(r) if not isinstance(r, tuple) else r for r in result)
        else:
            result = domain.reduce(result)
        out[n] = result
    return out


def evaluate(graph: Graph, values: Values, domain: Domain = FLOAT) -> tuple[np.ndarray, ...]:
    """The values of the graph's outputs."""
    vals = evaluate_nodes(graph, values, domain)
    return tuple(vals[o] for o in graph.outputs)


def random_leaves(graph: Graph, rng: np.random.Generator | int, domain: Domain = FLOAT) -> dict[str, np.ndarray]:
    """Random values for every input and weight of ``graph``, by name (sorted, so seeds are stable)."""
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    shapes = leaf_shapes(graph)
    return {name: domain.random(shapes[name], rng) for name in sorted(shapes)}


@dataclass(frozen=True)
class Comparison:
    """Result of comparing two graphs numerically: worst relative error over all outputs and trials."""

    equal: bool
    max_rel_error: float
    trials: int
    detail: str = ""


def compare_graphs(a: Graph, b: Graph, *, trials: int = 2, seed: int = 0, rtol: float = 1e-6) -> Comparison:
    """Evaluate both graphs in float64 on the same random leaves and compare every output.

    The error of an output is ``max|x - y| / max(1, max|x|)``; the graphs are equal
    when it is at most ``rtol`` on every output in every trial.
    """
    if len(a.outputs) != len(b.outputs):
        return Comparison(False, float("inf"), 0, f"{len(a.outputs)} outputs vs {len(b.outputs)}")
    for i, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        if x.shape != y.shape:
            return Comparison(False, float("inf"), 0, f"output {i}: shape {x.shape} vs {y.shape}")
    missing = set(leaf_shapes(b)) - set(leaf_shapes(a))
    if missing:
        return Comparison(False, float("inf"), 0, f"second graph reads leaves the first lacks: {sorted(missing)}")
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(trials):
        values = random_leaves(a, rng)
        for i, (x, y) in enumerate(zip(evaluate(a, values), evaluate(b, values))):
            scale = max(1.0, float(np.max(np.abs(x))) if x.size else 1.0)
            err = float(np.max(np.abs(x - y))) / scale if x.size else 0.0
            if not np.isfinite(err):
                err = float("inf")
            worst = max(worst, err)
            if err > rtol:
                return Comparison(False, worst, trials, f"output {i} differs (relative error {err:.3g})")
    return Comparison(True, worst, trials)


def assert_equivalent(a: Graph, b: Graph, **kwargs: Any) -> Comparison:
    """:func:`compare_graphs`, raising ``AssertionError`` with the detail when they differ."""
    result = compare_graphs(a, b, **kwargs)
    if not result.equal:
        raise AssertionError(f"graphs differ: {result.detail}")
    return result
