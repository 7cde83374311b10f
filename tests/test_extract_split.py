"""The exact extraction in parts (eqsat/egraph/split.py) finds the whole program's optimum:
on random chains of sub-e-graphs joined at single e-classes (cycles inside them), and where the
part above a cut is cheaper avoiding it (a cut read for free would be wrongly paid for)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_extract import _has_term, make_view

from eqsat.egraph import ilp, split, twins
from eqsat.egraph import program as prog
from eqsat.egraph.extract import check_choice, greedy_dag
from eqsat.egraph.ilp import ILPSettings, find_cycles, ilp_extract
from eqsat.egraph.view import EGraphView, selection_cost


@st.composite
def chains(draw: st.DrawFn) -> tuple[EGraphView, list[float], list[int]]:
    """2-4 blocks of 1-3 new e-classes; a block's nodes read its own e-classes (cycles too) and the
    last e-class of the block below, its only way down; e-class 0 is a leaf, and now and then a
    block's e-class has a leaf too (a way to avoid what is below)."""
    spec: list[tuple[int, tuple[int, ...]]] = [(0, ())]
    below, fresh = 0, 1
    for _ in range(draw(st.integers(2, 4))):
        block = list(range(fresh, fresh + draw(st.integers(1, 3))))
        fresh += len(block)
        for c in block:
            for _ in range(draw(st.integers(1, 3))):
                spec.append((c, tuple(draw(st.lists(st.sampled_from([below, *block]), min_size=1, max_size=2)))))
            if draw(st.integers(0, 4)) == 0:
                spec.append((c, ()))
        below = block[-1]
    view = make_view(spec)
    costs = [draw(st.sampled_from([0.0, 1.0, 2.0, 3.5, 5.0, 9.0])) for _ in view.nodes]
    return view, costs, [below]


def _solve(view: EGraphView, costs: list[float], roots: list[int], parts: bool, **kw: object) -> ilp.ILPResult:
    greedy = greedy_dag(view, costs, roots)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(split, "MIN_PART", 1)  # every cut splits, however small its part
        if not parts:
            mp.setattr(ilp, "split_parts", lambda *a, **k: [])
        result = ilp_extract(view, costs, roots, greedy, selection_cost(view, costs, greedy, roots),
                             ILPSettings(**kw), 20)
    assert result is not None
    check_choice(view, costs, result.choice, roots, result.cost)
    return result


@settings(max_examples=120, deadline=None)
@given(chains(), st.booleans())
def test_the_parts_find_the_whole_programs_optimum(case: tuple, pruned: bool) -> None:
    view, costs, roots = case
    assume(_has_term(view, costs, roots))
    whole = _solve(view, costs, roots, parts=False, prune=pruned)
    parts = _solve(view, costs, roots, parts=True, prune=pruned)
    assert whole.optimal and parts.optimal
    assert parts.cost == pytest.approx(whole.cost, abs=1e-6)
    assert parts.bound is not None and parts.bound <= whole.cost + 1e-6, "the parts' bound is a lower bound"
    assert not find_cycles(view, parts.choice, roots)


def _cyclic_chain() -> tuple[EGraphView, list[float]]:
    """Three blocks, each an e-class pair that reads itself both ways (a cycle) and the block below."""
    spec = [(0, ())]
    for b in range(3):
        x, y, below = 2 * b + 1, 2 * b + 2, 2 * b
        spec += [(x, (below,)), (x, (y,)), (y, (x,)), (y, (below, x))]
    return make_view(spec), [0.0] + [4.0, 1.0, 0.0, 2.0] * 3


