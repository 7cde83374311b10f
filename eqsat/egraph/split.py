"""Exact extraction in parts, split at e-classes that alone join what they reach to the rest.

An e-class ``c`` is a *cut* when, in the undirected e-class graph of the candidates (cycles
included, the roots joined to one super-root), removing ``c`` separates everything ``c`` reaches
(U) from the rest (D), and ``c`` reads nothing in D. Then D reads U only through ``c``, every
cycle (and so every level row) lies inside U or inside D, and, each e-class's node counted once,
the optimum is D's optimum with ``c`` a leaf *priced at U's optimum below c*. The price matters:
with ``c`` free, D's optimum may read ``c`` and yet cost more, once U is paid, than a term of D
that avoids ``c``. Cuts are nested or disjoint, so one pass over networkx's biconnected
components finds them all. The parts are solved deepest first with the whole program's settings
(rows, tie-break, warm start, node budget per solve); the answer is optimal only when every part
is, and its bound is each part's bound less what its leaves' prices may exceed their optima by.
Parts alike (an RNN's unrolled steps) state one program up to the order of its rows and columns
once each part's forced nodes are found from its own root and a leaf every answer reads is set
aside; such a program is solved once (see :mod:`.twins`).
"""
from __future__ import annotations

import time
from collections import ChainMap, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from eqsat.egraph.cycles import cycle_components
from eqsat.egraph.program import Reduction, build_program, check, forced_nodes, level_columns, start_vector
from eqsat.egraph.solvers import RELAXATIONS, Program, Solution
from eqsat.egraph.twins import Twins
from eqsat.egraph.view import EGraphView

MIN_PART = 64  # e-classes: a smaller part joins the part above it (a HiGHS call costs about 10 ms)
HELPER_MIN_COLUMNS = 150  # a smaller program is solved here: sending it costs more than it saves (the
# worker may still be putting its host back, 5-35 ms: ResNeXt-50's two small parts, sent, cost 0.06 s;
# BERT's 185-247 columns take 8-16 ms each, Inception-v3's 174-329 about 10 ms)
_TOP = ("split", "super-root")  # joined to every root, so that a root's side is always D


@dataclass(frozen=True)
class Part:
    """The e-classes whose nodes are one program's variables: below the cut ``root`` (None: the
    top part, below the extraction's roots), reading the cuts ``leaves`` as priced leaves."""

    root: Any
    classes: tuple
    leaves: tuple


def split_parts(view: EGraphView, cand: dict[Any, list[int]], roots: list[Any],
                min_part: int | None = None) -> list[Part]:
    """The parts of the candidates' e-class graph, deepest first (the top part last); [] when
    no cut leaves a part below it of ``min_part`` (default :data:`MIN_PART`) e-classes or more."""
    min_part = MIN_PART if min_part is None else min_part

    kids = {c: set().union(*(view.kids[i] for i in ns)) - {c} for c, ns in cand.items()}
    adjacent: dict[Any, dict[Any, None]] = {c: {} for c in cand}
    for c, d in [*((_TOP, r) for r in roots if r in cand), *((c, d) for c, ds in kids.items() for d in ds)]:
        adjacent.setdefault(c, {})[d] = None
        adjacent.setdefault(d, {})[c] = None
    blocks = [set(b) for b in biconnected_components(adjacent)]  # one depth-first walk: the cut vertices
    member: dict[Any, list[int]] = {}  # are those in two blocks or more (articulation_points walks again)
    for k, b in enumerate(blocks):
        for v in b:
            member.setdefault(v, []).append(k)
    points = {v for v, ks in member.items() if len(ks) > 1} - {_TOP} - set(roots)
    if not points:
        return []
    owner: dict[Any, Any] = {_TOP: None}  # the part (its cut, None: the top) whose variables v's nodes are
    above: dict[Any, Any] = {}  # a cut -> the part that reads it as a leaf
    cuts: list[Any] = []  # outer before inner
    done: set[int] = set()
    queue = deque([_TOP])
    while queue:  # breadth first over the block-cut tree: a vertex is first met in the block towards the roots
        v = queue.popleft()
        for k in member.get(v, ()):
            if k in done:
                continue
            done.add(k)
            for u in [u for u in blocks[k] if u not in owner]:  # not ``blocks[k] - owner.keys()``: it walks
                # every key of owner per block, quadratic on a chain (a 100,000-class chain: 83 s past --seconds 10)
                if u in points and not kids[u] & blocks[k]:
                    owner[u], above[u] = u, owner[v]
                    cuts.append(u)
                else:
                    owner[u] = owner[v]
                queue.append(u)
    size: dict[Any, int] = {}
    for u, p in owner.items():
        size[p] = size.get(p, 0) + (u is not _TOP)
    into: dict[Any, Any] = {}  # a cut whose part is too small -> the part above it
    for c in reversed(cuts):
        if size[c] < min_part:
            into[c] = above[c]
            size[above[c]] += size.pop(c)

    def part_of(p: Any) -> Any:  # with path compression: a chain's cuts merged one into the next walked
        root = p  # the whole chain for each class, quadratic
        while root in into:
            root = into[root]
        while p in into and into[p] != root:
            into[p], p = root, into[p]
        return root

    kept = [c for c in cuts if c not in into]
    if not kept:
        return []
    classes: dict[Any, list[Any]] = {}
    for u, p in owner.items():
        if u is not _TOP:
            classes.setdefault(part_of(p), []).append(u)
    leaves: dict[Any, list[Any]] = {}
    for c in kept:
        leaves.setdefault(part_of(above[c]), []).append(c)
    return [Part(p, tuple(classes[p]), tuple(leaves.get(p, ()))) for p in [*reversed(kept), None]]


