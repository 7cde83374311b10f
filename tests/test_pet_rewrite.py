"""PET's transformations inside the searches: each, with its correction kernels, is a graph-level
rewrite (:mod:`eqsat.graph_rewrite`) that the e-graph adds to the conv's e-class and the α search
offers as a move; each is verified before it is offered, and the result is checked as always."""
from __future__ import annotations

from dataclasses import replace

import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.egraph.optimize import EGraphSearch
from eqsat.ir.evaluate import compare_graphs
from eqsat.ir.graph import Graph, input_, node, weight
from eqsat.search import run_verified
from experiments.searches import get_search
from pet import rewrite
from pet.rewrite import PET_REWRITE, pet_alternatives
from taso_baseline.search import AlphaSearch
from tests.test_pet_search import OddWidthsAreSlow, conv_model


def test_every_alternative_offered_is_the_conv_with_its_corrections():
    graph, conv = conv_model()
    alts = pet_alternatives(conv)
    assert {a.name for a in alts} >= {"pet:split-W-2", "pet:split-H-3"} and all(a.node is conv for a in alts)
    for a in alts:
        check = compare_graphs(Graph((conv,)), Graph((a.replacement,)), trials=1)
        assert check.equal, (a.name, check.detail)
        assert dict(a.facts)["corrections"] > 0 and 0 < dict(a.facts)["overhead"] < 1
    assert pet_alternatives(node("relu", conv)) == ()


def test_an_alternative_that_fails_its_check_is_not_offered(monkeypatch):
    from pet.programs import SpatialSplit
    from pet.splice import _substitute

    def uncorrected(conv, p, name):  # the program alone: its seams are wrong
        x_leaf, w_leaf = p.leaves()
        return _substitute(SpatialSplit("W", 2).program(p).outputs, {x_leaf: conv.inputs[0], w_leaf: conv.inputs[1]},
                           conv)[0]

    x = input_("x9", (1, 3, 9, 9))
    conv = node("conv2d", x, weight("w9", (4, 3, 3, 3)), stride=(1, 1), pad=(1, 1))
    pet_alternatives.cache_clear()
    rewrite._small_verified.cache_clear()
    monkeypatch.setattr(rewrite, "transformed_layer", uncorrected)
    try:
        assert pet_alternatives(conv) == ()
    finally:
        pet_alternatives.cache_clear()
        rewrite._small_verified.cache_clear()


def test_the_egraph_takes_a_pet_rewrite_that_pays_and_its_graph_equals_the_input():
    graph, _ = conv_model()
    slow = OddWidthsAreSlow("h100")
    limits = EGraphSearch.presets["quick"]
    plain = run_verified(EGraphSearch(), graph, [], slow, limits)
    assert plain.best == graph  # no rule changes this conv: what follows is the rewrite's doing
    result = run_verified(EGraphSearch(), graph, [], slow, replace(limits, graph_rewrites=(PET_REWRITE,)))
    used = result.work.rewrites
    assert used.offered == len(pet_alternatives(graph.outputs[0].inputs[0])) and len(used.chosen) == 1
    assert used.chosen[0]["where"] == "conv2d 0" and used.chosen[0]["corrections"] > 0
    assert f"took {used.chosen[0]['rewrite']} at conv2d 0" in result.work.detail_lines()
    assert result.best_us < result.original_us and result.verified.equal
    assert any(n.op == "concat" for n in result.best.nodes())  # the corrections are in the extracted graph
    check = compare_graphs(graph, result.best, trials=2, seed=3)
    assert check.equal, check.detail
    assert result.best_us == pytest.approx(slow.graph_time_us(result.best))


def test_the_registered_tensat_with_pet_keeps_the_input_where_no_alternative_pays():
    graph, conv = conv_model()
    search = get_search("eqsat+pet")
    result = run_verified(search, graph, [], RooflineCost("h100"), search.limits("quick"))
    assert result.search == "eqsat+pet" and result.best == graph and not result.work.rewrites.chosen
    closest = result.work.rewrites.closest
    assert closest["alternative_us"] > closest["node_us"]  # why: the nearest alternative costs more than the conv


