"""Extraction by any cost model, written here (not egglog's extractors).

The e-graph is read from ``EGraph.freeze()``: every constructor row is an
e-node (its e-class, op, attributes and child e-classes), the ``dim``/``rank``
rows give each e-class's shape and the ``const`` rows its weight-only flag. An
e-node is priced by the cost model's ``op_time_us`` from its children's shapes; one
whose children are all weight-only is free (folded).

Two extractors: a DAG-aware greedy one (each e-class keeps the cheapest node
by the cost of the *set* of e-classes below it, so shared subgraphs count
once) and an exact ILP (``scipy.optimize.milp``/HiGHS, one binary per e-node,
costs in µs) that forbids cycles by lazy cuts found with networkx, starts from
the greedy cost as an upper bound and reports its optimality gap.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cost import CostModel
from ..graph import Graph, Node, node
from .language import Language


@dataclass(frozen=True)
class ENode:
    eclass: Any
    op: str
    attrs: tuple
    children: tuple
    sizes: tuple[int, ...] = ()
    leaf: str = ""


@dataclass
class EGraphView:
    """The frozen e-graph as plain data."""

    classes: dict[Any, list[int]] = field(default_factory=dict)
    nodes: list[ENode] = field(default_factory=list)
    shapes: dict[Any, tuple[int, ...]] = field(default_factory=dict)
    const: set = field(default_factory=set)
    lets: dict[str, Any] = field(default_factory=dict)


def read_egraph(egraph: Any, lang: Language) -> EGraphView:
    """The frozen e-graph as plain data (e-classes numbered 0, 1, ...; picklable)."""
    frozen = egraph.freeze()
    view = EGraphView()
    ids: dict[Any, int] = {}
    cls = lambda v: ids.setdefault(v, len(ids))  # noqa: E731
    dims: dict[int, dict[int, int]] = {}
    for name, fn in frozen.functions.items():
        if fn.is_let_binding:
            view.lets[name] = cls(fn.rows[0].output)
        elif name == "dim":
            for r in fn.rows:
                dims.setdefault(cls(r.inputs[0]), {})[egraph.value_to_i64(r.inputs[1])] = egraph.value_to_i64(r.output)
        elif name == "const":
            view.const.update(cls(r.inputs[0]) for r in fn.rows)
        elif name == "leaf":
            for r in fn.rows:
                view.nodes.append(ENode(cls(r.output), "leaf", (), (), (), egraph.value_to_string(r.inputs[0])))
        elif name in lang.ctors:
            c = lang.ctors[name]
            for r in fn.rows:
                if r.subsumed:
                    continue
                kids = tuple(cls(v) for v in r.inputs[:c.arity])
                sizes = tuple(egraph.value_to_i64(v) for v in r.inputs[c.arity:])
                view.nodes.append(ENode(cls(r.output), c.op, c.attrs, kids, sizes))
    for i, n in enumerate(view.nodes):
        view.classes.setdefault(n.eclass, []).append(i)
    for cls in view.classes:
        d = dims.get(cls, {})  # a rank-0 class has no dim rows
        view.shapes[cls] = tuple(d[k] for k in sorted(d))
    return view


def node_costs(view: EGraphView, model: CostModel, dtype: str) -> list[float]:
    """The cost model's price (µs) of every e-node; folded when all its children are weight-only."""
    costs = []
    for n in view.nodes:
        if n.op in ("leaf", "splitproj"):
            costs.append(0.0)
            continue
        ins = tuple(view.shapes[c] for c in n.children)
        const = all(c in view.const for c in n.children)
        costs.append(model.op_time_us(n.op, dict(n.attrs), ins, (view.shapes[n.eclass],), const, dtype))
    return costs


# --------------------------------------------------------------------------- greedy (DAG-aware)
def greedy_dag(view: EGraphView, costs: list[float], roots: list[Any]) -> dict[Any, int]:
    """Per e-class, the node whose sub-DAG (a set of e-classes, shared ones once) is cheapest."""
    best: dict[Any, tuple[float, int, dict[Any, float]]] = {}
    parents: dict[Any, list[int]] = {}
    for i, n in enumerate(view.nodes):
        for c in n.children:
            parents.setdefault(c, []).append(i)
    pending = [i for i, n in enumerate(view.nodes) if not n.children]
    queued = set(pending)
    while pending:
        i = pending.pop()
        queued.discard(i)
        n = view.nodes[i]
        if any(c not in best for c in n.children):
            continue
        merged: dict[Any, float] = {}
        for c in n.children:
            merged.update(best[c][2])
        if n.eclass in merged:
            continue  # would make a cycle
        merged[n.eclass] = costs[i]
        total = sum(merged.values())
        old = best.get(n.eclass)
        if old is None or total < old[0] - 1e-9:
            best[n.eclass] = (total, i, merged)
            for p in parents.get(n.eclass, ()):
                if p not in queued:
                    queued.add(p)
                    pending.append(p)
    missing = [r for r in roots if r not in best]
    if missing:
        raise RuntimeError(f"greedy extraction found no acyclic term for {len(missing)} root e-class(es)")
    return {c: v[1] for c, v in best.items()}


