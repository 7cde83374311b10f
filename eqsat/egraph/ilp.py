"""Exact extraction as a 0/1 program: shrink the e-graph first, then solve, warm-started.

One binary per candidate e-node (picked or not): every root e-class picks a node, a picked node
needs a picked node in each child e-class, an e-class picks at most one. Shared e-classes count
once, so the optimum is the cheapest DAG, not the cheapest tree. Weight-only e-classes fold (cost
nothing whichever node computes them) and are not variables.

Before solving, the e-graph is reduced without losing any optimum (:func:`reduce`): nodes that
read their own e-class, nodes with a child e-class left empty, nodes *dominated* by another node
of their e-class (which costs no more and needs a subset of its children: swapping it in keeps a
solution feasible and acyclic and no dearer), and e-classes the roots no longer reach. Root
e-classes left with one node are fixed, and so on down.

Acyclicity: ``acyclic="filter"`` (the default) is TENSAT's cycle filter: it deletes e-nodes
until the e-graph below the roots is acyclic, keeping the greedy choice, so the answer is exact on
what the filter keeps. ``"lazy"`` is exact on the whole e-graph: it cuts every two-cycle up front
and each further cycle the solver's answer contains, then solves again. Measured on this
project's e-graphs (see docs/results), cycles through concat/split and transpose pairs are so
many that the lazy loop, and an order-variable formulation tried beside it, do not close within
60 s where the filter proves its optimum in seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from eqsat.egraph.solvers import Program, Solution, get_solver
from eqsat.egraph.view import EGraphView, selection_cost

TIE_BREAK_US = 1e-6  # added to every node's cost: among equal-cost choices, prefer fewer nodes
ACYCLIC = ("filter", "lazy")
Row = tuple[list[tuple[int, float]], float, float]  # a constraint: (column, coefficient) pairs, lower, upper


@dataclass(frozen=True)
class ILPSettings:
    """How the exact extractor runs: the solver (a row of ``solvers.SOLVERS``), whether to reduce
    the e-graph first, whether to start the solver from the greedy choice, and the acyclicity
    formulation. :data:`BASELINE` is the extractor before these were added."""

    solver: str = "highs"
    reduce: bool = True
    warm_start: bool = True
    acyclic: str = "filter"

    def __post_init__(self) -> None:
        if self.acyclic not in ACYCLIC:
            raise ValueError(f"acyclic must be one of {', '.join(ACYCLIC)}, got {self.acyclic!r}")


BASELINE = ILPSettings(solver="scipy", reduce=False, warm_start=False, acyclic="filter")


@dataclass(frozen=True)
class Reduction:
    """The candidates left per reachable (non-weight-only) e-class, the nodes every solution
    uses, a no-worse kept replacement for each dominated node, and sizes before and after."""

    candidates: dict[Any, list[int]]
    forced: frozenset[int]
    replacement: dict[int, int]
    stats: dict[str, int]


@dataclass(frozen=True)
class ILPResult:
    """The exact extractor's answer: a node per e-class, its cost, the proved lower bound and the
    relative gap, the solver's status, cycle cuts and solver rounds, seconds, seconds until the
    first feasible solution (0 when started from the greedy one), and the reduction's sizes."""

    choice: dict[Any, int]
    cost: float
    bound: float | None
    gap: float | None
    optimal: bool
    status: str
    cuts: int
    rounds: int
    seconds: float
    first_incumbent_s: float | None
    stats: dict[str, int]


def reachable(view: EGraphView, roots: list[Any], candidates: dict[Any, list[int]]) -> set:
    """Non-weight-only e-classes reachable from ``roots`` through ``candidates``."""
    reach: set = set()
    stack = [r for r in roots if r not in view.const]
    while stack:
        c = stack.pop()
        if c in reach:
            continue
        reach.add(c)
        for i in candidates.get(c, ()):
            stack.extend(view.kids[i])
    return reach


def reduce(view: EGraphView, costs: list[float], roots: list[Any], removed: set[int] = frozenset(),
           dominance: bool = True) -> Reduction:
    """Shrink the extraction problem without losing an optimum (see the module docstring)."""
    cand = {c: [i for i in ns if i not in removed and c not in view.kids[i]]
            for c, ns in view.classes.items() if c not in view.const}
    before = reachable(view, roots, {c: [i for i in ns if i not in removed] for c, ns in view.classes.items()})
    changed = True
    while changed:  # a node whose child e-class has no candidate left can never be picked
        changed = False
        for c, ns in cand.items():
            keep = [i for i in ns if all(cand.get(d) for d in view.kids[i])]
            if len(keep) != len(ns):
                cand[c], changed = keep, True
    replacement: dict[int, int] = {}
    if dominance:
        for c, ns in cand.items():
            kept: list[int] = []
            for i in sorted(ns, key=lambda i: (costs[i], len(view.kids[i]), i)):
                k = view.kids[i]
                dom = next((j for j in kept if view.kids[j] <= k), None)
                if dom is None:
                    kept.append(i)
                else:
                    replacement[i] = dom
            cand[c] = kept
    reach = reachable(view, roots, cand)
    cand = {c: ns for c, ns in cand.items() if c in reach}
    forced: set[int] = set()
    stack = [r for r in roots if r in cand and len(cand[r]) == 1]
    while stack:
        c = stack.pop()
        i = cand[c][0]
        if i in forced:
            continue
        forced.add(i)
        stack.extend(d for d in view.kids[i] if len(cand[d]) == 1)
    stats = {"enodes_before": sum(len(view.classes[c]) for c in before), "eclasses_before": len(before),
             "enodes_after": sum(len(ns) for ns in cand.values()), "eclasses_after": len(cand),
             "forced": len(forced)}
    return Reduction(cand, frozenset(forced), replacement, stats)