def biconnected_components(adjacent: dict[Any, dict[Any, None]]) -> list[set]:
    """The vertex sets of the biconnected components of an undirected graph given as adjacency
    dicts, in the order ``networkx.biconnected_components`` yields them for a ``networkx.Graph``
    built with the same vertices and edges in the same order (the same depth-first walk, Hopcroft
    and Tarjan's), without its views: a third of the split's time on NasRNN's e-graphs."""
    out: list[set] = []
    discovery: dict[Any, int] = {}
    for start in adjacent:
        if start in discovery:
            continue
        discovery[start] = len(discovery)  # numbered over the whole walk: within a component, in the same order
        low = {start: discovery[start]}
        edge_stack: list[tuple[Any, Any]] = []
        edge_index: dict[tuple[Any, Any], int] = {}
        stack = [(start, start, iter(adjacent[start]))]
        while stack:
            grandparent, parent, children = stack[-1]
            here = discovery[parent]
            for child in children:  # the same iterator resumes when the walk comes back to parent
                if grandparent == child:
                    continue
                found = discovery.get(child)
                if found is None:
                    low[child] = discovery[child] = len(discovery)
                    stack.append((parent, child, iter(adjacent[child])))
                    edge_index[parent, child] = len(edge_stack)
                    edge_stack.append((parent, child))
                    break
                if found <= here:  # a back edge
                    if found < low[parent]:
                        low[parent] = found
                    edge_index[parent, child] = len(edge_stack)
                    edge_stack.append((parent, child))
            else:
                stack.pop()
                if len(stack) > 1:
                    if low[parent] >= discovery[grandparent]:
                        out.append(_close_block(edge_stack, edge_index[grandparent, parent]))
                    if low[parent] < low[grandparent]:
                        low[grandparent] = low[parent]
                elif stack:  # the root's child
                    out.append(_close_block(edge_stack, edge_index[grandparent, parent]))
    return out


def _close_block(edge_stack: list[tuple[Any, Any]], at: int) -> set:
    """The vertices of the edges pushed since position ``at``, taken off the stack: one block."""
    block = {v for edge in edge_stack[at:] for v in edge}
    del edge_stack[at:]
    return block


class _Extended(Sequence):
    """A list with a few more entries past its end (the parts' priced leaves), without a copy."""

    def __init__(self, base: Sequence, extra: dict[int, Any]) -> None:
        self.base, self.extra = base, extra

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        return self.extra[i] if i >= len(self.base) else self.base[i]


@dataclass(frozen=True)
class SplitAnswer:
    """The parts' answers joined: the choice (None when a part found nothing) and a summary
    :class:`Solution` (objective with the tie-break, bound, all parts optimal, clock, nodes)."""

    choice: dict[Any, int] | None
    solution: Solution
    parts: int
    cycle_classes: int = 0  # in the parts' cycle components (levels), summed over the programs answered
    cycle_components: int = 0


Solve = Callable[[Program, float, np.ndarray | None, int | None], Solution]


