"""Evaluate graphs with the op table's NumPy reference implementations.

``evaluate(graph, values, domain)`` runs every node once (sharing is kept) in
float64, exact integers or integers mod p. ``random_leaves`` draws values for
every input and weight from a seeded generator, and ``allclose_graphs``
compares two graphs on the same random leaves: the numerical check every
rewrite and optimizer result goes through.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from eqsat.errors import DomainError, ShapeError
from eqsat.ir import folds
from eqsat.ir.domains import CHECK_PRIME, FLOAT, INT64_SAFE_TERMS, Domain, modp
from eqsat.ir.graph import Graph, Node, leaf_shapes, leaves_of
from eqsat.ir.valuenum import ValueTable, nbytes

PLAIN_MATMUL = (("act", "none"),)
"""A matmul node's attributes without a fused activation: folds' contractions share its results."""

Values = Mapping[str, np.ndarray]


def evaluate_nodes(graph: Graph, values: Values, domain: Domain = FLOAT,
                   fold_lazily: bool = False, release: bool = False,
                   table: ValueTable | None = None) -> dict[Node, Any]:
    """The value of every node of ``graph`` (tuples for multi-output nodes). With ``fold_lazily``,
    products of weights may be left as :class:`~eqsat.ir.folds.Product`\\ s for their consumers to
    associate (:mod:`eqsat.ir.folds`); :func:`evaluate` materializes the outputs. With ``release``
    only the outputs' values are kept: a value is dropped once its last consumer has run, so
    memory follows the graph's width, not its depth (a 32-layer BERT's check held every activation
    and weight at once). With a ``table`` an op on inputs equal to ones it already ran on returns
    that result (:mod:`eqsat.ir.valuenum`: the same values as running it again)."""
    out: dict[Node, Any] = {}
    weight_only: set[Node] = set()
    contract = folds.matmul_in(domain)
    if table is not None:
        contract = table.memoized("matmul", PLAIN_MATMUL, contract)
    order = graph.nodes() if not release else _live_order(graph)
    pending: dict[Node, int] = {}
    if release:
        for n in order:
            for x in set(n.inputs):
                pending[x] = pending.get(x, 0) + 1
        for o in graph.outputs:
            pending[o] = pending.get(o, 0) + 1  # never released
    held = 0  # bytes of the arrays in ``out``: the table keeps at most their peak so far
    for n in order:
        key = table.key(n.op, n.attrs, [out[x] for x in n.inputs]) if table is not None and n.inputs else None
        found = table.get(key) if key is not None else None
        if found is None:
            found = _value_of(n, out, values, domain, weight_only, contract if fold_lazily else None)
            if key is not None:
                table.put(key, found)
        elif all(x in weight_only for x in n.inputs):
            weight_only.add(n)
        out[n] = found
        held += nbytes(found)
        if release:
            for x in set(n.inputs):
                pending[x] -= 1
                if not pending[x]:
                    held -= nbytes(out.pop(x))
        if table is not None:
            table.budget = max(table.budget, held)
            table.shrink()
    return out


def _live_order(graph: Graph) -> list[Node]:
    """A topological order that keeps few values alive: computed nodes by the last weight they
    depend on (weights ranked as the graph first reads them), then by depth, so the two graphs of
    a check advance weight by weight together even where one is deeper per layer (a merged Q/K/V
    product split again) and an op of the optimized graph runs soon after the input graph's op it
    may share a value with (:mod:`eqsat.ir.valuenum`); each leaf and weight-only node just before
    its first consumer (so a weight is drawn when it is needed, not at the start)."""
    order = graph.nodes()
    last: dict[Node, int] = {}  # the rank of the last weight (or input) a node depends on
    depth: dict[Node, int] = {}
    for n in order:
        last[n] = max((last[x] for x in n.inputs), default=len(last))
        if not (n.is_leaf or n.is_const):
            depth[n] = 1 + max((depth[x] for x in n.inputs if x in depth), default=0)
    key = {n: (last[n], d) for n, d in depth.items()}
    top = (len(last) + 1, 0)
    for n in reversed(order):
        for x in n.inputs:
            if x not in key or x.is_leaf or x.is_const:
                key[x] = min(key.get(x, top), key.get(n, top))
    pos = {n: i for i, n in enumerate(order)}
    return sorted(order, key=lambda n: (key.get(n, top), not (n.is_leaf or n.is_const), pos[n]))


def _value_of(n: Node, out: dict[Node, Any], values: Values, domain: Domain, weight_only: set[Node],
              contract: folds.Contract | None) -> Any:
    """The value of ``n`` from its inputs' values in ``out`` (a leaf's from ``values``); with
    ``contract``, products of weights may stay deferred."""
    spec = n.spec
    attrs = n.attr_dict
    if n.is_leaf:
        name = attrs["name"]
        if name not in values:
            raise KeyError(f"no value given for {n.op} {name!r} of shape {n.shape}")
        arr = domain.asarray(values[name])
        if arr.shape != n.shape:
            raise ShapeError(f"value for {n.op} {name!r} has shape {arr.shape}, the graph expects {n.shape}")
        if n.op == "weight":
            weight_only.add(n)
        return arr
    if all(x in weight_only for x in n.inputs):
        weight_only.add(n)
    if contract is not None:
        xs = [out[x] for x in n.inputs]
        lazy = folds.defer(n.op, attrs, xs, n in weight_only) or folds.rewrite(n.op, attrs, xs, contract)
        if lazy is not None:
            return lazy
        for x in n.inputs:
            out[x] = folds.materialize(out[x], contract)
    if not spec.defined_in(attrs, domain):
        raise DomainError(f"{n.op} {dict((k, v) for k, v in attrs.items() if k == 'act')} "
                          f"has no exact form in the {domain.name} domain")
    result = spec.evaluate(attrs, [out[x] for x in n.inputs], domain)
    if isinstance(result, tuple):
        return tuple(domain.reduce(r) if not isinstance(r, tuple) else r for r in result)
    return domain.reduce(result)


def evaluate(graph: Graph, values: Values, domain: Domain = FLOAT,
             table: ValueTable | None = None) -> tuple[np.ndarray, ...]:
    """The values of the graph's outputs (products of weights are associated as their consumers
    make cheapest: :mod:`eqsat.ir.folds`; with a ``table``, equal values are computed on once)."""
    vals = evaluate_nodes(graph, values, domain, fold_lazily=True, release=True, table=table)
    return tuple(folds.materialize(vals[o], folds.matmul_in(domain)) for o in graph.outputs)


def fan_in(shape: tuple[int, ...]) -> int:
    """Inputs feeding one output of a weight: rows of a matrix, I*kh*kw of an OIHW kernel."""
    if len(shape) == 4:
        return shape[1] * shape[2] * shape[3]
    if len(shape) >= 2:
        return shape[-2]
    return 1


def random_leaves(graph: Graph, rng: np.random.Generator | int, domain: Domain = FLOAT) -> dict[str, np.ndarray]:
    """Random values for every input and weight of ``graph``, by name (sorted, so seeds are stable).

    In float64, inputs are uniform in [-1, 1] and weights are scaled by 1/sqrt(fan-in) so that
    deep graphs (8-layer BERT) stay far from overflow; the exact domains are not scaled. A weight
    in ``graph.fixed`` keeps its value in float64 (a random exponent or epsilon can make the input
    itself NaN); the exact domains draw it too, since a polynomial identity holds for every value,
    unless it is all 0 or all 1 (:func:`kept_exactly`).
    """
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    kinds = {n.attr("name"): n.op for n in graph.leaves()}
    shapes = leaf_shapes(graph)
    out = {}
    for name in sorted(shapes):
        if name in graph.fixed and (domain.name == "float" or kept_exactly(graph.fixed[name])):
            out[name] = domain.asarray(np.asarray(graph.fixed[name], dtype=np.float64))  # keeps its value
            continue
        value = domain.random(shapes[name], rng)
        if domain.name == "float" and kinds[name] == "weight":
            value *= 1.0 / np.sqrt(fan_in(shapes[name]))  # in place: VGG's weights are 1 GB in float64
        out[name] = value
    return out


def kept_exactly(value: Any) -> bool:
    """Whether a fixed weight keeps its value in the exact domains too: one that is all 0 or all 1
    (a zero bias, a unit scale) is what an identity rewrite (:mod:`eqsat.identities`) removes, and
    is exact in every ring; other fixed values are drawn there."""
    arr = np.asarray(value)
    return bool(arr.size) and (bool(np.all(arr == 0)) or bool(np.all(arr == 1)))


WEIGHT_SLOT_OPS = frozenset({"matmul", "conv2d"})
"""Ops whose constant operands are weights proper: any values exercise a rewrite of them."""


def attribute_weights(graph: Graph) -> frozenset[str]:
    """Names of the weights that act as attributes: every weight leaf except those a
    :data:`WEIGHT_SLOT_OPS` op reads, directly or through weight-only ops (a transposed or
    concatenated kernel). Exponents, masks, epsilons, scales, shift vectors and embedding tables
    keep their values in a numerical check; only a product's weights may be redrawn."""
    redrawable: set[str] = set()
    for n in graph.nodes():
        if n.op in WEIGHT_SLOT_OPS:
            consts = [x for x in n.inputs if x.is_const]
            redrawable |= {leaf.attr("name") for leaf in leaves_of(consts) if leaf.op == "weight"}
    return frozenset(w.attr("name") for w in graph.leaves("weight")) - redrawable


