"""The exact extractor's 0/1 program, as data: its rows, level columns, warm start and cycle cuts.

Shared by the whole-e-graph program (:mod:`.ilp`) and its parts (:mod:`.split`): one binary per
candidate e-node, level columns for the e-classes of each cycle component (see :mod:`.ilp`), and
the rows of :func:`need_rows`, which make its linear relaxation tight where alternatives meet again,
and of :func:`two_cycle_rows`, where a pair of e-classes read each other.
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from eqsat.egraph.cycles import class_reads, short_cycles
from eqsat.egraph.limits import over_cap
from eqsat.egraph.solvers import RELAXATIONS, Program, Rows
from eqsat.egraph.view import EGraphView

Row = tuple[list[tuple[int, float]], float, float]  # a constraint: (column, coefficient) pairs, lower, upper


class OutOfTime(Exception):
    """The time limit passed while the program was being built (a million-node e-graph)."""


class OutOfMemory(Exception):
    """Past ``ILPSettings.memory_gb`` while building or solving; the message is the stop reason."""


def check(deadline: float | None, memory_gb: float = math.inf) -> None:
    """Raise :class:`OutOfTime` past ``deadline``, :class:`OutOfMemory` past ``memory_gb``."""
    if deadline is not None and time.perf_counter() > deadline:
        raise OutOfTime
    if memory_gb < math.inf and (over := over_cap(memory_gb)):
        raise OutOfMemory(over)


@dataclass(frozen=True)
class Reduction:
    """The candidates left per reachable (non-weight-only) e-class, the nodes every solution
    uses, a no-worse kept replacement for each dominated node, and sizes before and after."""

    candidates: dict[Any, list[int]]
    forced: frozenset[int]
    replacement: dict[int, int]
    stats: dict[str, int]


def forced_nodes(view: EGraphView, cand: dict[Any, list[int]], roots: list[Any]) -> frozenset[int]:
    """The e-nodes every answer picks: from the roots down, each e-class's only candidate. A part
    of the exact program (:mod:`.split`) finds its own from its root, so parts alike fix the same."""
    forced: set[int] = set()
    stack = [r for r in roots if len(cand.get(r, ())) == 1]
    while stack:
        i = cand[stack.pop()][0]
        if i not in forced:
            forced.add(i)
            stack.extend(d for d in view.kids[i] if len(cand.get(d, ())) == 1)
    return frozenset(forced)


def build_program(view: EGraphView, costs: list[float], roots: list[Any], red: Reduction, cols: list[int],
                  cutoff: float | None, tie: float, levels: dict[Any, tuple[int, int, int]],
                  deadline: float | None = None, cycles: bool = True) -> tuple[Program, list]:
    """The 0/1 program over ``cols`` (then one level column per e-class in ``levels``, see
    :func:`level_columns`); its rows are returned as lists too, so cycle cuts can be appended.
    ``cycles=False``: the candidates close no cycle (the cycle filter cut them), none is looked for."""
    col = {i: k for k, i in enumerate(cols)}
    rows: list[Row] = []
    for r in roots:
        if r in red.candidates:
            rows.append(([(col[i], 1.0) for i in red.candidates[r]], 1.0, np.inf))
    ones: dict[Any, list[tuple[int, float]]] = {}  # an e-class's candidates, each with coefficient 1
    for n, (c, ns) in enumerate(red.candidates.items()):
        if not n & 4095:
            check(deadline)
        if len(ns) > 1:
            rows.append((ones.get(c) or ones.setdefault(c, [(col[i], 1.0) for i in ns]), -np.inf, 1.0))
        for i in ns:
            for d in view.kids[i]:
                has = ones.get(d)
                if has is None:
                    has = ones[d] = [(col[j], 1.0) for j in red.candidates[d]]
                rows.append((has + [(col[i], -1.0)], 0.0, np.inf))
    for c, (lc, size, comp) in levels.items():  # level[c] - level[d] - size * (c's nodes reading d) >= 1 - size
        readers: dict[Any, list[int]] = {}
        for i in red.candidates[c]:
            for d in view.kids[i]:
                if d in levels and levels[d][2] == comp and d != c:
                    readers.setdefault(d, []).append(col[i])
        for d, ks in readers.items():
            rows.append(([(lc, 1.0), (levels[d][0], -1.0)] + [(k, -float(size)) for k in ks], 1.0 - size, np.inf))
    # the need rows serve the relaxation (solve_highs); past the cap their bit sets cost more than they save
    cap = min(NEED_ROWS_MAX_CLASSES, NEED_ROWS_MAX_CYCLIC) if levels else NEED_ROWS_MAX_CLASSES
    relaxation = len(red.candidates) <= cap and RELAXATIONS.worth_trying(bool(levels))
    reads = class_reads(view, red.candidates) if cycles else None  # the pairs and triples that read each other
    if relaxation:
        rows.extend(need_rows(view, red.candidates, col, deadline))
        if levels:
            rows.extend(two_cycle_rows(red.candidates, col, reads))
    for cycle in short_cycles(view, red.candidates, reads) if cycles else ():  # the commonest (an op and its inverse)
        rows.append(cycle_cut(view, col, cycle))
    n = len(cols) + len(levels)
    cost = np.zeros(n)
    cost[:len(cols)] = [costs[i] + tie for i in cols]
    if cutoff is not None:  # keep the greedy bound when the solver cannot start from it
        rows.append(([(k, float(cost[k])) for k in range(len(cols))], -np.inf, cutoff))
    fixed = np.zeros(n, dtype=bool)
    fixed[:len(cols)] = [i in red.forced for i in cols]
    upper, integral = np.ones(n), np.ones(n, dtype=bool)
    for lc, size, _ in levels.values():
        upper[lc], integral[lc] = size - 1, False
    return as_program(rows, cost, fixed, upper if levels else None, integral if levels else None, relaxation), rows


NEED_ROWS_MAX_CLASSES = 20_000  # a program of more e-classes gets no need rows (0: none gets them)
# a program with cycles (levels) of more gets none: _needs may take its worklist's budget and a
# second pass (random 5,000-class e-graphs with back edges: 0.16 s; 20,000: 1.2 s)
NEED_ROWS_MAX_CYCLIC = 5_000


def need_rows(view: EGraphView, cand: dict[Any, list[int]], col: dict[int, int],
              deadline: float | None = None) -> list[Row]:
    """Rows ``sum(class e) - sum(class c) >= 0`` for each e-class ``c`` of several candidates and
    each e-class ``e`` that every candidate of ``c`` needs (itself, or through the e-classes below
    it that all their candidates need): valid for every answer, since a picked node's children are
    picked. The program's own rows say it per node only (``x_i <= sum(child class)``), so its
    linear relaxation splits a class's weight between alternatives whose paths meet again below
    and pays the class they meet at once for both halves: BERT's first judge's relaxation was 42
    against an optimum of 282, NasRNN's judges' a half. With these rows NasRNN's judge programs
    have integral relaxations. Only the nearest such ``e`` are stated (one needed through another
    follows by the chain). What a class needs is :func:`_needs`, over cycles too."""
    classes = list(cand)
    needs = _needs(view, cand, deadline)
    rows: list[Row] = []
    for c, ns in cand.items():
        need = needs[c]
        if len(ns) < 2 or not need:
            continue
        through = 0
        for e in _bits(need):
            through |= needs[classes[e]]
        own = [(col[i], -1.0) for i in ns]
        for e in _bits(need & ~through):
            rows.append(([(col[j], 1.0) for j in cand[classes[e]]] + own, 0.0, np.inf))
    return rows


def _needs(view: EGraphView, cand: dict[Any, list[int]], deadline: float | None = None) -> dict[Any, int]:
    """By e-class, the bits (in ``cand``'s order) of the e-classes every term of it reads: the
    greatest solution of ``needs(c) = AND over c's candidates of OR over their child classes d of
    (d and needs(d))``. Any solution holds for every finite term, by induction on its height, so
    the greatest is the most it may claim. Walked children first, one pass finds it where no class
    reads one met later (no cycle); in a cycle the class met later is guessed to need every class,
    and the guesses come down by a worklist: a class whose need fell sends its readers to be
    taken again (NasRNN's proof cells: 7 whole passes before). Past :data:`NEEDS_WORKLIST` times
    the classes in recomputations (a giant cycle component), the guesses, too high to state, are
    dropped for one pass that guesses "none" (less than the greatest, still true). A class of no
    candidates is taken to need none."""
    bit = {c: 1 << k for k, c in enumerate(cand)}
    every_class = (1 << len(cand)) - 1
    needs: dict[Any, int] = {}
    guessed: list[Any] = []

    def need_of(c: Any, guess: int) -> int:
        every = -1
        for i in cand[c]:
            one = 0
            for d in view.kids[i]:
                if d in bit:
                    below = needs.get(d)
                    if below is None:  # met later: a cycle
                        below = guess
                        if not guessed or guessed[-1] != c:
                            guessed.append(c)
                    one |= bit[d] | below
            every &= one
            if not every:
                break
        return every & ~bit[c] if every != -1 else 0

    order = _children_first(view, cand)
    for n, c in enumerate(order):
        if not n & 4095:
            check(deadline)
        needs[c] = need_of(c, every_class)
    if not guessed:
        return needs
    readers: dict[Any, set] = {}
    for c, ns in cand.items():
        for i in ns:
            for d in view.kids[i]:
                if d in bit:
                    readers.setdefault(d, set()).add(c)
    todo, queued = deque(guessed), set(guessed)
    budget = NEEDS_WORKLIST * len(cand)
    while todo:
        budget -= 1
        if budget < 0:  # the guesses would take too long to bring down: one pass that guesses none
            needs.clear()
            for n, c in enumerate(order):
                if not n & 4095:
                    check(deadline)
                needs[c] = need_of(c, 0)
            return needs
        if not budget & 4095:
            check(deadline)
        c = todo.popleft()
        queued.discard(c)
        now = need_of(c, every_class)
        if now != needs[c]:
            needs[c] = now
            for r in readers.get(c, ()):
                if r not in queued:
                    queued.add(r)
                    todo.append(r)
    return needs


NEEDS_WORKLIST = 2  # _needs recomputes at most this many times the classes before it guesses "none"


def two_cycle_rows(cand: dict[Any, list[int]], col: dict[int, int],
                   reads: dict[Any, dict[Any, list[int]]]) -> list[Row]:
    """Rows ``sum(d's candidates not reading c) - sum(c's candidates reading d) >= 0`` for each
    pair of e-classes whose candidates read each other (an op and its inverse, a concat and its
    split; ``reads``: :func:`~eqsat.egraph.cycles.class_reads` of ``cand``): where c's pick reads
    d, d's pick may not read c back. The program's own rows let the linear relaxation pay half of
    each, the two halves carrying each other: NasRNN's proof cell read 128 against an optimum of
    252, with these rows and the need rows 251.81, the optimum."""
    rows: list[Row] = []
    for c, by in reads.items():
        for d, ks in by.items():
            back = reads[d].get(c)
            if back:
                skip = set(back)
                rows.append(([(col[j], 1.0) for j in cand[d] if j not in skip] + [(col[i], -1.0) for i in ks],
                             0.0, np.inf))
    return rows


def _children_first(view: EGraphView, cand: dict[Any, list[int]]) -> list[Any]:
    """The e-classes of ``cand``, each after the e-classes its candidates read (a depth-first
    post-order; in a cycle, the class that closes it comes first)."""
    order: list[Any] = []
    seen: set[Any] = set()
    for top in cand:
        if top in seen:
            continue
        seen.add(top)
        stack = [(top, iter([d for i in cand[top] for d in view.kids[i]]))]
        while stack:
            c, below = stack[-1]
            for d in below:
                if d in cand and d not in seen:
                    seen.add(d)
                    stack.append((d, iter([e for i in cand[d] for e in view.kids[i]])))
                    break
            else:
                stack.pop()
                order.append(c)
    return order


def _bits(n: int) -> list[int]:
    """The positions of the set bits of ``n``."""
    out = []
    while n:
        low = n & -n
        out.append(low.bit_length() - 1)
        n ^= low
    return out


def level_columns(components: list[set], first: int) -> dict[Any, tuple[int, int, int]]:
    """Per e-class in a component: its level column (numbered from ``first``), the component's size
    and the component's number."""
    out: dict[Any, tuple[int, int, int]] = {}
    for k, comp in enumerate(components):
        for c in sorted(comp, key=repr):
            out[c] = (first + len(out), len(comp), k)
    return out


def as_program(rows: list, cost: np.ndarray, fixed: np.ndarray, col_upper: np.ndarray | None = None,
               integral: np.ndarray | None = None, relaxation: bool = False) -> Program:
    indptr = np.cumsum([0] + [len(r[0]) for r in rows]).astype(np.int32)
    flat = [e for r in rows for e in r[0]]
    indices = np.array([k for k, _ in flat], dtype=np.int32)
    data = np.array([v for _, v in flat], dtype=float)
    matrix = Rows(indptr, indices, data, (len(rows), cost.size))
    return Program(cost, matrix, np.array([r[1] for r in rows], dtype=float),
                   np.array([r[2] for r in rows], dtype=float), fixed, col_upper, integral, relaxation)


def start_vector(view: EGraphView, roots: list[Any], red: Reduction, choice: dict[Any, int], cols: list[int],
                 levels: dict[Any, tuple[int, int, int]]) -> np.ndarray:
    """An acyclic choice (the greedy one) as a starting point, dominated picks swapped for their
    replacements, each level one above the highest level its picked node reads in its component."""
    def pick(c: Any) -> int:
        i = choice[c]
        while i in red.replacement:
            i = red.replacement[i]
        return i

    picked: dict[Any, int] = {}
    order: list[Any] = []  # children before parents
    stack: list[tuple[Any, bool]] = [(r, False) for r in roots if r in red.candidates]
    while stack:
        c, done = stack.pop()
        if done:
            order.append(c)
        elif c not in picked:
            picked[c] = pick(c)
            stack.append((c, True))
            stack.extend((d, False) for d in view.kids[picked[c]] if d not in picked)
    x = np.zeros(len(cols) + len(levels))
    chosen = set(picked.values())
    x[:len(cols)] = [1.0 if i in chosen else 0.0 for i in cols]
    height: dict[Any, int] = {}
    for c in order:
        if c in levels:
            below = [height.get(d, 0) + 1 for d in view.kids[picked[c]] if d in levels and levels[d][2] == levels[c][2]]
            height[c] = max(below, default=0)
            x[levels[c][0]] = height[c]
    return x


def cycle_cut(view: EGraphView, col: dict[int, int], classes: list[Any]) -> Row:
    """At most k-1 of the k edges of an e-class cycle may be used, by whichever nodes."""
    coefs: dict[int, float] = {}
    for c, d in zip(classes, classes[1:] + classes[:1]):
        for j in view.classes[c]:
            if j in col and d in view.nodes[j].children:
                coefs[col[j]] = 1.0
    return list(coefs.items()), -np.inf, len(classes) - 1.0