class PartHelper(Protocol):
    """A second process that solves the programs it is sent, in order, while this one solves others
    (the other process, idle while this one extracts: the saturation worker for the parent's final
    extraction, the parent for the worker's merge judges; see ``part_helper.WorkerHelper``)."""

    def submit(self, program: Program, seconds: float, start: np.ndarray | None, nodes: int | None) -> bool:
        """Queue a program; False when it cannot (then the caller solves it)."""

    def result(self, seconds: float) -> Solution | None:
        """The answer to the earliest program queued and not yet answered, waiting at most
        ``seconds``; None when none came (the caller solves it)."""


@dataclass(frozen=True)
class _Built:
    """One part's program, as built from its leaves' prices, and what reading its answer needs."""

    part: Part
    program: Program
    cols: list[int]
    start: np.ndarray | None
    price: _Extended
    usable: list[Any]
    reads: Callable[[int], bool] = lambda leaf: False  # whether every term of the part reads that leaf
    cycles: tuple[int, int] = (0, 0)  # e-classes in its cycle components, and the components
    _needed: dict = field(default_factory=dict)

    def needs(self, leaf: int) -> bool:
        """Whether every answer picks ``leaf`` (a priced cut's column id), found once when first asked
        (a walk over the part, 1-2 ms: only twins and a changed price ask)."""
        got = self._needed.get(leaf)
        if got is None:
            got = self._needed[leaf] = self.reads(leaf)
        return got