def selection_cost(view: EGraphView, costs: list[float], choice: dict[Any, int], roots: list[Any]) -> float:
    """Cost of the DAG a choice induces from the roots (each reachable e-class once)."""
    seen: set = set()
    stack = list(roots)
    total = 0.0
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        i = choice[c]
        total += costs[i]
        stack.extend(view.nodes[i].children)
    return total


# --------------------------------------------------------------------------- ILP
TIE_BREAK_US = 1e-6  # added to every node's cost: among equal-cost choices, prefer fewer nodes


@dataclass
class ILPResult:
    choice: dict[Any, int]
    cost: float
    gap: float
    status: str
    cuts: int
    seconds: float


def filter_cycles(view: EGraphView, keep: dict[Any, int], roots: list[Any], costs: list[float]) -> set[int]:
    """Remove e-nodes until the e-class graph below the roots is acyclic (TENSAT's cycle filter).

    ``keep`` (an acyclic choice such as the greedy one) stays: on every cycle some edge is not
    realized by a kept node; of those edges, the one whose cheapest realizing node costs most
    is cut (its nodes removed), so cheap views such as a split projection survive.
    """
    removed: set[int] = set()
    import networkx as nx  # imported where used: the saturation process reads e-graphs, never extracts

    g = nx.DiGraph()
    edge_nodes: dict[tuple[Any, Any], list[int]] = {}
    for c in _reachable(view, roots, removed):
        for i in view.classes[c]:
            for d in view.nodes[i].children:
                if d not in view.const:
                    g.add_edge(c, d)
                    edge_nodes.setdefault((c, d), []).append(i)
    # cycles live inside strongly connected components: cut them one component at a time, so each
    # search is local instead of over the whole e-class graph
    work = [comp for comp in nx.strongly_connected_components(g) if _cyclic(g, comp)]
    while work:
        comp = work.pop()
        try:
            cycle = nx.find_cycle(g.subgraph(comp))
        except nx.NetworkXNoCycle:
            continue
        options = [(c, d) for c, d in cycle if keep.get(c) not in edge_nodes[(c, d)]]
        if not options:  # cannot happen when ``keep`` is acyclic
            raise RuntimeError("cycle filter: every edge of a cycle is used by the kept choice")
        c, d = max(options, key=lambda e: min(costs[i] for i in edge_nodes[e]))
        removed.update(edge_nodes[(c, d)])
        g.remove_edge(c, d)
        sub = g.subgraph(comp)
        work.extend(part for part in nx.strongly_connected_components(sub) if _cyclic(sub, part))
    return removed


def _cyclic(g: Any, comp: set) -> bool:
    return len(comp) > 1 or any(g.has_edge(n, n) for n in comp)


def _reachable(view: EGraphView, roots: list[Any], removed: set[int]) -> set:
    reach: set = set()
    stack = [r for r in roots if r not in view.const]
    while stack:
        c = stack.pop()
        if c in reach:
            continue
        reach.add(c)
        for i in view.classes[c]:
            if i not in removed:
                stack.extend(d for d in view.nodes[i].children if d not in view.const)
    return reach