def _program(view: EGraphView, costs: list[float], roots: list[Any], red: Reduction, cols: list[int],
             cutoff: float | None) -> tuple[Program, list]:
    """The 0/1 program over ``cols``; its rows are returned as lists too, so cycle cuts can be
    appended."""
    col = {i: k for k, i in enumerate(cols)}
    rows: list[Row] = []
    for r in roots:
        if r in red.candidates:
            rows.append(([(col[i], 1.0) for i in red.candidates[r]], 1.0, np.inf))
    for ns in red.candidates.values():
        if len(ns) > 1:
            rows.append(([(col[i], 1.0) for i in ns], -np.inf, 1.0))
        for i in ns:
            for d in view.kids[i]:
                rows.append(([(col[j], 1.0) for j in red.candidates[d]] + [(col[i], -1.0)], 0.0, np.inf))
    for c, d in _two_cycles(view, red.candidates):  # the commonest cycles (an op and its inverse): cut up front
        rows.append(_cycle_cut(view, col, [c, d]))
    cost = np.array([costs[i] + TIE_BREAK_US for i in cols])
    if cutoff is not None:  # keep the greedy bound when the solver cannot start from it
        rows.append(([(k, float(cost[k])) for k in range(len(cols))], -np.inf, cutoff))
    return _as_program(rows, cost, np.array([i in red.forced for i in cols], dtype=bool)), rows


def _two_cycles(view: EGraphView, cand: dict[Any, list[int]]) -> list[tuple[Any, Any]]:
    """Pairs of e-classes that each have a candidate reading the other."""
    edges = {(c, d) for c, ns in cand.items() for i in ns for d in view.kids[i]}
    return sorted((c, d) for c, d in edges if (d, c) in edges and repr(c) < repr(d))


def _as_program(rows: list, cost: np.ndarray, fixed: np.ndarray) -> Program:
    from scipy.sparse import csr_matrix

    indptr = np.cumsum([0] + [len(r[0]) for r in rows])
    indices = np.array([k for r in rows for k, _ in r[0]], dtype=np.int32)
    data = np.array([v for r in rows for _, v in r[0]], dtype=float)
    matrix = csr_matrix((data, indices, indptr), shape=(len(rows), cost.size))
    return Program(cost, matrix, np.array([r[1] for r in rows], dtype=float),
                   np.array([r[2] for r in rows], dtype=float), fixed)


def _start(view: EGraphView, roots: list[Any], red: Reduction, choice: dict[Any, int], cols: list[int]) -> np.ndarray:
    """The greedy choice as a starting point, dominated picks swapped for their replacements."""
    def pick(c: Any) -> int:
        i = choice[c]
        while i in red.replacement:
            i = red.replacement[i]
        return i

    picked: set[int] = set()
    seen: set = set()
    stack = [r for r in roots if r in red.candidates]
    while stack:
        c = stack.pop()
        if c not in seen:
            seen.add(c)
            i = pick(c)
            picked.add(i)
            stack.extend(view.kids[i])
    return np.array([1.0 if i in picked else 0.0 for i in cols])


def _decode(view: EGraphView, cols: list[int], x: np.ndarray, constants: dict[Any, int]) -> dict[Any, int]:
    choice: dict[Any, int] = {c: i for c, i in constants.items() if c in view.const}
    for k, i in enumerate(cols):
        if x[k] > 0.5:
            choice.setdefault(view.nodes[i].eclass, i)
    return choice


def find_cycles(view: EGraphView, choice: dict[Any, int], roots: list[Any], most: int = 50) -> list[list[Any]]:
    """Up to ``most`` cycles (as e-class lists) among the chosen nodes reachable from the roots."""
    import networkx as nx

    g = nx.DiGraph()
    for c in reachable(view, roots, {c: [i] for c, i in choice.items()}):
        g.add_edges_from((c, d) for d in view.kids[choice[c]])
    out = []
    for cyc in nx.simple_cycles(g):
        out.append(cyc)
        if len(out) >= most:
            break
    return out


