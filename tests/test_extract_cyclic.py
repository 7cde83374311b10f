"""Exact extraction on cyclic e-graphs: the bound pruning keeps every optimum, and the exact
methods find the optimum that TENSAT's cycle filter cuts away."""
from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_extract import brute_force, egraphs

from eqsat.egraph import program, solvers
from eqsat.egraph.cycles import class_reads
from eqsat.egraph.extract import EGraphView, ENode, extract, selection_cost
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


def document(nodes: dict | None = None) -> dict:
    """An e-graph document of ``nodes`` (default :data:`NODES`), rooted at R: each node its own op
    (a node of no children a leaf)."""
    return {"nodes": {n: {"op": f"leaf:{n}" if not kids else n, "children": kids, "eclass": c, "cost": cost}
                      for n, (c, cost, kids) in (nodes or NODES).items()}, "root_eclasses": ["R"]}


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


def _term_without(view: EGraphView, cand: dict, target, without) -> bool:
    """Whether e-class ``target`` has a finite term through ``cand`` that reads no node of ``without``."""
    made: set = set()
    grew = True
    while grew:
        grew = False
        for c, ns in cand.items():
            if c != without and c not in made and any(all(d in made for d in view.kids[i]) for i in ns):
                made.add(c)
                grew = True
    return target in made


@settings(max_examples=150, deadline=None)
@given(egraphs())
def test_what_a_class_needs_every_term_of_it_reads(case: tuple) -> None:
    """Soundness of the need rows over cycles: no term of an e-class avoids a class it is said to need."""
    view, _, _ = case
    cand = {c: list(ns) for c, ns in view.classes.items()}
    names = list(cand)
    for budget in (program.NEEDS_WORKLIST, 0):  # 0: the worklist gives up at once and guesses "none"
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(program, "NEEDS_WORKLIST", budget)
            needs = program._needs(view, cand)
        for c in cand:
            for k in program._bits(needs[c]):
                assert not _term_without(view, cand, c, names[k]), f"{c} has a term without {names[k]}"


def _named_view(spec: list[tuple[str, tuple[str, ...]]]) -> EGraphView:
    """E-nodes as (e-class, child e-classes), in that order; one of no children is a leaf."""
    view = EGraphView()
    for c, kids in spec:
        view.nodes.append(ENode(c, "op" if kids else "leaf", (), kids, leaf="" if kids else c.lower()))
    for i, n in enumerate(view.nodes):
        view.classes.setdefault(n.eclass, []).append(i)
    return view


def _named_needs(view: EGraphView) -> dict[str, set[str]]:
    cand = {c: list(ns) for c, ns in view.classes.items()}
    needs, names = program._needs(view, cand), list(cand)
    return {c: {names[k] for k in program._bits(needs[c])} for c in cand}


def test_a_class_that_closes_a_cycle_needs_what_both_ways_read() -> None:
    """C reads K or E, K reads C or E: every term of C reads E, which one pass down the walk
    (C's need of K's needs unknown where the cycle closes) did not find."""
    needs = _named_needs(_named_view([("E", ()), ("C", ("K",)), ("C", ("E",)), ("K", ("C",)), ("K", ("E",))]))
    assert needs["C"] == {"E"} == needs["K"]


def test_a_guess_that_comes_down_comes_down_in_every_reader() -> None:
    """P reads A and B; A reads B and G, or E and G; B reads A, or F and G. The walk meets B with
    A unknown and first takes B to need F and G (its other term), and P to need F through B; B's
    term through A (E and G) does not read F, so B needs only G, and P must not keep F."""
    view = _named_view([("E", ()), ("F", ()), ("G", ()), ("P", ("A", "B")), ("A", ("B", "G")), ("A", ("E", "G")),
                        ("B", ("A",)), ("B", ("F", "G"))])
    needs = _named_needs(view)
    assert needs["B"] == {"G"} and needs["P"] == {"A", "B", "G"} and needs["A"] == {"G"}
    with pytest.MonkeyPatch.context() as mp:  # a worklist out of budget: less, never a wrong need
        mp.setattr(program, "NEEDS_WORKLIST", 0)
        fallback = _named_needs(view)
    assert fallback["P"] <= needs["P"] and fallback["B"] <= needs["B"] and "F" not in fallback["P"]