def test_a_chain_with_cycles_splits_at_each_join_and_keeps_the_optimum() -> None:
    view, costs = _cyclic_chain()
    cand = {c: list(ns) for c, ns in view.classes.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(split, "MIN_PART", 1)
        parts = split.split_parts(view, cand, [6])
    assert [p.root for p in parts] == [2, 4, None]  # deepest first; each join is a cut (the leaf 0 joins nothing)
    assert [p.leaves for p in parts] == [(), (2,), (4,)]
    whole = _solve(view, costs, [6], parts=False, prune=False)
    cut = _solve(view, costs, [6], parts=True, prune=False)
    assert cut.stats["split_parts"] == 3 and "split_parts" not in whole.stats
    assert cut.optimal and cut.cost == pytest.approx(whole.cost) == pytest.approx(3 * 4.0)
    # in parts, the whole's components are not found; the parts' own add up to them (a pair a block)
    assert (cut.stats["cycle_classes"], cut.stats["cycle_components"]) == \
        (whole.stats["cycle_classes"], whole.stats["cycle_components"]) == (6, 3)


def test_a_part_that_avoids_its_cut_pays_nothing_for_what_is_below() -> None:
    # R: r1 (1) reads C, r2 (2) a leaf; C costs 10 below it (its own part). Read for free, C makes
    # r1 the part's optimum (1 < 2) and the sum 11; priced at 10, r2 wins: 2, the whole optimum.
    view = make_view([(0, ()), (1, (0,)), (2, (1,)), (3, (2,)), (3, ())])
    costs = [0.0, 6.0, 4.0, 1.0, 2.0]
    whole = _solve(view, costs, [3], parts=False, prune=False)
    cut = _solve(view, costs, [3], parts=True, prune=False)
    assert cut.stats["split_parts"] >= 2
    assert whole.cost == cut.cost == 2.0 and cut.optimal and cut.choice[3] == 4


def test_small_parts_join_the_part_above() -> None:
    view = make_view([(0, ()), (1, (0,)), (2, (1,)), (3, (2,))])
    cand = {c: list(ns) for c, ns in view.classes.items()}
    assert split.split_parts(view, cand, [3]) == []  # default: parts of fewer than 64 e-classes do not split
    assert [p.root for p in split.split_parts(view, cand, [3], min_part=1)] == [1, 2, None]


def test_a_cut_with_no_acyclic_term_below_it_is_not_read() -> None:
    # R: r1 (0) reads C, r2 (3) a leaf; C and E only read each other (no acyclic term): C's part is
    # infeasible, so the part above may not read C, and r2 is the answer, as in the whole program.
    view = make_view([(0, ()), (1, (2,)), (2, (1,)), (3, (1,)), (3, ())])
    costs = [0.0, 1.0, 1.0, 0.0, 3.0]
    whole = _solve(view, costs, [3], parts=False, prune=False)
    cut = _solve(view, costs, [3], parts=True, prune=False)
    assert cut.stats["split_parts"] == 2
    assert whole.cost == cut.cost == 3.0 and cut.optimal and cut.choice[3] == 4


class _InlineHelper:
    """A PartHelper in this process: solves the programs it was sent when their answers are asked
    for, in order; with ``fail`` it gives no answer for every other one (the caller solves it)."""

    def __init__(self, fail: bool) -> None:
        self.jobs: list[tuple] = []
        self.fail, self.submitted = fail, 0

    def submit(self, program, seconds, start, nodes) -> bool:  # noqa: ANN001
        self.jobs.append((program, seconds, start, nodes))
        self.submitted += 1
        return True

    def result(self, seconds: float):  # noqa: ANN201
        from eqsat.egraph.solvers import get_solver

        job = self.jobs.pop(0)
        return None if self.fail and len(self.jobs) % 2 else get_solver("highs").solve(*job)


@settings(max_examples=60, deadline=None)
@given(chains(), st.booleans())
def test_parts_solved_two_at_a_time_give_the_same_answer(case: tuple, fail: bool) -> None:
    """With a helper the cuts are priced first at what the start pays below them and the parts
    solved two at a time; where a part's optimum is not its start's, a part above that does not
    read it at that price is solved again: the answer is the in-order one, choice and bound included
    (the bound to rounding)."""
    view, costs, roots = case
    assume(_has_term(view, costs, roots))
    helper = _InlineHelper(fail)
    alone = _solve(view, costs, roots, parts=True, prune=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(split, "HELPER_MIN_COLUMNS", 0)  # tiny programs go to the helper too
        paired = _solve(view, costs, roots, parts=True, prune=False, helper=helper)
    assert (paired.choice, paired.cost, paired.status) == (alone.choice, alone.cost, alone.status)
    assert paired.bound == pytest.approx(alone.bound, rel=1e-12)  # a kept answer's bound less its leaves' drop


@pytest.mark.parametrize("fail", [False, True])
def test_a_chain_of_parts_is_solved_two_at_a_time(fail: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    view, costs = _cyclic_chain()
    helper = _InlineHelper(fail)
    alone = _solve(view, costs, [6], parts=True, prune=False)
    small = _solve(view, costs, [6], parts=True, prune=False, helper=helper)
    assert (small.choice, small.cost) == (alone.choice, alone.cost) and helper.submitted == 0
    monkeypatch.setattr(split, "HELPER_MIN_COLUMNS", 0)  # a small program is solved here, unless told
    paired = _solve(view, costs, [6], parts=True, prune=False, helper=helper)
    assert helper.submitted >= 1 and paired.stats["split_parts"] == 3
    assert (paired.choice, paired.cost, paired.bound) == (alone.choice, alone.cost, alone.bound)


@pytest.mark.parametrize("acyclic", ["filter", "exact"])
def test_a_start_dearer_than_the_optimum_is_solved_two_at_a_time_once(acyclic: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge judge starts from the last judge's graph, no optimum of the e-graph it judges, so
    each cut is priced above the optimum found below it. A part's answer that reads its cut stays
    optimal at the lower price and is kept: each part is solved once, and the cost, choice and
    bound are those of the parts solved in order."""
    from eqsat.egraph import solvers

    # 0 a leaf; e-classes 1-3 each a cheap (1) node reading the e-class below and a leaf of its
    # own (e-classes 11-13: no node dominates the other) and a dear (5) one reading the one below
    spec = [(0, ())]
    for b in (1, 2, 3):
        spec += [(10 + b, ()), (b, (b - 1, 10 + b)), (b, (b - 1,))]
    view = make_view(spec)
    costs = [0.0] + [0.0, 1.0, 5.0] * 3
    dear = {0: 0, 11: 1, 1: 3, 12: 4, 2: 6, 13: 7, 3: 9}
    runs: list[int] = []
    real = solvers._highs_run
    monkeypatch.setattr(solvers, "_highs_run", lambda *a: runs.append(1) or real(*a))
    monkeypatch.setattr(prog, "NEED_ROWS_MAX_CLASSES", 0)  # no relaxation: every solve is a branch and bound
    monkeypatch.setattr(split, "MIN_PART", 1)
    monkeypatch.setattr(split, "HELPER_MIN_COLUMNS", 0)
    monkeypatch.setattr(ilp, "FILTER_SPLIT_COLUMNS", 0)
    settings = ILPSettings(acyclic=acyclic, prune=False, filtered=True)  # the start is the judge's: no filter first

    def solve(helper: object) -> ilp.ILPResult:
        runs.clear()
        result = ilp_extract(view, costs, [3], dear, 15.0, replace(settings, helper=helper), 20)
        assert result is not None and result.stats["split_parts"] == 3
        return result

    alone = solve(None)
    # the second and third parts state one program (the cut each reads priced 0): solved once
    assert len(runs) == 2 and alone.cost == pytest.approx(3.0)
    paired = solve(_InlineHelper(False))
    assert len(runs) == 2, "no part solved again"
    assert (paired.choice, paired.cost, paired.status) == (alone.choice, alone.cost, alone.status)
    assert paired.bound == pytest.approx(alone.bound) and [paired.choice[c] for c in (1, 2, 3)] == [2, 5, 8]


@settings(max_examples=60, deadline=None)
@given(chains())
def test_what_the_cycle_filter_keeps_closes_no_cycle(case: tuple) -> None:
    """The filter's programs (a merge judge's) look for no cycle to cut or level: after the
    filter and the reduction none is left (random chains with cycles in every block)."""
    from eqsat.egraph.cycles import cycle_components, short_cycles
    from eqsat.egraph.ilp import filter_cycles, reduce

    view, costs, roots = case
    assume(_has_term(view, costs, roots))
    greedy = greedy_dag(view, costs, roots)
    removed = filter_cycles(view, greedy, roots, costs)
    cand = reduce(view, costs, roots, removed).candidates
    assert not short_cycles(view, cand) and not cycle_components(view, cand)


def test_the_helper_gets_its_first_part_before_the_last_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts the helper solves are sent as they are built, not after every program is."""
    view, costs = _cyclic_chain()
    helper = _InlineHelper(False)
    built: list[int] = []
    real = split.build_program
    monkeypatch.setattr(split, "build_program", lambda *a, **k: built.append(1) or real(*a, **k))
    submit = helper.submit
    at_submit: list[int] = []
    monkeypatch.setattr(helper, "submit", lambda *a: at_submit.append(len(built)) or submit(*a))
    monkeypatch.setattr(split, "HELPER_MIN_COLUMNS", 0)
    paired = _solve(view, costs, [6], parts=True, prune=False, helper=helper)
    assert paired.stats["split_parts"] == 3 and at_submit and at_submit[0] < 3


def test_a_part_is_sent_without_waiting_for_the_worker_to_read_it() -> None:
    """The worker reads a part only after solving the one before; a socket holds about 200 KB, so
    a larger part's write would hold this process from its own parts: the write is a thread's."""
    import multiprocessing
    import threading

    import numpy as np

    from eqsat.egraph.part_helper import WorkerHelper
    from eqsat.egraph.program import as_program

    here, there = multiprocessing.Pipe(duplex=True)

    class Worker:  # an optimize.SaturationWorker that reads nothing until told
        conn, alive = here, True

        def close(self) -> None:
            self.alive = False

    n = 200_000  # columns: a pickled program of several MB
    program = as_program([([(k, 1.0) for k in range(0, n, 7)], 1.0, np.inf)], np.ones(n), np.zeros(n, dtype=bool))
    helper = WorkerHelper(Worker(), "highs")
    done = threading.Event()
    threading.Thread(target=lambda: [helper.submit(program, 1.0, None, None) for _ in range(2)] and done.set(),
                     daemon=True).start()
    assert done.wait(30), "submit waited for the worker to read"
    for _ in range(2):  # whole and in order
        kind, _, got, *_ = there.recv()
        assert kind == "solve" and np.array_equal(got.cost, program.cost)
        there.send(("solved", None))
    assert helper.result(5.0) is None and helper.result(5.0) is None and helper.writing is None


@st.composite
def repeated_blocks(draw: st.DrawFn) -> tuple[EGraphView, list[float], list[int], bool]:
    """2-4 copies of one drawn block (1-3 e-classes, cycles too, the same costs) stacked, each
    reading the last e-class of the copy below; now and then an e-class has a leaf of its own, a
    way to avoid what is below (then the cut's price matters and the copies state different programs)."""
    size = draw(st.integers(1, 3))
    shape = [[tuple(draw(st.lists(st.sampled_from([-1, *range(size)]), min_size=1, max_size=2)))
              for _ in range(draw(st.integers(1, 3)))] for _ in range(size)]
    shortcut = [draw(st.integers(0, 4)) == 0 for _ in range(size)]
    prices = [[draw(st.sampled_from([0.0, 1.0, 2.0, 3.5, 5.0])) for _ in range(len(k) + s)]
              for k, s in zip(shape, shortcut)]
    spec: list[tuple[int, tuple[int, ...]]] = [(0, ())]
    costs, below = [0.0], 0
    for copy in range(draw(st.integers(2, 4))):
        first = 1 + copy * size
        for c, (kids, short, price) in enumerate(zip(shape, shortcut, prices)):
            spec += [(first + c, tuple(below if k < 0 else first + k for k in ks)) for ks in kids]
            spec += [(first + c, ())] if short else []
            costs += price
        below = first + size - 1
    return make_view(spec), costs, [below], any(shortcut)


@settings(max_examples=80, deadline=None)
@given(repeated_blocks(), st.booleans())
def test_repeated_parts_are_solved_once_and_keep_the_optimum(case: tuple, paired: bool) -> None:
    """Copies of one block whose every term reads the copy below state one program once that cut
    is priced 0 (see ``eqsat.egraph.twins``): it is solved once, and the answer is as optimal,
    with the same cost and bound, as solving each copy gives (``_solve`` checks the choice's cost)."""
    from eqsat.egraph import solvers

    view, costs, roots, shortcut = case
    assume(_has_term(view, costs, roots))
    runs: list[int] = []
    real = solvers._highs_run

    def each(helper: object) -> ilp.ILPResult:
        runs.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(solvers, "_highs_run", lambda *a: runs.append(1) or real(*a))
            mp.setattr(prog, "NEED_ROWS_MAX_CLASSES", 0)  # no relaxation: every solve is a branch and bound
            mp.setattr(split, "HELPER_MIN_COLUMNS", 0)
            return _solve(view, costs, roots, parts=True, prune=False, helper=helper)

    whole = _solve(view, costs, roots, parts=False, prune=False)
    once = each(_InlineHelper(False) if paired else None)
    solved = len(runs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(twins.Twins, "twin", lambda self, built: None)
        apart = each(_InlineHelper(False) if paired else None)
    assert once.optimal and once.cost == pytest.approx(whole.cost, abs=1e-6) == pytest.approx(apart.cost, abs=1e-6)
    assert once.bound == pytest.approx(apart.bound, rel=1e-3, abs=1e-6)  # (the choice may differ where optima tie)
    if apart.stats.get("split_parts", 0) >= 3 and not shortcut:
        assert solved < len(runs), "a copy's program was solved again"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=60), st.integers(1, 25))
def test_the_biconnected_components_are_networkxs_in_its_order(edges, n) -> None:
    """The split's own walk gives networkx's blocks in networkx's order (the parts, their
    classes' order and so every program's columns depend on it)."""
    import networkx as nx

    from eqsat.egraph.split import biconnected_components

    edges = [(a % n, b % n) for a, b in edges if a % n != b % n]
    g = nx.Graph()
    g.add_nodes_from(range(n - 1, -1, -1))
    g.add_edges_from(edges)
    adjacent: dict = {v: {} for v in range(n - 1, -1, -1)}
    for a, b in edges:
        adjacent[a][b] = adjacent[b][a] = None
    assert biconnected_components(adjacent) == [set(b) for b in nx.biconnected_components(g)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=80), st.integers(1, 25))
def test_the_strong_components_are_networkxs(edges, n) -> None:
    """The cycle components' own Tarjan walk finds networkx's strongly connected components."""
    import networkx as nx

    from eqsat.egraph.cycles import strong_components

    edges = [(a % n, b % n) for a, b in edges]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    got = sorted(sorted(c) for c in strong_components(n, edges))
    assert got == sorted(sorted(c) for c in nx.strongly_connected_components(g))
