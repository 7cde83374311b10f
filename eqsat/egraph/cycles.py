"""The e-class cycles exact extraction must rule out: the strongly connected components that get
levels (the ``exact`` formulation) and the short cycles cut up front (``lazy``)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from eqsat.egraph.view import EGraphView


def first_cycle(roots: Iterable[Any], children: Callable[[Any], Iterable[Any]]) -> Any | None:
    """The e-class at which a depth-first walk from ``roots`` along ``children`` (a chosen term's
    child e-classes) first comes back onto its own path, or None: the term is acyclic. One pass,
    iterative (a chain of 100,000 e-classes is no recursion)."""
    state: dict[Any, int] = {}  # 1: on the path, 2: done
    for root in roots:
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            c, leaving = stack.pop()
            if leaving:
                state[c] = 2
                continue
            s = state.get(c)
            if s == 2:
                continue
            if s == 1:
                return c
            state[c] = 1
            stack.append((c, True))
            stack.extend((d, False) for d in children(c) if state.get(d) != 2)
    return None


SCIPY_ABOVE = 20_000  # e-classes past which scipy finds the components (see cycle_components)


def cycle_components(view: EGraphView, cand: dict[Any, list[int]]) -> list[set]:
    """The strongly connected components (of two or more e-classes) of the e-class graph: only
    inside one can a choice close a cycle. networkx's (already loaded for the parts, see
    :mod:`.split`) below :data:`SCIPY_ABOVE` e-classes; scipy's above, where importing
    ``scipy.sparse`` (0.12-0.19 s once per process, a quarter of a small model's search in a fresh
    one) pays: measured on chains with random back edges, networkx took 0.022 s at 5,000 e-classes,
    0.40 s at 50,000 and 2.7 s at 300,000; scipy 0.003, 0.086 and 0.68 s."""
    names = list(cand)
    num = {c: k for k, c in enumerate(names)}
    edges = [(num[c], num[d]) for c, ns in cand.items() for i in ns for d in view.kids[i] if d != c and d in num]
    if not edges:
        return []
    if len(names) <= SCIPY_ABOVE:
        import networkx as nx

        found = [comp for comp in nx.strongly_connected_components(nx.DiGraph(edges)) if len(comp) > 1]
    else:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        src, dst = (np.array(e, dtype=np.int64) for e in zip(*edges))
        graph = coo_matrix((np.ones(src.size), (src, dst)), shape=(len(names), len(names))).tocsr()
        count, label = connected_components(graph, directed=True, connection="strong")
        sizes = np.bincount(label, minlength=count)
        by_label: dict[int, set] = {}
        for k, lab in enumerate(label):
            if sizes[lab] > 1:
                by_label.setdefault(int(lab), set()).add(k)
        found = list(by_label.values())
    return [{names[k] for k in comp} for comp in sorted(found, key=min)]  # in the order of their first e-class


def short_cycles(view: EGraphView, cand: dict[Any, list[int]]) -> list[list[Any]]:
    """Every e-class cycle of length two or three (each once, from its least e-class): cutting
    them up front tightens the relaxation where solvers' answers close most of their cycles."""
    out: dict[Any, set] = {}
    for c, ns in cand.items():
        for i in ns:
            out.setdefault(c, set()).update(d for d in view.kids[i] if d != c and d in cand)
    key = {c: k for k, c in enumerate(cand)}
    cycles: list[list[Any]] = []
    for a, nexts in out.items():
        for b in nexts:
            if key[b] <= key[a]:
                continue
            if a in out.get(b, ()):
                cycles.append([a, b])
            cycles.extend([a, b, c] for c in out.get(b, ()) if key[c] > key[a] and a in out.get(c, ()))
    return cycles