class LazyLeaves(Mapping[str, np.ndarray]):
    """Random values for the leaves of ``graph`` (as :func:`random_leaves` draws them), each drawn
    when it is read from its own seed ``(seed, trial, name)``: with a releasing evaluation a check
    holds only the weights still to be read, not every weight of a deep model at once. A weight in
    ``graph.fixed`` keeps its value in float64, as in :func:`random_leaves`."""

    def __init__(self, graph: Graph, seed: int, trial: int, domain: Domain = FLOAT):
        self.shapes = leaf_shapes(graph)
        self.fixed = graph.fixed if domain.name == "float" else {
            k: v for k, v in graph.fixed.items() if kept_exactly(v)}
        self.kinds = {n.attr("name"): n.op for n in graph.leaves()}
        self.seed, self.trial, self.domain = seed, trial, domain

    def __contains__(self, name: object) -> bool:
        return name in self.shapes  # Mapping's own would draw the value to answer

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.fixed:  # an attribute-like constant keeps its value
            return self.domain.asarray(np.asarray(self.fixed[name], dtype=np.float64))
        shape = self.shapes[name]
        rng = np.random.default_rng([self.seed, self.trial, zlib.crc32(name.encode())])
        value = self.domain.random(shape, rng)
        if self.domain.name == "float" and self.kinds[name] == "weight":
            value *= 1.0 / np.sqrt(fan_in(shape))
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)


