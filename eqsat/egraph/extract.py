"""Extraction by any cost model, written here (not egglog's extractors).

The e-graph is read from ``EGraph.freeze()``: every constructor row is an
e-node (its e-class, op, attributes and child e-classes), the ``dim``/``rank``
rows give each e-class's shape and the ``const`` rows its weight-only flag. An
e-node is priced by the cost model's ``op_time_us`` from its children's shapes; one
whose children are all weight-only is free (folded).

Two extractors: a DAG-aware greedy one (each e-class keeps the cheapest node
by the cost of the *set* of e-classes below it, so shared subgraphs count
once; settled from a priority queue, so it is order-independent and acyclic)
and the exact ILP of :mod:`.ilp`, started from the greedy answer, which reports
its proved bound and gap.
"""
from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from eqsat.cost.roofline import CostModel
from eqsat.egraph.cycles import first_cycle
from eqsat.egraph.ilp import ILPSettings, ilp_extract
from eqsat.egraph.language import NAMED, REF, Language, split_proj_attrs
from eqsat.egraph.program import OutOfMemory
from eqsat.egraph.view import EGraphView, ENode, selection_cost
from eqsat.errors import EqsatError
from eqsat.ir.graph import Graph, Node, node


class NoTermError(EqsatError, ValueError):
    """An e-graph in which some root e-class has no acyclic term: bad input, not a solver failure."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a moment (then back as it was). Reading and
    extracting an e-graph allocate many small objects and no reference cycles, and each
    collection they set off walks the whole heap: about a tenth of extraction's Python time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_egraph(egraph: Any, lang: Language, ids: dict[Any, int] | None = None,
                refs: dict[int, str] | None = None) -> EGraphView:
    """The frozen e-graph as plain data (e-classes numbered 0, 1, ...; picklable). ``ids``, if
    given, receives egglog's e-class values -> those numbers (to translate other rows' e-classes);
    ``refs`` an e-class's ``(ref K)`` where the runner named a node of it (see ``EGraphRunner._terms``)."""
    with gc_paused():
        return _read_egraph(egraph, lang, ids, refs)


def _read_egraph(egraph: Any, lang: Language, ids: dict[Any, int] | None = None,
                 refs: dict[int, str] | None = None) -> EGraphView:
    frozen = egraph.freeze()
    view = EGraphView()
    ids = {} if ids is None else ids
    known = ids.get
    i64 = egraph.value_to_i64
    nodes = view.nodes
    append, new_node = nodes.append, tuple.__new__

    def cls(v: Any) -> int:  # egglog's e-class value -> its number, numbered as first met
        k = known(v)
        if k is None:
            k = ids[v] = len(ids)
        return k

    dims: dict[int, dict[int, int]] = {}
    named: list[Any] = []  # the ref table's rows: read last, so that they number no e-class
    for name, fn in frozen.functions.items():
        if name == REF:
            named = fn.rows if refs is not None else named
        elif fn.is_let_binding:
            view.lets[name] = cls(fn.rows[0].output)
        elif name == NAMED:  # the runner's names of the outputs it sent
            for r in fn.rows:
                view.lets[egraph.value_to_string(r.inputs[0])] = cls(r.output)
        elif name == "dim":
            for r in fn.rows:
                c, axis = r.inputs
                c = cls(c)
                d = dims.get(c)
                if d is None:
                    d = dims[c] = {}
                d[i64(axis)] = i64(r.output)
        elif name == "const":
            view.const.update(cls(r.inputs[0]) for r in fn.rows)
        elif name == "leaf":
            for r in fn.rows:
                nodes.append(ENode(cls(r.output), "leaf", (), (), (), egraph.value_to_string(r.inputs[0])))
        elif name in lang.ctors:
            c = lang.ctors[name]
            op, attrs, arity = c.op, c.attrs, c.arity
            sized = len(fn.input_sorts) > arity  # sizes after the children (a split's)
            for r in fn.rows:
                if r.subsumed:
                    continue
                inputs = r.inputs
                kids = tuple(map(cls, inputs[:arity] if sized else inputs))  # numbered before the node's own e-class
                out = r.output
                k = known(out)
                if k is None:
                    k = ids[out] = len(ids)
                # tuple.__new__: a named tuple's own __new__ is Python (NasRNN's 7,937 e-nodes: 21 -> 17 ms)
                append(new_node(ENode, (k, op, attrs, kids, tuple(map(i64, inputs[arity:])) if sized else (), "")))
    for i, n in enumerate(nodes):
        view.classes.setdefault(n.eclass, []).append(i)
    for r in named:
        c = known(r.output)
        if c is not None and c not in refs:  # type: ignore[operator]
            refs[c] = f"({REF} {i64(r.inputs[0])})"  # type: ignore[index]
    for c in view.classes:
        d = dims.get(c, {})  # a rank-0 class has no dim rows
        view.shapes[c] = tuple(d[k] for k in sorted(d))
    return view