def ilp_extract(view: EGraphView, costs: list[float], roots: list[Any], constants: dict[Any, int],
                upper: float | None = None, time_limit: float = 60.0,
                removed: set[int] | None = None) -> ILPResult | None:
    """Exact extraction (minimal total cost, shared e-classes once), acyclic by lazy cycle cuts.

    Weight-only e-classes cost nothing whichever node computes them (they fold), so they are not
    variables: they take their node from ``constants`` (an acyclic choice, e.g. the greedy one).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    start = time.perf_counter()
    removed = removed or set()
    reach = _reachable(view, roots, removed)
    # a node reading its own e-class can never be part of an acyclic choice
    idx = [i for c in reach for i in view.classes[c] if c not in view.nodes[i].children and i not in removed]
    col = {i: k for k, i in enumerate(idx)}
    rows: list[tuple[dict[int, float], float, float]] = []
    for r in roots:  # every root e-class picks a node
        if r in reach:
            rows.append(({col[i]: 1.0 for i in view.classes[r] if i in col}, 1.0, np.inf))
    for i in idx:  # a picked node needs a picked node in each (non-constant) child e-class
        for c in set(view.nodes[i].children) - view.const:
            coefs = {col[j]: 1.0 for j in view.classes[c] if j in col}
            coefs[col[i]] = coefs.get(col[i], 0.0) - 1.0
            rows.append((coefs, 0.0, np.inf))
    c_vec = np.array([costs[i] for i in idx]) + TIE_BREAK_US
    if upper is not None:
        rows.append(({k: float(c_vec[k]) for k in range(len(idx))}, -np.inf, upper + 1e-3 + 1e-6 * len(idx)))
    cuts = 0
    while True:
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0:
            return None
        r_idx, c_idx, vals = [], [], []
        lo, hi = np.empty(len(rows)), np.empty(len(rows))
        for k, (coefs, lb, ub) in enumerate(rows):
            r_idx.extend([k] * len(coefs))
            c_idx.extend(coefs)
            vals.extend(coefs.values())
            lo[k], hi[k] = lb, ub
        a = coo_matrix((vals, (r_idx, c_idx)), shape=(len(rows), len(idx)))
        res = milp(c_vec, constraints=LinearConstraint(a.tocsr(), lo, hi), integrality=np.ones(len(idx)),
                   bounds=Bounds(0, 1), options={"time_limit": remaining, "disp": False})
        if res.x is None:
            return None
        picked = [idx[k] for k in range(len(idx)) if res.x[k] > 0.5]
        choice: dict[Any, int] = {c: i for c, i in constants.items() if c in view.const}
        for i in sorted(picked, key=lambda i: costs[i]):
            choice.setdefault(view.nodes[i].eclass, i)
        cycles = _find_cycles(view, choice, roots)
        if not cycles:
            gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
            status = "optimal" if res.status == 0 else f"status {res.status}: {res.message}"
            return ILPResult(choice, selection_cost(view, costs, choice, roots), gap, status, cuts,
                             time.perf_counter() - start)
        for cycle in cycles:
            rows.append(_class_cycle_cut(view, col, [view.nodes[i].eclass for i in cycle]))
            cuts += 1


def _class_cycle_cut(view: EGraphView, col: dict[int, int],
                     classes: list[Any]) -> tuple[dict[int, float], float, float]:
    """At most k-1 of the k edges of an e-class cycle may be used, by whichever nodes."""
    coefs: dict[int, float] = {}
    for c, d in zip(classes, classes[1:] + classes[:1]):
        for j in view.classes[c]:
            if j in col and d in view.nodes[j].children:
                coefs[col[j]] = 1.0
    return coefs, -np.inf, len(classes) - 1.0


def _find_cycles(view: EGraphView, choice: dict[Any, int], roots: list[Any], most: int = 50) -> list[list[int]]:
    """Up to ``most`` cycles among the chosen nodes reachable from the roots (as node lists)."""
    import networkx as nx

    g = nx.DiGraph()
    seen: set = set()
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for d in view.nodes[choice[c]].children:
            if d not in view.const:
                g.add_edge(c, d)
                stack.append(d)
    out = []
    for cyc in nx.simple_cycles(g):
        out.append([choice[u] for u in cyc])
        if len(out) >= most:
            break
    return out


# --------------------------------------------------------------------------- back to the IR
def to_graph(
    view: EGraphView, choice: dict[Any, int], roots: list[Any], leaves: dict[str, Node], template: Graph
) -> Graph:
    """The IR graph of a choice (memoized per e-class, so the result is a DAG with sharing)."""
    built: dict[Any, Node] = {}
    order: list[Any] = []
    seen: set = set()
    stack: list[tuple[Any, bool]] = [(r, False) for r in roots]
    while stack:
        c, done = stack.pop()
        if done:
            order.append(c)
            continue
        if c in seen:
            continue
        seen.add(c)
        stack.append((c, True))
        stack.extend((d, False) for d in view.nodes[choice[c]].children)
    for c in order:
        n = view.nodes[choice[c]]
        if n.op == "leaf":
            built[c] = leaves[n.leaf]
        elif n.op == "splitproj":
            a = dict(n.attrs)
            parts = node("split", built[n.children[0]], axis=a["axis"], sizes=n.sizes)
            built[c] = node("proj", parts, index=a["index"])
        else:
            built[c] = node(n.op, *(built[d] for d in n.children), **dict(n.attrs))
    return Graph(tuple(built[r] for r in roots), template.dtype, template.name)


@dataclass(frozen=True)
class Extraction:
    """An extractor's answer: a node per e-class, its cost, the greedy cost it started from, the
    method that produced it, the ILP's gap and status, and the seconds it took."""

    choice: dict[Any, int]
    cost: float
    greedy_cost: float
    method: str
    gap: float
    status: str
    seconds: float


def extract(view: EGraphView, costs: list[float], roots: list[Any], extractor: str = "ilp",
            seconds: float = 60.0) -> Extraction:
    """The DAG greedy choice, improved by the exact ILP (warm bound: the greedy cost) with
    ``extractor="ilp"``; the ILP's answer is kept only when it is no worse."""
    if extractor not in ("ilp", "greedy"):
        raise ValueError(f"unknown extractor {extractor!r}; choose ilp or greedy")
    start = time.perf_counter()
    choice = greedy_dag(view, costs, roots)
    greedy = selection_cost(view, costs, choice, roots)
    method, gap, status, cost = "greedy", 0.0, "not run", greedy
    if extractor == "ilp":
        removed = filter_cycles(view, choice, roots, costs)
        ilp = ilp_extract(view, costs, roots, choice, upper=greedy, time_limit=seconds, removed=removed)
        if ilp is not None and ilp.cost <= greedy + 1e-9:
            choice, method, gap, status, cost = ilp.choice, "ilp", ilp.gap, ilp.status, ilp.cost
        else:
            status = "no better solution within the time limit" if ilp is None else "worse than greedy"
    return Extraction(choice, cost, greedy, method, gap, status, time.perf_counter() - start)
