"""Extraction: the greedy pass, the problem reduction, the cycle filter and the ILP solvers,
checked against brute force on small random e-graphs (hypothesis)."""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.egraph.extract import EGraphView, ENode, extract, greedy_dag
from eqsat.egraph.ilp import ILPSettings, filter_cycles, find_cycles, ilp_extract, reduce
from eqsat.egraph.solvers import SOLVERS, available
from eqsat.egraph.view import selection_cost


def make_view(spec: list[tuple[int, tuple[int, ...]]]) -> EGraphView:
    """E-nodes as (e-class, child e-classes)."""
    view = EGraphView()
    for c, kids in spec:
        view.nodes.append(ENode(c, "op" if kids else "leaf", (), tuple(kids), leaf="" if kids else f"x{c}"))
    for i, n in enumerate(view.nodes):
        view.classes.setdefault(n.eclass, []).append(i)
    return view


def brute_force(view: EGraphView, costs: list[float], roots: list[int]) -> float:
    """The cheapest acyclic choice by trying every choice (tiny e-graphs only)."""
    classes = sorted(view.classes)
    best = float("inf")
    for pick in itertools.product(*(view.classes[c] for c in classes)):
        choice = dict(zip(classes, pick))
        if find_cycles(view, choice, roots, most=1):
            continue
        best = min(best, selection_cost(view, costs, choice, roots))
    return best


@st.composite
def egraphs(draw: st.DrawFn) -> tuple[EGraphView, list[float], list[int]]:
    n_classes = draw(st.integers(2, 5))
    spec: list[tuple[int, tuple[int, ...]]] = [(0, ())]  # class 0 always has a leaf, so a term exists
    for c in range(n_classes):
        for _ in range(draw(st.integers(1 if c else 0, 3))):
            kids = draw(st.lists(st.integers(0, n_classes - 1), max_size=2))
            spec.append((c, tuple(kids)))
    view = make_view(spec)
    costs = [draw(st.sampled_from([0.0, 1.0, 2.0, 3.5, 5.0])) for _ in view.nodes]
    return view, costs, [n_classes - 1]


def _has_term(view: EGraphView, costs: list[float], roots: list[int]) -> bool:
    try:
        greedy_dag(view, costs, roots)
    except RuntimeError:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(egraphs())
def test_exact_ilp_and_greedy_agree_with_brute_force(case: tuple) -> None:
    view, costs, roots = case
    optimum = brute_force(view, costs, roots)
    if not _has_term(view, costs, roots):
        assert optimum == float("inf")  # greedy finds a term whenever one exists
        return
    greedy = greedy_dag(view, costs, roots)
    assert not find_cycles(view, greedy, roots), "the greedy choice is acyclic"
    greedy_cost = selection_cost(view, costs, greedy, roots)
    assert greedy_cost >= optimum - 1e-9
    exact = ilp_extract(view, costs, roots, greedy, greedy_cost, ILPSettings(acyclic="lazy"), 20)
    assert exact is not None and exact.optimal
    assert exact.cost == pytest.approx(optimum, abs=1e-4)
    assert not find_cycles(view, exact.choice, roots)
    filtered = ilp_extract(view, costs, roots, greedy, greedy_cost, ILPSettings(), 20)
    assert filtered is not None and optimum - 1e-4 <= filtered.cost <= greedy_cost + 1e-9
    assert not find_cycles(view, filtered.choice, roots)


def test_reduction_drops_dominated_nodes_and_unreachable_classes() -> None:
    # class 2 (root): a (cost 1, needs 0 and 1) and b (cost 1, needs only 0): b dominates a;
    # then class 1 is no longer reachable; class 3 was never reachable.
    view = make_view([(0, ()), (1, ()), (2, (0, 1)), (2, (0,)), (3, (2,))])
    costs = [0.0, 0.0, 1.0, 1.0, 1.0]
    red = reduce(view, costs, [2])
    assert red.candidates == {0: [0], 2: [3]}
    assert red.replacement == {2: 3}
    assert red.forced == frozenset({3, 0})
    assert red.stats["enodes_before"] == 4 and red.stats["enodes_after"] == 2


def test_a_dearer_node_with_fewer_children_is_not_dominated() -> None:
    view = make_view([(0, ()), (1, ()), (2, (0, 1)), (2, (0,))])
    red = reduce(view, [0.0, 0.0, 1.0, 5.0], [2])
    assert red.candidates[2] == [2, 3]


def test_greedy_does_not_depend_on_the_order_of_nodes() -> None:
    rng = random.Random(0)
    spec = [(0, ()), (1, (0,)), (1, ()), (2, (1, 0)), (2, (0,)), (3, (2, 1)), (3, (1,)), (3, (2,))]
    costs = [0.0, 2.0, 3.0, 1.0, 4.0, 1.0, 6.0, 2.0]
    view = make_view(spec)
    reference = selection_cost(view, costs, greedy_dag(view, costs, [3]), [3])
    for _ in range(20):
        order = list(range(len(spec)))
        rng.shuffle(order)
        shuffled = make_view([spec[i] for i in order])
        sc = [costs[i] for i in order]
        assert selection_cost(shuffled, sc, greedy_dag(shuffled, sc, [3]), [3]) == reference


def test_cycle_filter_leaves_an_acyclic_graph_and_keeps_the_kept_choice() -> None:
    # 1 <-> 2 (an op and its inverse), 2 <-> 3, and leaves under 1 and 3
    view = make_view([(0, ()), (1, (0,)), (1, (2,)), (2, (1,)), (2, (3,)), (3, (2,)), (3, (0,))])
    costs = [0.0, 5.0, 0.0, 1.0, 1.0, 0.0, 5.0]
    keep = greedy_dag(view, costs, [2])
    removed = filter_cycles(view, keep, [2], costs)
    assert not set(keep.values()) & removed
    full = {c: [i for i in ns if i not in removed] for c, ns in view.classes.items()}
    for combo in itertools.product(*full.values()):
        assert not find_cycles(view, dict(zip(full, combo)), [2])


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_every_solver_finds_the_shared_optimum(solver: str) -> None:
    if not available(solver):
        pytest.skip(f"{SOLVERS[solver].package} is not installed")
    # two roots share class 1 when both pick their dearer node: the DAG optimum, not the tree one
    view = make_view([(0, ()), (1, (0,)), (2, (1,)), (2, (0,)), (3, (1,)), (3, (0,))])
    costs = [0.0, 3.0, 1.0, 3.0, 1.0, 3.0]
    result = extract(view, costs, [2, 3], "ilp", 20, ILPSettings(solver=solver))
    assert result.greedy_cost == pytest.approx(6.0)  # 3 + 3: alone, each root is cheaper without class 1
    assert result.method == "ilp" and result.cost == pytest.approx(5.0)  # 1 + 1 + 3, class 1 shared
    assert result.gap == 0.0 and result.bound is not None and result.bound <= 5.0 + 1e-6


def test_an_unknown_solver_is_named() -> None:
    view = make_view([(0, ())])
    with pytest.raises(ValueError, match="unknown ILP solver 'gurobi'"):
        extract(view, [0.0], [0], "ilp", 5, ILPSettings(solver="gurobi"))
