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
    inside one can a choice close a cycle. :func:`strong_components` below :data:`SCIPY_ABOVE`
    e-classes; scipy's above, where importing ``scipy.sparse`` (0.12-0.19 s once per process, a
    quarter of a small model's search in a fresh one) pays: on chains with random back edges
    :func:`strong_components` took 0.005 s at 5,000 e-classes, 0.040 s at 20,000 and 0.093 s at
    50,000 (networkx's 0.013, 0.083 and 0.241 s); scipy 0.002, 0.004 and 0.035 s.
    """
    names = list(cand)
    num = {c: k for k, c in enumerate(names)}
    edges = [(num[c], num[d]) for c, ns in cand.items() for i in ns for d in view.kids[i] if d != c and d in num]
    if not edges:
        return []
    if len(names) <= SCIPY_ABOVE:
        found = [comp for comp in strong_components(len(names), edges) if len(comp) > 1]
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


def strong_components(n: int, edges: list[tuple[int, int]]) -> list[set[int]]:
    """The strongly connected components of the digraph on vertices ``0..n-1`` with ``edges``
    (Tarjan's, one iterative walk over adjacency lists): networkx's DiGraph and views cost twice
    as much on NasRNN's proof (5,800 e-nodes)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: list[set[int]] = []
    count = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = count
        count += 1
        stack.append(root)
        on_stack[root] = True
        walk = [(root, iter(succ[root]))]
        while walk:
            v, it = walk[-1]
            for w in it:
                if index[w] < 0:
                    index[w] = low[w] = count
                    count += 1
                    stack.append(w)
                    on_stack[w] = True
                    walk.append((w, iter(succ[w])))
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                walk.pop()
                if walk and low[v] < low[walk[-1][0]]:
                    low[walk[-1][0]] = low[v]
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        comp.add(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def class_reads(view: EGraphView, cand: dict[Any, list[int]]) -> dict[Any, dict[Any, list[int]]]:
    """Per e-class of ``cand``, each other e-class of ``cand`` its candidates read, with the
    candidates that read it: the short cycles and a program's two-cycle rows are read off it."""
    reads: dict[Any, dict[Any, list[int]]] = {}
    for c, ns in cand.items():
        by = reads[c] = {}
        for i in ns:
            for d in view.kids[i]:
                if d != c and d in cand:
                    by.setdefault(d, []).append(i)
    return reads


def short_cycles(view: EGraphView, cand: dict[Any, list[int]],
                 reads: dict[Any, dict[Any, list[int]]] | None = None) -> list[list[Any]]:
    """Every e-class cycle of length two or three (each once, from its least e-class): cutting
    them up front tightens the relaxation where solvers' answers close most of their cycles.
    ``reads``: :func:`class_reads` of ``cand``, where the caller has it."""
    out = class_reads(view, cand) if reads is None else reads
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