def node_costs(view: EGraphView, model: CostModel, dtype: str,
               memo: dict[tuple, float] | None = None) -> list[float]:
    """The cost model's price (µs) of every e-node; folded when all its children are weight-only.

    ``memo`` (a dict the caller keeps) holds prices by op, attributes, shapes and which inputs are
    weights: merges by need price the same e-graph, a little larger, several times a run."""
    memo = {} if memo is None else memo
    costs = []
    shape, weight = view.shapes.__getitem__, view.const.__contains__
    for n in view.nodes:
        if n.op in ("leaf", "splitproj"):
            costs.append(0.0)
            continue
        ins = tuple(map(shape, n.children))
        consts = tuple(map(weight, n.children))
        out = shape(n.eclass)
        key = (n.op, n.attrs, ins, out, consts)
        price = memo.get(key)
        if price is None:
            price = memo[key] = model.op_time_us(n.op, dict(n.attrs), ins, (out,), all(consts), dtype, list(consts))
        costs.append(price)
    return costs


# --------------------------------------------------------------------------- greedy (DAG-aware)
def greedy_dag(view: EGraphView, costs: list[float], roots: list[Any], deadline: float | None = None) -> dict[Any, int]:
    """Per e-class, the node whose sub-DAG (a set of e-classes, shared ones once) is cheapest,
    settled cheapest-first from a priority queue (Dijkstra on the e-graph's hypergraph).

    Past ``deadline`` (a ``time.perf_counter()`` value) the rest is settled by tree cost (a node's
    cost plus its children's totals, shared e-classes counted again): no bit sets, so a
    million-node e-graph still ends in seconds, acyclic all the same.

    An e-class is settled once, by its cheapest candidate whose children are all settled, so the
    answer does not depend on the order nodes are stored in, and it is acyclic by construction
    (a node only ever reads e-classes settled before its own). Sub-DAGs are bit sets of e-classes.
    """
    import heapq

    bit = {c: k for k, c in enumerate(view.classes)}
    parents: dict[Any, list[int]] = {}
    waiting = []
    kids_of: list[tuple] = []  # each node's distinct child e-classes, in order
    eclass_of = [n.eclass for n in view.nodes]
    for i, n in enumerate(view.nodes):
        kids = n.children
        if len(kids) > 1 and (len(kids) > 2 or kids[0] == kids[1]):
            kids = tuple(dict.fromkeys(kids))
        kids_of.append(kids)
        waiting.append(len(kids))
        for c in kids:
            at = parents.get(c)
            if at is None:
                parents[c] = [i]
            else:
                at.append(i)
    chosen: dict[Any, int] = {}
    below: dict[Any, int] = {}  # e-class -> bit set of the e-classes of its settled sub-DAG
    total: dict[Any, float] = {}
    price: list[float] = [0.0] * len(bit)  # by bit: the settled node's own cost

    hurry = [deadline is not None and time.perf_counter() > deadline]  # a past deadline: tree cost throughout

    def cost_of(i: int) -> float:
        kids = kids_of[i]
        if hurry[0]:
            return costs[i] + sum(total[c] for c in kids)
        if not kids:
            return costs[i]
        base = max(kids, key=total.__getitem__)
        union = below[base]
        for c in kids:
            union |= below[c]
        extra, t = union & ~below[base], total[base]
        while extra:
            low = extra & -extra
            t += price[low.bit_length() - 1]
            extra ^= low
        return t + costs[i]

    def union_of(i: int) -> int:  # the settled node's sub-DAG: the same set cost_of summed
        union = 1 << bit[eclass_of[i]]
        for c in kids_of[i]:
            union |= below[c]
        return union

    heap = [(costs[i], i) for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(heap)
    pops = 0
    while heap:
        t, i = heapq.heappop(heap)
        pops += 1
        if deadline is not None and not pops & 1023 and not hurry[0] and time.perf_counter() > deadline:
            hurry[0] = True
        c = eclass_of[i]
        if c in chosen:
            continue
        chosen[c], total[c] = i, t
        # recomputed, not kept from the push: a bit set per queued node would not fit
        below[c] = 0 if hurry[0] else union_of(i)
        price[bit[c]] = costs[i]
        for p in parents.get(c, ()):
            waiting[p] -= 1
            if waiting[p] == 0 and eclass_of[p] not in chosen:
                heapq.heappush(heap, (cost_of(p), p))
    missing = [r for r in roots if r not in chosen]
    if missing:
        raise NoTermError(f"no acyclic term exists for {len(missing)} root e-class(es): every node below "
                          f"{'it' if len(missing) == 1 else 'them'} reads a cycle or an e-class without nodes")
    return chosen


# --------------------------------------------------------------------------- back to the IR
def to_graph(
    view: EGraphView, choice: dict[Any, int], roots: list[Any], leaves: dict[str, Node], template: Graph,
    classes: dict[Node, Any] | None = None,
) -> Graph:
    """The IR graph of a choice (memoized per e-class, so the result is a DAG with sharing);
    ``classes``, if given, receives each node's e-class (a split's projections only)."""
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
    if classes is not None:
        classes.update((n, c) for c, n in built.items())
    return Graph(tuple(built[r] for r in roots), template.dtype, template.name)


def lookup_choice(view: EGraphView, graph: Graph, roots: list[Any], base: dict[Any, int]) -> dict[Any, int] | None:
    """``base`` (an acyclic choice of every e-class) with ``graph``'s nodes chosen where it lies in
    the e-graph (egg's ``lookup_expr``): the graph a previous extraction of a smaller version of
    this e-graph found, whose nodes are all still here. None when a node is missing, or when the
    choice it gives is not one acyclic DAG (two of its nodes in one e-class)."""
    index = {(n.op, n.attrs, n.children, n.sizes) if n.op != "leaf" else ("leaf", n.leaf): i
             for i, n in enumerate(view.nodes)}
    found: dict[Node, int] = {}  # graph node -> e-node
    for g in graph.nodes():
        if g.op == "split":
            continue
        if g.is_leaf:
            key: tuple = ("leaf", g.attr("name"))
        elif g.op == "proj":
            sp = g.inputs[0]
            key = ("splitproj", split_proj_attrs(sp.attr("axis"), g.attr("index")),
                   (view.nodes[found[sp.inputs[0]]].eclass,) if sp.inputs[0] in found else None,
                   tuple(sp.attr("sizes")))
        else:
            kids = tuple(view.nodes[found[x]].eclass for x in g.inputs if x in found)
            key = (g.op, g.attrs, kids if len(kids) == len(g.inputs) else None, ())
        if key not in index:
            return None
        found[g] = index[key]
    picked: dict[Any, int] = {}
    for i in found.values():
        c = view.nodes[i].eclass
        if c not in view.const and picked.setdefault(c, i) != i:
            return None  # two of its nodes in one e-class
    if [view.nodes[found[o]].eclass for o in graph.outputs] != list(roots):
        return None
    choice = dict(base)
    choice.update(picked)
    return choice


def check_choice(view: EGraphView, costs: list[float], choice: dict[Any, int], roots: list[Any], cost: float) -> None:
    """Re-check an extractor's answer, independently of how it was found: every e-class the term
    reaches has a chosen node of that e-class, the term is acyclic, and its cost recomputed from
    the term is the reported one. A failure is a bug in an extractor (RuntimeError)."""
    def children(c: Any) -> tuple[Any, ...]:
        i = choice.get(c)
        if i is None or view.nodes[i].eclass != c:
            raise RuntimeError(f"extraction left e-class {c!r} without a node of its own")
        return view.nodes[i].children

    cyclic = first_cycle(roots, children)
    if cyclic is not None:
        raise RuntimeError(f"extraction chose a cyclic term (through e-class {cyclic!r})")
    again = selection_cost(view, costs, choice, roots)
    if abs(again - cost) > 1e-9 * max(1.0, abs(cost)):
        raise RuntimeError(f"extraction reported cost {cost!r}, but its term costs {again!r}")


EXTRACTORS = ("ilp", "greedy")


@dataclass(frozen=True)
class Extraction:
    """An extractor's answer: a node per e-class, its cost, the greedy cost it started from, the
    method that produced it, the ILP's proved lower bound, gap and status, the seconds it took,
    the seconds until the first feasible answer (the greedy one), and the ILP's problem sizes."""

    choice: dict[Any, int]
    cost: float
    greedy_cost: float
    method: str
    gap: float | None  # None: no ILP answer (greedy only)
    status: str
    seconds: float
    bound: float | None = None
    first_incumbent_s: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)
    optimal: bool = False  # the solver proved it optimal on the whole e-graph (within solvers.REL_GAP)
    clock: str = ""  # what the clock cut short ("": the answer is the same on a busy machine)
    greedy: dict[Any, int] | None = field(default=None, repr=False)  # the greedy choice it started from

    @property
    def exact(self) -> bool:
        """The answer is the method's own, not cut short: greedy, or the ILP proved optimal."""
        return self.method == "greedy" and self.status == "not run" or self.optimal