def _cycle_cut(view: EGraphView, col: dict[int, int], classes: list[Any]) -> Row:
    """At most k-1 of the k edges of an e-class cycle may be used, by whichever nodes."""
    coefs: dict[int, float] = {}
    for c, d in zip(classes, classes[1:] + classes[:1]):
        for j in view.classes[c]:
            if j in col and d in view.nodes[j].children:
                coefs[col[j]] = 1.0
    return list(coefs.items()), -np.inf, len(classes) - 1.0


def filter_cycles(view: EGraphView, keep: dict[Any, int], roots: list[Any], costs: list[float]) -> set[int]:
    """Remove e-nodes until the e-class graph below the roots is acyclic (TENSAT's cycle filter).

    ``keep`` (an acyclic choice such as the greedy one) stays: on every cycle some edge is not
    realized by a kept node; of those edges, the one whose cheapest realizing node costs most
    is cut (its nodes removed), so cheap views such as a split projection survive. One
    depth-first pass: a back edge closes a cycle on the stack; after a cut the stack unwinds to
    the cut edge's source and the pass goes on from there.
    """
    edges: dict[Any, dict[Any, list[int]]] = {}
    for c in reachable(view, roots, view.classes):
        out = edges.setdefault(c, {})
        for i in view.classes[c]:
            for d in view.kids[i]:
                out.setdefault(d, []).append(i)
    removed: set[int] = set()
    state: dict[Any, int] = {}  # 1 on the stack, 2 done
    for root in edges:
        if state.get(root):
            continue
        path: list[Any] = [root]
        todo: list[list[Any]] = [list(edges[root])]
        state[root] = 1
        while path:
            if not todo[-1]:
                state[path.pop()] = 2
                todo.pop()
                continue
            c, d = path[-1], todo[-1].pop()
            if d not in edges[c] or state.get(d) == 2:
                continue
            if state.get(d) != 1:
                state[d] = 1
                path.append(d)
                todo.append(list(edges[d]))
                continue
            cycle = path[path.index(d):] + [d]
            options = [(u, v) for u, v in zip(cycle, cycle[1:]) if keep.get(u) not in edges[u][v]]
            if not options:  # cannot happen when ``keep`` is acyclic
                raise RuntimeError("cycle filter: every edge of a cycle is used by the kept choice")
            u, v = max(options, key=lambda e: min(costs[i] for i in edges[e[0]][e[1]]))
            removed.update(edges[u].pop(v))
            if u != c:  # a stack edge was cut: unwind to its source, whose other edges stay to do
                while path[-1] != u:
                    del state[path.pop()]
                    todo.pop()
    return removed


def ilp_extract(view: EGraphView, costs: list[float], roots: list[Any], greedy: dict[Any, int], greedy_cost: float,
                settings: ILPSettings = ILPSettings(), seconds: float = 60.0) -> ILPResult | None:
    """The cheapest acyclic DAG below ``roots`` (exact unless ``acyclic="filter"``), or None when
    the solver found nothing within ``seconds``. ``greedy`` (an acyclic choice costing
    ``greedy_cost``) is the warm start and the upper bound, and fixes the weight-only e-classes."""
    began = time.perf_counter()
    solver = get_solver(settings.solver)
    removed = filter_cycles(view, greedy, roots, costs) if settings.acyclic == "filter" else set()
    red = reduce(view, costs, roots, removed, dominance=settings.reduce)
    cols = [i for ns in red.candidates.values() for i in ns]
    col = {i: k for k, i in enumerate(cols)}
    warm = settings.warm_start and solver.takes_start
    cutoff = None if warm else greedy_cost + TIE_BREAK_US * (len(cols) + 1) + 1e-3
    program, rows = _program(view, costs, roots, red, cols, cutoff)
    start = _start(view, roots, red, greedy, cols) if warm else None
    cuts = rounds = 0
    first: float | None = None
    while True:
        remaining = seconds - (time.perf_counter() - began)
        if remaining <= 0:
            return None
        solve_began = time.perf_counter() - began
        sol: Solution = solver.solve(program, remaining, start)
        rounds += 1
        if first is None and sol.first_incumbent_s is not None:
            first = 0.0 if warm else solve_began + sol.first_incumbent_s
        if sol.x is None:
            return None
        choice = _decode(view, cols, sol.x, greedy)
        cycles = find_cycles(view, choice, roots)
        if not cycles:
            break
        for cyc in cycles:
            rows.append(_cycle_cut(view, col, cyc))
            cuts += 1
        program = _as_program(rows, program.cost, program.fixed)
    cost = selection_cost(view, costs, choice, roots)
    bound = min(sol.bound - TIE_BREAK_US * len(cols), cost) if np.isfinite(sol.bound) else None
    gap = 0.0 if sol.optimal else (max(cost - bound, 0.0) / cost if cost > 0 and bound is not None else None)
    return ILPResult(choice, cost, bound, gap, sol.optimal, sol.status, cuts, rounds, time.perf_counter() - began,
                     first, red.stats)