def test_the_alpha_search_takes_a_pet_move():
    graph, _ = conv_model()
    limits = replace(AlphaSearch.presets["quick"], graph_rewrites=(PET_REWRITE,), max_ops_factor=10.0)
    result = run_verified(AlphaSearch(), graph, [], OddWidthsAreSlow("h100"), limits)
    assert [s.rule for s in result.work.path][0].startswith("pet:")
    assert result.best_us < result.original_us and result.verified.equal
    assert len(result.work.rewrites.chosen) == 1


def test_the_four_searches_run_from_one_command_in_quick_mode(tmp_path):
    import json

    from experiments.cli import main

    assert main(["experiment", "pet-searches", "--quick", "--devices", "h100", "--alpha-time-limit", "30",
                 "--out", str(tmp_path)]) == 0
    table = json.loads((tmp_path / "pet_searches.json").read_text())
    rows = table["rows"]
    assert [r["search"] for r in rows] == ["taso", "eqsat", "pet", "eqsat+pet"]
    capped = [json.loads(p.read_text())["params"] for p in (tmp_path / "cells" / "pet-searches").iterdir()]
    assert sorted(c["search"] for c in capped if c.get("time_limit") == 30.0) == ["taso"]  # only the α search
    inside = rows[-1]
    assert inside["closest_pet"] and inside["closest_pet_us"] > inside["closest_conv_us"]


def test_a_search_with_pet_inside_takes_its_own_search_s_flags(tmp_path):
    import json

    from experiments.cli import main

    out = tmp_path / "r.json"
    assert main(["optimize", "csrnet_backend", "--search", "taso+pet", "--budget", "1", "--json", str(out)]) == 0
    row = json.loads(out.read_text())
    assert row["search"] == "taso+pet" and row["budget"] == 1 and row["alternatives_offered"] > 0
    assert main(["optimize", "csrnet_backend", "--search", "taso+pet", "--nodes", "5"]) == 2



class FusedReluIsSlowToo(OddWidthsAreSlow):
    """:class:`OddWidthsAreSlow`, and a conv with its ReLU fused costs 50 µs more than the two
    apart, so a rule that unfuses the ReLU pays wherever it applies."""

    def op_cost(self, op, attrs, in_shapes, out_shapes, is_const, dtype="bf16"):
        found = super().op_cost(op, attrs, in_shapes, out_shapes, is_const, dtype)
        if op == "conv2d" and dict(attrs).get("act") == "relu" and not is_const:
            return type(found)(**{**found.__dict__, "time_us": found.time_us + 50.0})
        return found


def test_the_taken_column_finds_a_pet_alternative_the_rules_rewrote_after_it_was_taken():
    from eqsat.rules.rulefile import parse_rules
    from experiments.runs.pet_searches import table_row
    from experiments.searches import result_row

    unfuse = parse_rules("conv-bias-act-relu: (conv2d :stride ?s :pad ?p :groups ?g :dilation ?d :act relu ?X ?W ?B) "
                         "<=> (relu (conv2d :stride ?s :pad ?p :groups ?g :dilation ?d ?X ?W ?B)) ; "
                         "op=conv2d vars=X:?x?x?x?,W:?x?x?x?,B:? weights=W,B")
    one, conv = conv_model()
    (split,) = [a for a in pet_alternatives(conv) if a.name == "pet:split-W-2"]
    # the e-graph grounds rules on the input's shapes: a second conv shaped like the split's
    # batched conv lets the rule unfuse that conv's ReLU inside the alternative too
    twin = node("conv2d", input_("y", split.mark.inputs[0].shape), *conv.inputs[1:], **conv.attr_dict)
    graph = Graph((one.outputs[0], twin), name="convnet")
    search = get_search("eqsat+pet")
    result = run_verified(search, graph, unfuse, FusedReluIsSlowToo("h100"), search.limits("quick"))
    best = set(result.best.nodes())
    assert split.mark not in best and split.replacement not in best  # the rules rewrote what was taken
    assert not any(n.op == "conv2d" and n.attr("act") == "relu" and n.shape == split.mark.shape for n in best)
    assert result.verified.equal and result.best_us < result.original_us
    row = table_row(result_row(result, graph) | {"model": "convnet"}, "odd-widths-slow")
    assert row["pet_transformations"] == "conv2d 0: split-W-2"
    assert row["corrected_share"] == pytest.approx(dict(split.facts)["overhead"], abs=1e-4)
