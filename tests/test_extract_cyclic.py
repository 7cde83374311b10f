"""Exact extraction on cyclic e-graphs: the bound pruning keeps every optimum, and the exact
methods find the optimum that TENSAT's cycle filter cuts away."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_extract import brute_force, egraphs

from eqsat.egraph.extract import EGraphView, ENode
from eqsat.egraph.ilp import find_cycles
from eqsat.egraph.prune import chain_below, path_above, prune
from eqsat.egraph.serialize import from_json
from eqsat.egraph.solvers import SOLVERS, available
from experiments.cli import main

# R reads A, B and X. A: a1 reads B (cost 5) or a2 a leaf (20); B: b1 reads A (0) or b2 reads X (0);
# X costs 16 and R needs it anyway, so the optimum is a1 + b2 = 21. The greedy pass settles B = b2
# first, then a2 (20 < 5 + 16 unshared), 36 in all; the filter keeps that choice and cuts the
# dearer cycle edge A -> B, which the optimum needs: it ends at 36. a3 (30) costs more than any
# cheaper term; y1 (1) reads Y (25): its chain bound, 26, does too. Both are pruned.
NODES = {  # node: (e-class, cost, children)
    "l": ("L", 0.0, []), "x": ("X", 16.0, ["l"]), "r": ("R", 0.0, ["a1", "b1", "x"]),
    "a1": ("A", 5.0, ["b1"]), "a2": ("A", 20.0, ["l"]), "a3": ("A", 30.0, ["l"]), "a4": ("A", 1.0, ["y1"]),
    "b1": ("B", 0.0, ["a1"]), "b2": ("B", 0.0, ["x"]), "y1": ("Y", 25.0, ["l"]),
}
OPTIMUM, GREEDY = 21.0, 36.0


def document() -> dict:
    return {"nodes": {n: {"op": "leaf:l" if n == "l" else "f", "children": kids, "eclass": c, "cost": cost}
                      for n, (c, cost, kids) in NODES.items()}, "root_eclasses": ["R"]}


def _run(tmp_path, capsys, *flags: str) -> dict:
    path, out = tmp_path / "cyclic.json", tmp_path / "out.json"
    path.write_text(json.dumps(document()))
    assert main(["extract", str(path), "--seconds", "20", "--json", str(out), *flags]) == 0
    capsys.readouterr()
    return json.loads(out.read_text())


def test_the_cycle_filter_misses_the_optimum_here(tmp_path, capsys) -> None:
    result = _run(tmp_path, capsys, "--acyclic", "filter")
    assert result["greedy_cost"] == pytest.approx(GREEDY) and result["cost"] == pytest.approx(GREEDY)
    assert result["bound"] is None


@pytest.mark.parametrize(("solver", "acyclic", "prune_flag"), [
    ("highs", "exact", ()), ("highs", "exact", ("--no-prune",)), ("highs", "lazy", ()), ("cpsat", "exact", ()),
    ("scip", "exact", ())])
def test_the_exact_methods_find_the_optimum_the_filter_cuts_away(tmp_path, capsys, solver, acyclic,
                                                                 prune_flag) -> None:
    if not available(solver):
        pytest.skip(f"{SOLVERS[solver].package} is not installed")
    result = _run(tmp_path, capsys, "--solver", solver, "--acyclic", acyclic, *prune_flag)
    assert result["cost"] == pytest.approx(OPTIMUM) and "optimal" in result["status"].lower()
    assert result["bound"] is not None and OPTIMUM * (1 - 1e-4) <= result["bound"] <= OPTIMUM + 1e-9
    view, costs, roots = from_json(document())
    choice = {c: int(i) for c, i in result["choice"].items()}
    names = list(view.classes)
    assert not find_cycles(view, {names[int(c)]: i for c, i in choice.items()}, roots)


def test_pruning_drops_what_no_cheaper_term_can_pick_and_keeps_the_optimum() -> None:
    view, costs, roots = from_json(document())
    ids = list(NODES)  # from_json numbers the nodes in document order
    cand = {c: list(ns) for c, ns in view.classes.items()}
    below = chain_below(view, costs, cand)
    assert below[view.nodes[ids.index("y1")].eclass] == 25.0
    above = path_above(view, costs, cand, roots)
    assert above[view.nodes[ids.index("a1")].eclass] == 0.0
    pruned = prune(view, costs, roots, cand, OPTIMUM)
    removed = {ids[i] for i in pruned.removed}
    assert removed == {"a3", "a4", "y1"}  # a3: 30 alone; a4: 1 + Y's chain 25; y1: then out of reach
    assert not removed & {"r", "a1", "b2", "x"}, "the optimum's nodes stay"
    assert pruned.bound == 20.0  # R's chain: A's cheapest chain, a2 (X's, 16, is shorter)


def test_a_chain_bound_that_meets_the_start_proves_it_without_a_solver(tmp_path, capsys) -> None:
    # B (root) = 3 + A; A = 2 + leaf, or 0 + B (a cycle): the greedy 5 is the chain bound 3 + 2
    doc = {"nodes": {"l": {"op": "leaf:l", "children": [], "eclass": "L", "cost": 0.0},
                     "a": {"op": "f", "children": ["l"], "eclass": "A", "cost": 2.0},
                     "a2": {"op": "g", "children": ["b"], "eclass": "A", "cost": 0.0},
                     "b": {"op": "f", "children": ["a"], "eclass": "B", "cost": 3.0}}, "root_eclasses": ["B"]}
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(doc))
    assert main(["extract", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cost 5 " in out and "bound 5," in out and "Optimal (the chain bound meets the start)" in out


@settings(max_examples=150, deadline=None)
@given(egraphs(), st.sampled_from([0.0, 0.5, 3.0]))
def test_pruning_at_the_optimum_or_above_keeps_the_optimum(case: tuple, extra: float) -> None:
    view, costs, roots = case
    optimum = brute_force(view, costs, roots)
    if optimum == float("inf"):
        return
    cand = {c: list(ns) for c, ns in view.classes.items()}
    pruned = prune(view, costs, roots, cand, optimum + extra)
    assert pruned.bound <= optimum + 1e-9, "the chain bound is a lower bound"
    removed = pruned.removed
    kept = EGraphView()
    kept.nodes = [n if i not in removed else ENode(n.eclass, "gone", (), (n.eclass,)) for i, n in enumerate(view.nodes)]
    kept.classes = view.classes  # a removed node now reads its own e-class: never in an acyclic term
    assert brute_force(kept, costs, roots) == pytest.approx(optimum)