def solve_parts(view: EGraphView, costs: list[float], roots: list[Any], red: Reduction, parts: list[Part],
                tie: float, greedy: dict[Any, int], solve: Solve, deadline: float, budget: int | None,
                memory_gb: float, helper: PartHelper | None = None, cycles: bool = True) -> SplitAnswer:
    """Each part's program (as :func:`build_program` states the whole one) solved deepest first,
    every cut priced in the part above at its own part's objective (``cycles=False``: the
    candidates close no cycle, the cycle filter cut them: no part looks for one).

    With a ``helper`` and a start that uses every cut, the parts are solved two at a time: each
    cut is priced first at what the start pays below it, every program is built at once, and the
    two processes solve them biggest first. Where every part's answer pays exactly its price, each
    program is the one the deepest-first order builds, so the answer is the same; otherwise the
    parts are solved again in order, each reusing an answer whose program came out the same or
    whose leaves cost less now, each one it reads (see :func:`_price_drop`)."""
    base = len(view.nodes)
    leaf_id = {p.root: base + k for k, p in enumerate(parts) if p.root is not None}
    sub = EGraphView(view.classes, view.nodes, view.shapes, view.const, view.lets)
    # the priced leaves read nothing: a list, not an _Extended (181,000 lookups in three NasRNN final extractions)
    sub.__dict__["kids"] = view.kids + [frozenset()] * (max(leaf_id.values(), default=base - 1) - base + 1)

    def build(part: Part, value: dict[Any, float]) -> _Built:
        usable = [c for c in part.leaves if c in value]  # a cut with no acyclic term below it cannot be read
        cand = {c: red.candidates[c] for c in part.classes} | {c: [leaf_id[c]] if c in value else []
                                                               for c in part.leaves}
        price = _Extended(costs, {leaf_id[c]: value[c] - tie for c in usable})
        proots = [part.root] if part.root is not None else [r for r in roots if r in red.candidates]
        reduction = Reduction(cand, forced_nodes(sub, cand, proots), red.replacement, {})  # from this part's roots
        cols = [i for ns in cand.values() for i in ns]
        comps = cycle_components(sub, cand) if cycles else []
        levels = level_columns(comps, len(cols))
        program, _ = build_program(sub, price, proots, reduction, cols, None, tie, levels, deadline, cycles)
        start = None if part.root is not None and part.root not in greedy else \
            start_vector(sub, proots, reduction, ChainMap({c: leaf_id[c] for c in usable}, greedy), cols, levels)
        return _Built(part, program, cols, start, price, usable,
                      lambda leaf: not _derivable(sub, cand, proots, leaf), (len(levels), len(comps)))

    def paid(built: _Built, x: np.ndarray) -> float:  # a part's objective (its cut's price above), tie-break included
        return float(sum(built.price[i] + tie for k, i in enumerate(built.cols) if x[k] > 0.5))

    earlier: dict[Any, tuple[_Built, Solution]] = {}  # the parts solved two at a time, by cut
    twins = Twins(view)
    if helper is not None and len(parts) > 1 and all(p.root in greedy for p in parts if p.root is not None):
        assumed: dict[Any, float] = {}

        def built_in_order() -> Iterator[_Built]:
            for part in parts:  # deepest first: a part's leaves are priced already
                check(None, memory_gb)
                done = build(part, assumed)
                assumed[part.root] = paid(done, done.start)
                yield done

        sizes = [sum(len(red.candidates[c]) for c in part.classes) + len(part.leaves) for part in parts]
        for built, sol in _solve_two_at_a_time(built_in_order(), sizes, solve, helper, deadline, budget, twins):
            earlier[built.part.root] = (built, sol)
    value: dict[Any, float] = {}
    low: dict[Any, float] = {}  # a lower bound on that part's optimum
    choice: dict[Any, int] = {c: i for c, i in greedy.items() if c in view.const}
    optimal, clock, nodes, status = True, False, 0, "Optimal"
    cycle_classes = cycle_count = 0
    relaxed: list[tuple[Program, Solution]] = []  # the programs that tried the relaxation, in part order
    for part in parts:
        check(None, memory_gb)
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return SplitAnswer(None, Solution(None, np.inf, -np.inf, False, "time limit", None, True), len(parts))
        found = earlier.get(part.root)
        drop = _price_drop(found, value, tie, leaf_id) if found is not None else None
        if found is not None and drop is not None and len(found[0].usable) == sum(c in value for c in part.leaves):
            built, sol = found  # priced as assumed, or dearer at leaves its optimum reads: still optimal
        else:
            built, drop = build(part, value), 0.0
            sol = twins.answer(built)
            if sol is None:
                sol = solve(built.program, remaining, built.start, budget)
                twins.solved(built, sol)
        if built.program.relaxation:
            relaxed.append((built.program, sol))
        nodes += sol.nodes
        clock |= sol.clock
        cycle_classes, cycle_count = cycle_classes + built.cycles[0], cycle_count + built.cycles[1]
        if sol.x is None and part.root is not None and not sol.clock and "infeasible" in sol.status.lower():
            continue  # no acyclic term below this cut: the part above may not read it
        if sol.x is None:
            return SplitAnswer(None, Solution(None, np.inf, -np.inf, False, sol.status, None, sol.clock, nodes),
                               len(parts))
        picked = [i for k, i in enumerate(built.cols) if sol.x[k] > 0.5]
        value[part.root] = paid(built, sol.x) - drop
        low[part.root] = float(sol.bound) - drop - sum(value[c] - low[c] for c in built.usable)
        if not sol.optimal and optimal:
            optimal, status = False, sol.status
        for i in picked:
            if i < base:
                choice.setdefault(view.nodes[i].eclass, i)
    RELAXATIONS.note(relaxed)
    summary = Solution(None, value[None], low[None], optimal, status, 0.0, clock, nodes)
    return SplitAnswer(choice, summary, len(parts), cycle_classes, cycle_count)


def _price_drop(found: tuple[_Built, Solution], value: dict[Any, float], tie: float,
                leaf_id: dict[Any, int]) -> float | None:
    """How much less the leaves of a part solved two at a time cost than it assumed, where its
    answer is still optimal at the prices found below it (else None: it is solved again).

    Its leaves were priced at what the start pays below them, never less than the optimum found
    there. An optimal answer that reads every leaf whose price dropped stays optimal: it gains
    each drop in full, any other term at most that; its objective and its bound fall by the sum.
    A merge judge's start (the last judge's graph) is no optimum of the e-graph it judges, so
    without this every part above NasRNN's first cell was solved again, one after another."""
    built, sol = found
    at: dict[int, int] | None = None  # a column's position, needed only where a price dropped
    drop = 0.0
    for c in built.usable:
        if c not in value:
            return None
        assumed, now = built.price[leaf_id[c]], value[c] - tie
        if now == assumed:
            continue
        if built.needs(leaf_id[c]):  # every answer pays it: its price moves them all alike
            drop += assumed - now
            continue
        if now > assumed or not sol.optimal or sol.x is None:
            return None
        at = at if at is not None else {i: k for k, i in enumerate(built.cols)}
        if sol.x[at[leaf_id[c]]] < 0.5:
            return None
        drop += assumed - now
    return drop