def extract(view: EGraphView, costs: list[float], roots: list[Any], extractor: str = "ilp",
            seconds: float = 60.0, settings: ILPSettings | None = None, hint: Graph | None = None,
            greedy: dict[Any, int] | None = None) -> Extraction:
    """The greedy choice, improved by the exact ILP (started from the greedy choice, which stays
    the upper bound) with ``extractor="ilp"``; the ILP's answer is kept only when no worse.

    ``hint``: a graph known to lie in this e-graph (the answer of an earlier extraction of a part
    of it); where it is cheaper than the greedy choice, the ILP starts from it instead. On
    Inception-v3's last merge round that is the optimum itself, and HiGHS need only prove it.
    ``greedy``: the greedy choice of this very e-graph and costs, found already (an earlier
    extraction's :attr:`Extraction.greedy` that no clock cut short)."""
    with gc_paused():
        return _extract(view, costs, roots, extractor, seconds, settings, hint, greedy)


def _extract(view: EGraphView, costs: list[float], roots: list[Any], extractor: str, seconds: float,
             settings: ILPSettings | None, hint: Graph | None, known: dict[Any, int] | None) -> Extraction:
    if extractor not in EXTRACTORS:
        raise ValueError(f"unknown extractor {extractor!r}; choose ilp or greedy")
    start = time.perf_counter()
    # the greedy gets a third of the time; the rest: tree cost, the check, the ILP
    choice = known if known is not None else greedy_dag(view, costs, roots, start + seconds / 3)
    greedy = selection_cost(view, costs, choice, roots)
    greedy_s = time.perf_counter() - start
    hurried = "the greedy extraction's deadline" if greedy_s > seconds / 3 else ""  # it may have settled by tree cost
    if extractor == "greedy":
        check_choice(view, costs, choice, roots, greedy)
        return Extraction(choice, greedy, greedy, "greedy", None, "not run", greedy_s, first_incumbent_s=greedy_s,
                          clock=hurried, greedy=choice)
    first, first_cost = choice, greedy
    hinted = lookup_choice(view, hint, roots, choice) if hint is not None else None
    if hinted is not None and (hinted_cost := selection_cost(view, costs, hinted, roots)) < greedy:
        first, first_cost = hinted, hinted_cost
    left = seconds - (time.perf_counter() - start)
    stopped = ""
    try:
        ilp = ilp_extract(view, costs, roots, first, first_cost, settings or ILPSettings(), left) if left > 0 else None
    except OutOfMemory as exc:  # past the memory cap: the best answer so far is the start
        ilp, stopped = None, str(exc)
    seconds_taken = time.perf_counter() - start
    if ilp is None or ilp.cost > first_cost + 1e-9:
        status = stopped or ("no solution within the time limit" if ilp is None else "worse than its start")
        method = "greedy" if first is choice else "hint"
        check_choice(view, costs, first, roots, first_cost)
        clock = hurried or ("" if stopped or ilp is not None else "the extraction's time limit")
        return Extraction(first, first_cost, greedy, method, None, status, seconds_taken,
                          first_incumbent_s=greedy_s, clock=clock or (ilp.clock if ilp is not None else ""),
                          greedy=choice)
    check_choice(view, costs, ilp.choice, roots, ilp.cost)
    return Extraction(ilp.choice, ilp.cost, greedy, "ilp", ilp.gap, ilp.status, seconds_taken, ilp.bound,
                      greedy_s, ilp.stats, ilp.optimal, hurried or ilp.clock, greedy=choice)
