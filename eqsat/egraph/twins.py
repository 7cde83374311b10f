"""Parts of one exact extraction that state one program: solved once, the answer carried over.

Repeated structure (an RNN's unrolled steps) gives the parts of an extraction (:mod:`.split`)
programs that are one program with its rows and columns in another order (see
:mod:`.canonical`). :class:`Twins` keeps each extraction's programs by form and hands a repeat
the first one's answer, relabelled.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import numpy as np

from eqsat.egraph.canonical import Form, canonical_form, relabel, signature
from eqsat.egraph.solvers import REL_GAP, Program, Solution
from eqsat.egraph.view import EGraphView


class Candidate(Protocol):
    """A part's program and what its columns are: e-node ids, then priced leaves (ids from the
    e-graph's node count on), then columns of no node (levels)."""

    program: Program
    cols: list[int]

    def needs(self, leaf: int) -> bool:
        """Whether every answer picks the priced leaf ``leaf``."""


_LABEL_BITS = (1 << 64) - 1  # ``hash`` differs between processes: forms are compared within one


class Twins:
    """The programs of one extraction's parts by content up to order: a part whose program is an
    earlier one relabelled takes that one's answer, relabelled, without a solve (NasRNN's steps:
    its proof's four cells of 1,421 columns, 0.1 s each, and its judges' alike). A leaf every term
    of a part reads is in every answer, so its price only moves the objective: forms are taken
    with it priced 0, and a carried answer's objective and bound move by the difference (kept
    only where the gap stays within the solver's). Only programs with equal :func:`signature` are
    put in canonical form (1-6 ms each); columns are labelled by their e-node's op, attributes and
    shape, which the costs alone do not tell apart (relu, sigmoid and tanh of one shape cost the same)."""

    def __init__(self, view: EGraphView) -> None:
        self.view, self.base = view, len(view.nodes)  # a column from base on is a priced leaf
        self.groups: dict[bytes, list[Candidate]] = {}  # by signature, each program once
        self.forms: dict[int, Form] = {}  # by id of the program
        self.answers: dict[int, Solution] = {}  # by id of the program
        self.same: dict[int, Candidate] = {}  # a program -> the earlier one it repeats
        self.labels: dict[int, int] = {}  # by e-node
        self.alive: list[Candidate] = []  # every program met: an id is never reused while this lives

    def twin(self, built: Candidate) -> Candidate | None:
        """The earlier program ``built``'s is (relabelled), or None; ``built`` is kept either way."""
        self.alive.append(built)
        group = self.groups.setdefault(signature(self._unpriced(built, every_leaf=True)), [])
        found = None
        if group:
            key = self._form(built).key
            found = next((b for b in group if self._form(b).key == key), None)
        if found is None:
            group.append(built)
        else:
            self.same[id(built.program)] = found
        return found

    def solved(self, built: Candidate, sol: Solution) -> None:
        self.answers[id(built.program)] = sol

    def answer(self, built: Candidate) -> Solution | None:
        """The answer of the program ``built``'s repeats, relabelled (it costs no solver nodes), or
        None (none, or its gap at this program's objective is wider than the solver's)."""
        twin = self.same.get(id(built.program)) or self.twin(built)
        sol = self.answers.get(id(twin.program)) if twin is not None else None
        if sol is None or twin is None:
            return None
        if sol.x is None:
            return replace(sol, nodes=0)
        shift = float(built.program.cost[self._needed(built)].sum() - twin.program.cost[self._needed(twin)].sum())
        objective, bound = sol.objective + shift, sol.bound + shift
        if sol.optimal and objective - bound > REL_GAP * max(abs(objective), 1.0):
            return None
        return replace(sol, x=relabel(sol.x, self._form(twin), self._form(built)), objective=objective,
                       bound=bound, nodes=0)

    def _needed(self, built: Candidate) -> list[int]:
        return [k for k, i in enumerate(built.cols) if i >= self.base and built.needs(i)]

    def _unpriced(self, built: Candidate, every_leaf: bool = False) -> Program:
        """``built``'s program with the leaves every answer reads priced 0 (``every_leaf``: all
        its priced leaves, for a signature that asks no walk)."""
        leaves = [k for k, i in enumerate(built.cols) if i >= self.base] if every_leaf else self._needed(built)
        if not leaves:
            return built.program
        cost = built.program.cost.copy()
        cost[leaves] = 0.0
        return replace(built.program, cost=cost)

    def _form(self, built: Candidate) -> Form:
        form = self.forms.get(id(built.program))
        if form is None:
            labels = np.zeros(built.program.cost.size, dtype=np.uint64)
            known = self.labels
            for i in built.cols:
                if i not in known:
                    known[i] = self._label(i)
            labels[:len(built.cols)] = list(map(known.__getitem__, built.cols))
            form = self.forms[id(built.program)] = canonical_form(self._unpriced(built), labels)
        return form

    def _label(self, i: int) -> int:
        nodes = self.view.nodes
        if i < len(nodes):
            n = nodes[i]
            return hash((n.op, n.attrs, n.sizes, self.view.shapes.get(n.eclass))) & _LABEL_BITS
        return hash("priced leaf") & _LABEL_BITS