def _solve_two_at_a_time(builds: Iterator[_Built], sizes: list[int], solve: Solve, helper: PartHelper,
                         deadline: float, budget: int | None, twins: Twins) -> list[tuple[_Built, Solution]]:
    """Every program, as ``builds`` yields them, with its answer, in order. Longest first (by
    ``sizes``: each part's node and leaf columns, known before its program is built; its level
    columns are not counted), each program goes to the side with less work so far, a tie to the
    helper (this process builds them all first); only programs of :data:`HELPER_MIN_COLUMNS` or
    more travel. Each of the helper's is sent as soon as it is built (NasRNN's proof: its first
    cell 0.1 s before the last is built), then this process solves its own and reads the
    helper's answers (solving any that did not come). The sides are planned again at each
    program, from the work the built ones gave each side: a program that is an earlier one's
    relabelled (see :class:`~eqsat.egraph.twins.Twins`) is solved by neither, and its planned share goes to the rest
    (NasRNN's proof: planned with its four cells, its first part and first cell had both gone
    to the helper, 0.2 s one after the other, while this process waited)."""
    built: list[_Built] = []
    out: list[Solution | None] = []
    here: list[int] = []
    sent: list[int] = []
    copies: set[int] = set()  # the twins of earlier programs
    work = {"here": 0, "away": 0}  # of the programs built and kept

    def plan(first: int) -> set[int]:  # the sides of programs first, first + 1, ..., longest first
        planned, away = dict(work), set()
        # one after the first of its size is likely a twin (parts alike are alike in size): it is
        # planned as no work until built, so that a repeated part's first copy goes where it should
        likely = {k for k in range(first + 1, len(sizes)) if sizes[k] in sizes[:k]}
        for k in sorted(set(range(first, len(sizes))) - likely, key=lambda k: (-sizes[k], k)):
            side = "away" if sizes[k] >= HELPER_MIN_COLUMNS and planned["away"] <= planned["here"] else "here"
            planned[side] += sizes[k]
            if side == "away":
                away.add(k)
        return away

    def local(k: int) -> None:
        out[k] = solve(built[k].program, deadline - time.perf_counter(), built[k].start, budget)

    try:
        for k, b in enumerate(builds):
            built.append(b)
            out.append(None)
            if twins.twin(b) is not None:
                copies.add(k)
            elif k in plan(k) and helper.submit(b.program, deadline - time.perf_counter(), b.start, budget):
                sent.append(k)
                work["away"] += sizes[k]
            else:
                here.append(k)
                work["here"] += sizes[k]
        for k in here:
            local(k)
        while sent:
            k = sent[0]
            out[k] = helper.result(max(deadline - time.perf_counter(), 0.0) + 1.0)
            sent.pop(0)
            if out[k] is None:
                local(k)
    except BaseException:  # Ctrl-C, a memory cap: no answer is left behind for a later reader
        for _ in sent:
            helper.result(0.0)
        raise
    for k, sol in enumerate(out):
        if k not in copies:
            twins.solved(built[k], sol)  # type: ignore[arg-type]
    for k in copies:
        out[k] = twins.answer(built[k])
        if out[k] is None:  # its gap at this objective is wider than the solver's
            local(k)
    assert all(sol is not None for sol in out)
    return list(zip(built, out))  # type: ignore[arg-type]


def _derivable(view: EGraphView, cand: dict[Any, list[int]], roots: list[Any], without: int) -> bool:
    """Whether every root has a term (an acyclic one) through ``cand`` that does not use e-node
    ``without``: bottom-up, an e-class is made once one of its nodes has every child e-class made."""
    owner: dict[int, Any] = {}
    readers: dict[Any, list[int]] = {}
    missing: dict[int, int] = {}
    ready: list[int] = []
    for c, ns in cand.items():
        for i in ns:
            if i == without:
                continue
            owner[i], kids = c, view.kids[i]
            missing[i] = len(kids)
            if not kids:
                ready.append(i)
            for d in kids:
                readers.setdefault(d, []).append(i)
    made: set = set()
    while ready:
        c = owner[ready.pop()]
        if c in made:
            continue
        made.add(c)
        for i in readers.get(c, ()):
            missing[i] -= 1
            if not missing[i]:
                ready.append(i)
    return all(r in made for r in roots)