@dataclass(frozen=True)
class Comparison:
    """Result of comparing two graphs numerically: worst relative error over all outputs and trials
    (``method`` is ``float64``, ``mod p`` for exact tests of polynomial graphs, or ``identical``)."""

    equal: bool
    max_rel_error: float
    trials: int
    detail: str = ""
    method: str = "float64"


def contraction_terms(graph: Graph) -> int:
    """The longest sum of products any op computes (each op-table row's ``terms``: matmul k, conv
    C/g*kh*kw, pool window)."""
    longest = 1
    for n in graph.nodes():
        if n.spec.terms is not None:
            longest = max(longest, n.spec.terms(n.attr_dict, [x.shapes[0] for x in n.inputs]))
    return longest


def exact_domain_for(*graphs: Graph) -> Domain | None:
    """The fast GF(p) domain (p = :data:`~eqsat.ir.domains.CHECK_PRIME`) when every op of the graphs is a
    polynomial and int64 sums cannot overflow."""
    domain = modp(CHECK_PRIME)
    for g in graphs:
        if any(not n.is_leaf and not n.spec.defined_in(n.attr_dict, domain) for n in g.nodes()):
            return None
        if contraction_terms(g) >= INT64_SAFE_TERMS:
            return None
    return domain


def compare_graphs(a: Graph, b: Graph, *, trials: int = 2, seed: int = 0, rtol: float = 1e-6,
                   exact: bool = True) -> Comparison:
    """Evaluate both graphs on the same random leaves and compare every output.

    Polynomial graphs (no relu, max or sigmoid) are compared exactly in GF(p), p = 1,048,573
    (Schwartz-Zippel: a wrong rewrite of degree d survives a trial with probability <= d/p per
    output entry; below 2^20 so a matmul is one exact float64 BLAS product), which
    deep products such as an 8-layer attention stack need: in float64 they overflow. Other graphs
    are compared in float64, where the error of an output is ``max|x - y| / max(1, max|x|)`` and
    must be at most ``rtol``.
    """
    if a.outputs == b.outputs:  # nodes are structural: the same outputs are the same computation
        return Comparison(True, 0.0, 0, "the same graph: nothing to evaluate", "identical")
    domain = exact_domain_for(a, b) if exact else None
    if domain is not None:
        return _compare_exact(a, b, domain, trials, seed)
    if len(a.outputs) != len(b.outputs):
        return Comparison(False, float("inf"), 0, f"{len(a.outputs)} outputs vs {len(b.outputs)}")
    for i, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        if x.shape != y.shape:
            return Comparison(False, float("inf"), 0, f"output {i}: shape {x.shape} vs {y.shape}")
    missing = set(leaf_shapes(b)) - set(leaf_shapes(a))
    if missing:
        return Comparison(False, float("inf"), 0, f"second graph reads leaves the first lacks: {sorted(missing)}")
    worst = 0.0
    for trial in range(trials):
        values = LazyLeaves(a, seed, trial)
        for i, (x, y) in enumerate(_evaluate_both(a, b, values)):
            scale = max(1.0, float(np.max(np.abs(x))) if x.size else 1.0)
            err = float(np.max(np.abs(x - y))) / scale if x.size else 0.0
            if not np.isfinite(err):
                err = float("inf")
            worst = max(worst, err)
            if err > rtol:
                return Comparison(False, worst, trials, f"output {i} differs (relative error {err:.3g})")
    return Comparison(True, worst, trials)


