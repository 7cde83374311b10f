"""The final extraction starts its whole-e-graph proof from the last merge judge's answer when that
judge saw the final e-graph: the cycle filter's ILP is solved once per e-graph, not again, and the
answer is the one the plain extraction gives."""
from __future__ import annotations

import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.egraph import Limits
from eqsat.egraph import ilp as ilp_module
from eqsat.egraph.extract import extract, node_costs, to_graph
from eqsat.egraph.ilp import ILPSettings
from eqsat.egraph.optimize import _saturate, optimize
from eqsat.egraph.rewrites import compile_rules
from eqsat.models import build
from eqsat.rules.rulesets import default_rules


def _filter_solves(monkeypatch) -> list[str]:
    """Records the ``acyclic`` setting of every ILP the extraction builds."""
    calls: list[str] = []
    build_program = ilp_module._build

    def counted(view, costs, roots, greedy, greedy_cost, settings, deadline):
        calls.append(settings.acyclic)
        return build_program(view, costs, roots, greedy, greedy_cost, settings, deadline)

    monkeypatch.setattr(ilp_module, "_build", counted)
    return calls


@pytest.mark.parametrize("model", ["qkv", "lora"])
def test_the_filter_is_solved_once_per_judged_egraph(model, monkeypatch):
    calls = _filter_solves(monkeypatch)
    result = optimize(build(model), default_rules(), "h100", Limits(), isolate=False)
    report = result.work.report
    assert report.final_judged is not None
    assert calls.count("filter") == report.judges  # the judges' own; the final one reuses its judge's
    assert calls.count("exact") <= 1


@pytest.mark.parametrize("model, params", [("qkv", {}), ("bert", {"layers": 2, "seq": 16, "hidden": 128, "heads": 4})])
def test_starting_from_the_filters_answer_gives_the_plain_extractions_cost(model, params):
    """The exact formulation started from the judge's answer proves the same optimum as the one that
    solves the filter first (the start is a start, never the answer unchecked)."""
    graph = build(model, **params)
    view, lets, _, _ = _saturate(compile_rules(default_rules()), graph, Limits(multi_by_need=0))
    roots = [view.lets[r] for r in lets]
    costs = node_costs(view, RooflineCost("h100"), graph.dtype, {})
    judge = extract(view, costs, roots, "ilp", 30.0, ILPSettings(acyclic="filter"))
    plain = extract(view, costs, roots, "ilp", 30.0, ILPSettings())
    leaves = {n.attr("name"): n for n in graph.leaves()}
    hint = to_graph(view, judge.choice, roots, leaves, graph)
    reused = extract(view, costs, roots, "ilp", 30.0, ILPSettings(filtered=True), hint)
    assert plain.optimal and reused.optimal
    assert reused.cost == pytest.approx(plain.cost, rel=1e-9)
