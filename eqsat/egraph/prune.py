"""Bound pruning before an exact extraction (e-boost's idea, with bounds that stay valid on cycles).

Any acyclic term that picks e-node ``i`` of e-class ``c`` costs at least
``above[c] + cost[i] + max(below[d] for d in i's children)``: ``above[c]`` is the cheapest path of
picked nodes from a root down to ``c`` (those nodes are ancestors of ``c``, so none lies below it
in an acyclic term), and ``below[d]`` is the cheapest *chain* below ``d`` (a lower bound on its
sub-DAG, whatever is shared). An e-node whose bound exceeds a known term's cost (the greedy or
the cycle filter's answer) is in no cheaper term, so dropping it loses no optimum. On TENSAT's
BERT e-graph, whose costly batched matmuls no cheap term can afford, this drops most e-nodes; on
VGG's the roots' chain bound alone proves the greedy term optimal. Costs are >= 0 (the readers
check), as the cheapest-first settling needs.
"""
from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eqsat.egraph.view import EGraphView

SLACK = 1e-9  # relative: a node whose bound ties the known cost stays (the known term's own nodes do)


class _Late(Exception):
    """The deadline passed in the middle of a pass."""


def _tick(n: int, deadline: float | None) -> None:
    if deadline is not None and not n & 4095 and time.perf_counter() > deadline:
        raise _Late


def chain_below(view: EGraphView, costs: list[float], cand: dict[Any, list[int]],
                deadline: float | None = None) -> dict[Any, float]:
    """Per e-class, a lower bound on any acyclic sub-DAG below it (absent: it has no acyclic
    term): the cheapest node's cost plus its dearest child's bound, settled cheapest-first."""
    waiting: dict[int, int] = {}
    parents: dict[Any, list[int]] = {}
    heap: list[tuple[float, int]] = []
    all_kids = view.kids
    for ns in cand.values():
        for i in ns:
            ks = all_kids[i]
            kids = [d for d in ks if d in cand]
            if len(kids) != len(ks):
                continue  # reads an e-class with no candidate: never picked
            waiting[i] = len(kids)
            for d in kids:
                parents.setdefault(d, []).append(i)
            if not kids:
                heap.append((costs[i], i))
    heapq.heapify(heap)
    below: dict[Any, float] = {}
    nodes = view.nodes
    pops = 0
    while heap:
        pops += 1
        _tick(pops, deadline)
        t, i = heapq.heappop(heap)
        c = nodes[i].eclass
        if c in below:
            continue
        below[c] = t
        for p in parents.get(c, ()):
            waiting[p] -= 1
            if waiting[p] == 0 and nodes[p].eclass not in below:
                heapq.heappush(heap, (costs[p] + max([below[d] for d in all_kids[p]]), p))
    return below


def path_above(view: EGraphView, costs: list[float], cand: dict[Any, list[int]],
               roots: Iterable[Any], deadline: float | None = None) -> dict[Any, float]:
    """Per e-class, the cheapest sum of node costs on a path from a root down to it (Dijkstra)."""
    above: dict[Any, float] = {}
    heap = [(0.0, r) for r in roots if r in cand]
    pops = 0
    while heap:
        pops += 1
        _tick(pops, deadline)
        t, c = heapq.heappop(heap)
        if c in above:
            continue
        above[c] = t
        for i in cand[c]:
            for d in view.kids[i]:
                if d in cand and d not in above:
                    heapq.heappush(heap, (t + costs[i], d))
    return above


@dataclass(frozen=True)
class Pruned:
    """The e-nodes no term costing at most the known cost can pick, and a lower bound on every
    acyclic term (the roots' chain bound once they are gone: the optimum is among what is left)."""

    removed: frozenset[int]
    bound: float


def prune(view: EGraphView, costs: list[float], roots: list[Any], cand: dict[Any, list[int]],
          upper: float, deadline: float | None = None) -> Pruned:
    """The e-nodes of ``cand`` that no acyclic term costing at most ``upper`` can pick (repeated
    until nothing more drops, since each drop can raise the others' bounds). Past ``deadline``
    (``time.perf_counter()``) it returns what it has dropped so far, each drop valid on its own."""
    cand = {c: list(ns) for c, ns in cand.items()}
    limit = upper + SLACK * max(abs(upper), 1.0)
    removed: set[int] = set()
    bound = -math.inf
    while True:
        try:
            below = chain_below(view, costs, cand, deadline)
            above = path_above(view, costs, cand, roots, deadline)
        except _Late:
            return Pruned(frozenset(removed), bound)
        bound = max((below.get(r, -math.inf) for r in roots if r in cand), default=0.0)
        dropped = False
        all_kids = view.kids
        for c, ns in cand.items():
            a = above.get(c)
            if a is None:  # no path from a root: none of its nodes is picked
                removed.update(ns)
                dropped = dropped or bool(ns)
                cand[c] = []
                continue
            keep = []
            for i in ns:
                kids = all_kids[i]
                if kids:
                    chain = [below.get(d) for d in kids]
                    ok = None not in chain and a + costs[i] + max(chain) <= limit
                else:
                    ok = a + costs[i] + 0.0 <= limit
                if ok:
                    keep.append(i)
                else:
                    removed.add(i)
                    dropped = True
            cand[c] = keep
        if not dropped:
            return Pruned(frozenset(removed), bound)
        cand = {c: ns for c, ns in cand.items() if ns}
