"""Exact extraction as a 0/1 program: shrink the e-graph first, then solve, warm-started.

One binary per candidate e-node: every root e-class picks a node, a picked node needs a picked
node in each child e-class, an e-class picks at most one; shared e-classes count once, so the
optimum is the cheapest DAG. Weight-only e-classes fold (cost nothing) and are not variables.
Before solving, nodes whose cost bound exceeds the start's are pruned (:mod:`.prune`, whose
roots' chain bound joins the solver's and can prove the start optimal with no solve), and
:func:`reduce` drops, without losing any optimum, nodes that read their own e-class or an empty
one, nodes *dominated* by a node of their e-class (no dearer, a subset of its children), and
e-classes the roots no longer reach. Measured numbers: docs/results/extraction.

Acyclicity: ``"exact"`` (the default) is exact on the whole e-graph and acyclic by construction:
each e-class inside a cycle gets a level in ``[0, n-1]`` (n: its strongly connected component's
size), and picking a node of c that reads d of the same component forces ``level[c] >= level[d]
+ 1``. It starts from the cycle filter's optimum, so it is never dearer than the filter; its
relaxation is weak (big-M level rows) where cheap split/concat cycles abound. ``"filter"`` is
TENSAT's cycle filter (deletes e-nodes until the e-graph is acyclic, keeping the greedy choice):
optimal only on what it keeps, so no bound on the whole problem is claimed. ``"lazy"`` cuts every
two-cycle up front and each cycle in the solver's answer, then solves again. ``"exact"`` and
``"filter"`` with a warm start are solved in parts where an e-class alone joins what it reaches to
the rest (:mod:`.split`): per-layer programs instead of one whose root relaxation HiGHS must close
across every layer, two at a time with a helper (the merge judges' too, from
:data:`FILTER_SPLIT_COLUMNS`: NasRNN's three took 0.14, 0.21 and 0.31 s whole, 0.11, 0.17 and
0.21 s in parts, in fresh processes).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from eqsat.egraph.cycles import cycle_components, first_cycle
from eqsat.egraph.program import (
    OutOfTime,
    Reduction,
    as_program,
    build_program,
    check,
    cycle_cut,
    forced_nodes,
    level_columns,
    start_vector,
)
from eqsat.egraph.prune import prune
from eqsat.egraph.solvers import REL_GAP, RELAXATIONS, get_solver
from eqsat.egraph.split import PartHelper, solve_parts, split_parts
from eqsat.egraph.view import EGraphView, selection_cost

TIE_BREAK = 1e-7  # per node, relative to the greedy cost per e-class: among equal-cost choices, fewer nodes
ACYCLIC = ("exact", "filter", "lazy")
FILTER_SHARE = 0.25  # exact: at most this share of the time finds the cycle filter's optimum, the start
# the filter's program is split from this many columns: BERT's judges (320-782 columns, 22-40 ms
# whole) took 1.75x as long in parts, NasRNN's, NASNet-A's and Inception-v3's (1,194-5,141) 0.8-0.95x,
# and half that two at a time
FILTER_SPLIT_COLUMNS = 1000


@dataclass(frozen=True)
class ILPSettings:
    """How the exact extractor runs (the solver is a row of ``solvers.SOLVERS``); :data:`BASELINE`
    is the extractor before the reduction, the warm start, the formulations and the pruning."""

    solver: str = "highs"
    reduce: bool = True
    warm_start: bool = True
    acyclic: str = "exact"
    prove_seconds: float | None = None  # exact: the whole-e-graph proof's seconds after the filter's answer
    filtered: bool = False  # exact: the start is the cycle filter's optimum already (a merge judge solved it)
    nodes: int | None = None  # branch-and-bound nodes per solve: a budget of work, the same on a busy machine
    prove_nodes: int | None = None  # exact: the proof's nodes after the filter's answer (None: nodes; 0: no proof)
    prune: bool = True  # drop e-nodes whose cost bound exceeds the start's cost (prune.py)
    memory_gb: float = math.inf  # resident memory of this process, checked between the build's phases and solves
    helper: PartHelper | None = field(default=None, compare=False, repr=False)  # exact in parts: a second solver

    def __post_init__(self) -> None:
        if self.acyclic not in ACYCLIC:
            raise ValueError(f"acyclic must be one of {', '.join(ACYCLIC)}, got {self.acyclic!r}")
        if not self.memory_gb > 0:
            raise ValueError(f"the extraction memory cap must be > 0 GB, got {self.memory_gb}")
        if any(n is not None and n < 0 for n in (self.nodes, self.prove_nodes)):
            raise ValueError(f"node budgets must be >= 0, got {self.nodes} and {self.prove_nodes}")


BASELINE = ILPSettings(solver="scipy", reduce=False, warm_start=False, acyclic="filter", prune=False)
FILTERED = ILPSettings(acyclic="filter")  # TENSAT's cycle filter, as before the exact formulation


@dataclass(frozen=True)
class ILPResult:
    """The exact extractor's answer: a node per e-class, its cost, the proved lower bound on the whole
    (acyclic) problem and the gap from it (None for the cycle filter: its bound is on what it keeps),
    whether optimality of the whole problem was proved, the status, cycle cuts and solver rounds,
    seconds, seconds to the first feasible solution (0 from the greedy one), the reduction's sizes,
    and what the clock cut short ("" when only work budgets and proofs decided the answer)."""

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
    clock: str = ""


def _clocked(result: ILPResult | None, why: str) -> ILPResult | None:
    """``result`` marked as cut short by the clock (its answer depends on the machine's speed)."""
    return None if result is None else replace(result, clock=result.clock or why)


def reachable(view: EGraphView, roots: list[Any], candidates: dict[Any, list[int]],
              deadline: float | None = None, removed: set[int] | frozenset = frozenset()) -> set:
    """Non-weight-only e-classes reachable from ``roots`` through ``candidates`` less ``removed``;
    :class:`OutOfTime` past ``deadline`` (a million-node e-graph takes seconds)."""
    check(deadline)
    reach: set = set()
    stack = [r for r in roots if r not in view.const]
    kids, options, add, pop, push = view.kids, candidates.get, reach.add, stack.pop, stack.extend
    while stack:
        c = pop()
        if c in reach:
            continue
        add(c)
        if not len(reach) & 4095:
            check(deadline)
        for i in options(c, ()):
            if i not in removed:
                push(kids[i])
    return reach


def reduce(view: EGraphView, costs: list[float], roots: list[Any], removed: set[int] = frozenset(),
           dominance: bool = True, deadline: float | None = None) -> Reduction:
    """Shrink the extraction problem without losing an optimum (see the module docstring);
    :class:`OutOfTime` past ``deadline``."""
    kids = view.kids
    cand = {c: [i for i in ns if i not in removed and c not in kids[i]]
            for c, ns in view.classes.items() if c not in view.const}
    before = reachable(view, roots, view.classes, deadline, removed)
    check(deadline)
    changed = True
    while changed:  # a node whose child e-class has no candidate left can never be picked
        check(deadline)  # (the greatest fixed point: the order classes are met in does not change it)
        alive = {c for c, ns in cand.items() if ns}
        changed = False
        for c, ns in cand.items():
            keep = [i for i in ns if kids[i] <= alive]
            if len(keep) != len(ns):
                cand[c], changed = keep, True
    replacement: dict[int, int] = {}
    if dominance:
        for n, (c, ns) in enumerate(cand.items()):
            if not n & 4095:
                check(deadline)
            if len(ns) < 2:  # nothing to dominate
                continue
            kept: list[int] = []
            for i in sorted(ns, key=lambda i: (costs[i], len(kids[i]), i)):
                k = kids[i]
                for j in kept:
                    if kids[j] <= k:
                        replacement[i] = j
                        break
                else:
                    kept.append(i)
            cand[c] = kept
    reach = reachable(view, roots, cand, deadline)
    cand = {c: ns for c, ns in cand.items() if c in reach}
    forced = forced_nodes(view, cand, roots)
    stats = {"enodes_before": sum(len(view.classes[c]) for c in before), "eclasses_before": len(before),
             "enodes_after": sum(len(ns) for ns in cand.values()), "eclasses_after": len(cand),
             "forced": len(forced)}
    return Reduction(cand, forced, replacement, stats)



def _decode(view: EGraphView, cols: list[int], x: np.ndarray, constants: dict[Any, int]) -> dict[Any, int]:
    choice: dict[Any, int] = {c: i for c, i in constants.items() if c in view.const}
    for k, i in enumerate(cols):
        if x[k] > 0.5:
            choice.setdefault(view.nodes[i].eclass, i)
    return choice


def _acyclic(view: EGraphView, choice: dict[Any, int], roots: list[Any]) -> bool:
    """Whether the chosen nodes reachable from the roots form no cycle (one depth-first pass)."""
    return first_cycle([r for r in roots if r not in view.const], lambda c: view.kids[choice[c]]) is None


def find_cycles(view: EGraphView, choice: dict[Any, int], roots: list[Any], most: int = 50) -> list[list[Any]]:
    """Up to ``most`` cycles (as e-class lists) among the chosen nodes reachable from the roots."""
    if _acyclic(view, choice, roots):  # the usual answer, without building a networkx graph
        return []
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


def filter_cycles(view: EGraphView, keep: dict[Any, int], roots: list[Any], costs: list[float],
                  deadline: float | None = None) -> set[int]:
    """Remove e-nodes until the e-class graph below the roots is acyclic (TENSAT's cycle filter).

    ``keep`` (an acyclic choice such as the greedy one) stays: on every cycle some edge is not
    realized by a kept node; of those edges, the one whose cheapest realizing node costs most
    is cut (its nodes removed), so cheap views such as a split projection survive. One
    depth-first pass: a back edge closes a cycle on the stack; after a cut the stack unwinds to
    the cut edge's source and the pass goes on from there.
    """
    edges: dict[Any, dict[Any, list[int]]] = {}
    kids, classes = view.kids, view.classes
    for k, c in enumerate(reachable(view, roots, classes, deadline)):
        if not k & 4095:  # 1M e-nodes: this loop alone took 10 s at load 8, past a 1 s deadline
            check(deadline)
        out = edges[c] = {}
        for i in classes[c]:
            for d in kids[i]:
                at = out.get(d)
                if at is None:
                    out[d] = [i]
                else:
                    at.append(i)
    check(deadline)
    removed: set[int] = set()
    state: dict[Any, int] = {}  # 1 on the stack, 2 done
    status, kept, price = state.get, keep.get, costs.__getitem__
    for root in edges:
        if status(root):
            continue
        path: list[Any] = [root]
        todo: list[list[Any]] = [list(edges[root])]
        state[root] = 1
        steps = 0
        while path:
            steps += 1
            if not steps & 4095:
                check(deadline)
            if not todo[-1]:
                state[path.pop()] = 2
                todo.pop()
                continue
            c, d = path[-1], todo[-1].pop()
            if d not in edges[c] or status(d) == 2:
                continue
            if status(d) != 1:
                state[d] = 1
                path.append(d)
                todo.append(list(edges[d]))
                continue
            cycle = path[path.index(d):] + [d]
            options = [(u, v) for u, v in zip(cycle, cycle[1:]) if kept(u) not in edges[u][v]]
            if not options:  # cannot happen when ``keep`` is acyclic
                raise RuntimeError("cycle filter: every edge of a cycle is used by the kept choice")
            u, v = max(options, key=lambda e: min(map(price, edges[e[0]][e[1]])))
            removed.update(edges[u].pop(v))
            if u != c:  # a stack edge was cut: unwind to its source, whose other edges stay to do
                while path[-1] != u:
                    del state[path.pop()]
                    todo.pop()
    return removed


def _build(view: EGraphView, costs: list[float], roots: list[Any], greedy: dict[Any, int], greedy_cost: float,
           settings: ILPSettings, deadline: float) -> tuple:
    """The reduction, columns, levels, components, tie-break, program and chain bound (prune.py;
    -inf when not pruned or behind the filter) of :func:`ilp_extract`."""
    check(deadline, settings.memory_gb)
    removed = filter_cycles(view, greedy, roots, costs, deadline) if settings.acyclic == "filter" else set()
    check(deadline, settings.memory_gb)
    chain = -np.inf
    if settings.prune:
        pruned = prune(view, costs, roots, {c: [i for i in ns if i not in removed] for c, ns in view.classes.items()
                                            if c not in view.const}, greedy_cost, deadline)
        removed |= pruned.removed
        chain = pruned.bound if settings.acyclic != "filter" else -np.inf  # the filter's is on what it keeps
        check(deadline, settings.memory_gb)
    red = reduce(view, costs, roots, removed, dominance=settings.reduce, deadline=deadline)
    cols = [i for ns in red.candidates.values() for i in ns]
    check(deadline, settings.memory_gb)
    # the tie-break any solution pays is at most `tie` per e-class: TIE_BREAK of the greedy cost in all
    tie = TIE_BREAK * greedy_cost / max(len(red.candidates), 1)
    warm = settings.warm_start and get_solver(settings.solver).takes_start
    cutoff = None if warm else greedy_cost + tie * (len(red.candidates) + 1) + 1e-3
    in_parts = settings.acyclic == "exact" or (settings.acyclic == "filter" and len(cols) >= FILTER_SPLIT_COLUMNS)
    parts = split_parts(view, red.candidates, roots) if warm and in_parts else []
    # in parts, each part finds its own components (a cycle never crosses a cut): the whole's would
    # only be counted (NasRNN's proof: 9 ms before its first part could go to the helper)
    comps = cycle_components(view, red.candidates) if settings.acyclic == "exact" and not parts else []
    levels = level_columns(comps, len(cols))
    program, rows = build_program(view, costs, roots, red, cols, cutoff, tie, levels, deadline,
                                  settings.acyclic != "filter") if not parts \
        else (None, None)  # the parts' programs are built as they are solved
    check(deadline, settings.memory_gb)
    return red, cols, levels, comps, tie, program, rows, chain, parts


def ilp_extract(view: EGraphView, costs: list[float], roots: list[Any], greedy: dict[Any, int], greedy_cost: float,
                settings: ILPSettings = ILPSettings(), seconds: float = 60.0) -> ILPResult | None:
    """The cheapest acyclic DAG below ``roots`` (exact unless ``acyclic="filter"``), or None when
    the solver found nothing within ``seconds``. ``greedy`` (an acyclic choice costing
    ``greedy_cost``) is the warm start and the upper bound, and fixes the weight-only e-classes."""
    began = time.perf_counter()
    solver = get_solver(settings.solver)
    kept = None
    if settings.acyclic == "exact" and settings.warm_start and solver.takes_start:
        # the cycle filter's optimum (seconds, a tight relaxation) is a better start than the greedy one
        kept = None if settings.filtered else ilp_extract(view, costs, roots, greedy, greedy_cost,
                                                          replace(settings, acyclic="filter", prove_nodes=None),
                                                          seconds * FILTER_SHARE)
        if kept is not None and kept.cost < greedy_cost:
            greedy, greedy_cost = kept.choice, kept.cost
        if settings.prove_seconds is not None:  # a caller that cannot wait (optimize's merge judges)
            seconds = min(seconds, time.perf_counter() - began + settings.prove_seconds)
        if settings.prove_nodes == 0 and kept is not None:  # no proof asked for: HiGHS's root alone can take seconds
            return kept
    try:
        red, cols, levels, comps, tie, program, rows, chain, parts = _build(view, costs, roots, greedy, greedy_cost,
                                                                    settings, began + seconds)
    except OutOfTime:  # the filter's answer stands (None when there is none)
        return _clocked(kept, "the extraction's time limit (building the program)")
    stats = red.stats | {"cycle_classes": len(levels), "cycle_components": len(comps)} | \
        ({"split_parts": len(parts)} if parts else {})
    if chain >= greedy_cost - REL_GAP * abs(greedy_cost):  # the start is proved optimal: nothing to solve
        if parts and settings.acyclic == "exact":  # counted here, where no part is built
            found = cycle_components(view, red.candidates)
            stats |= {"cycle_classes": sum(map(len, found)), "cycle_components": len(found)}
        cost = selection_cost(view, costs, greedy, roots)
        low = min(chain, cost)
        return ILPResult(greedy, cost, low, max(cost - low, 0.0) / cost if cost > 0 else 0.0, True,
                         "Optimal (the chain bound meets the start)", 0, 0, time.perf_counter() - began, 0.0, stats)
    col = {i: k for k, i in enumerate(cols)}
    warm = settings.warm_start and solver.takes_start
    start = start_vector(view, roots, red, greedy, cols, levels) if warm and not parts else None
    cuts = rounds = 0
    first: float | None = None
    bound = -np.inf
    while True:
        remaining = seconds - (time.perf_counter() - began)
        if remaining <= 0:
            return _clocked(kept, "the extraction's time limit")
        check(None, settings.memory_gb)
        solve_began = time.perf_counter() - began
        proving = (kept is not None or settings.filtered) and settings.prove_nodes is not None  # from the filter
        budget = settings.prove_nodes if proving else settings.nodes
        if parts:  # exact in parts (split.py)
            split = solve_parts(view, costs, roots, red, parts, tie, greedy, solver.solve, began + seconds, budget,
                                settings.memory_gb, settings.helper, settings.acyclic != "filter")
            sol = split.solution
            stats |= {"cycle_classes": split.cycle_classes, "cycle_components": split.cycle_components}
        else:
            sol = solver.solve(program, remaining, start, budget)
            if program.relaxation:
                RELAXATIONS.note([(program, sol)])
        rounds += 1
        bound = max(bound, sol.bound)  # every round's program relaxes the whole problem (lazy, exact)
        if first is None and sol.first_incumbent_s is not None:
            first = 0.0 if warm else solve_began + sol.first_incumbent_s
        if (sol.x if not parts else split.choice) is None:
            return _clocked(kept, "the extraction's time limit") if sol.clock else kept
        choice = _decode(view, cols, sol.x, greedy) if not parts else split.choice
        cycles = find_cycles(view, choice, roots)
        if not cycles:
            break
        if settings.acyclic == "exact" or parts:  # cannot happen beyond the solver's tolerances
            raise RuntimeError("exact extraction: the solver's answer has a cycle")
        for cyc in cycles:
            rows.append(cycle_cut(view, col, cyc))
            cuts += 1
        program = as_program(rows, program.cost, program.fixed, program.col_upper, program.integral,
                             program.relaxation)
    cost = selection_cost(view, costs, choice, roots)
    whole = settings.acyclic != "filter"  # the filter's bound is only on what it keeps
    paid = tie * len(red.candidates)  # the most tie-break any solution can have paid
    proved = max(bound - paid, chain)  # the chain bound needs no solver (prune.py)
    low = min(proved, cost) if whole and np.isfinite(proved) else None
    gap = None if low is None else (max(cost - low, 0.0) / cost if cost > 0 else 0.0)
    closed = gap is not None and gap <= REL_GAP and not sol.optimal  # by the chain bound
    optimal = whole and (sol.optimal or closed)
    status = ("Optimal (by the chain bound)" if closed else sol.status) if whole else \
        f"{sol.status} on the cycle-filtered e-graph only"
    clock = "the extraction's time limit" if sol.clock else ""
    if kept is not None and kept.clock and not optimal:
        clock = clock or kept.clock  # the start came from a filter the clock stopped
    return ILPResult(choice, cost, low, gap, optimal, status, cuts, rounds, time.perf_counter() - began,
                     first, stats, clock)