@settings(max_examples=150, deadline=None)
@given(egraphs())
def test_every_acyclic_term_meets_the_need_and_two_cycle_rows(case: tuple) -> None:
    view, costs, roots = case
    cand = {c: list(ns) for c, ns in view.classes.items()}
    col = {i: i for i in range(len(view.nodes))}
    rows = program.need_rows(view, cand, col) + program.two_cycle_rows(cand, col, class_reads(view, cand))
    classes = sorted(view.classes)
    for pick in itertools.product(*(view.classes[c] for c in classes)):
        choice = dict(zip(classes, pick))
        if find_cycles(view, choice, roots, most=1):
            continue
        reached, todo = set(), list(roots)
        while todo:
            c = todo.pop()
            if c not in reached:
                reached.add(c)
                todo.extend(view.kids[choice[c]])
        x = [1.0 if view.nodes[i].eclass in reached and choice[view.nodes[i].eclass] == i else 0.0
             for i in range(len(view.nodes))]
        for entries, low, high in rows:
            assert low - 1e-9 <= sum(v * x[k] for k, v in entries) <= high + 1e-9


# A and B are each computed alone (10 each) or projected out of K; K is computed at once (12) or
# as the concatenation of A and B (1). The optimum is K at once with both projections: 12. The
# program's own rows let its relaxation take A's projection and K's concatenation at one half
# each, carrying each other; the two-cycle rows say that A's pick may not read K where K's reads A.
SPLIT_CONCAT = document({
    "x": ("X", 0.0, []), "a": ("A", 10.0, ["x"]), "a_sp": ("A", 0.0, ["k"]), "b": ("B", 10.0, ["x"]),
    "b_sp": ("B", 0.0, ["k"]), "k": ("K", 12.0, ["x"]), "k_cat": ("K", 1.0, ["a", "b"]), "r": ("R", 0.0, ["a", "b"]),
})


@pytest.mark.parametrize("doc", [SPLIT_CONCAT, document()], ids=["split-concat", "filter-misses"])
def test_the_proof_over_cycles_is_answered_by_its_relaxation_at_the_same_cost(doc: dict,
                                                                             monkeypatch) -> None:
    view, costs, roots = from_json(doc)
    solvers.RELAXATIONS.reset()
    fast = extract(view, costs, roots, "ilp", 20)
    assert fast.status.startswith(solvers.RELAXATION_STATUS) and fast.stats["cycle_classes"] > 0
    assert solvers.RELAXATIONS.answered[True] == 1, "the program with levels was answered by its relaxation"
    monkeypatch.setattr(program, "NEED_ROWS_MAX_CLASSES", 0)  # no rows, no relaxation: branch and bound
    plain = extract(view, costs, roots, "ilp", 20)
    assert fast.optimal and plain.optimal and fast.cost == pytest.approx(plain.cost)
    assert fast.cost == pytest.approx(selection_cost(view, costs, fast.choice, roots))


def test_without_the_two_cycle_rows_the_split_concat_relaxation_answers_nothing(monkeypatch) -> None:
    view, costs, roots = from_json(SPLIT_CONCAT)
    solvers.RELAXATIONS.reset()
    monkeypatch.setattr(program, "two_cycle_rows", lambda *args: [])
    found = extract(view, costs, roots, "ilp", 20)
    assert found.cost == pytest.approx(12.0) and found.optimal
    assert solvers.RELAXATIONS.tried[True] == 1 and solvers.RELAXATIONS.answered[True] == 0