def _evaluate_both(a: Graph, b: Graph, values: Values, domain: Domain = FLOAT) -> list[tuple[Any, Any]]:
    """Both graphs' outputs, pairwise, from one evaluation: nodes are structural, so the parts an
    optimized graph shares with its input (unchanged layers, weight-only subgraphs) run once, and
    values are numbered (:mod:`eqsat.ir.valuenum`), so past a rewrite an op whose inputs equal the
    input graph's returns the input graph's result instead of computing it again."""
    outs = evaluate(Graph(tuple(a.outputs) + tuple(b.outputs)), values, domain, ValueTable())
    return list(zip(outs[:len(a.outputs)], outs[len(a.outputs):]))


def _compare_exact(a: Graph, b: Graph, domain: Domain, trials: int, seed: int) -> Comparison:
    method = f"mod {domain.modulus}"
    if len(a.outputs) != len(b.outputs) or any(x.shape != y.shape for x, y in zip(a.outputs, b.outputs)):
        return Comparison(False, float("inf"), 0, "outputs differ in number or shape", method)
    for trial in range(trials):
        values = LazyLeaves(a, seed, trial, domain)
        extra = set(leaf_shapes(b)) - set(values)
        if extra:
            detail = f"second graph reads leaves the first lacks: {sorted(extra)}"
            return Comparison(False, float("inf"), 0, detail, method)
        for i, (x, y) in enumerate(_evaluate_both(a, b, values, domain)):
            if not np.array_equal(x, y):
                return Comparison(False, float("inf"), trials, f"output {i} differs mod {domain.modulus}", method)
    return Comparison(True, 0.0, trials, "", method)


def assert_equivalent(a: Graph, b: Graph, **kwargs: Any) -> Comparison:
    """:func:`compare_graphs`, raising ``AssertionError`` with the detail when they differ."""
    result = compare_graphs(a, b, **kwargs)
    if not result.equal:
        raise AssertionError(f"graphs differ: {result.detail}")
    return result
