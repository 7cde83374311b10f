"""Reproducible searches: work limits decide, the clock is only a safety net that says when it fired.

The same command with the same seed writes the same file, even while another process keeps a core
busy; a run that a wall-clock limit cut short is marked time-bounded (``clock``) with the stop
reason saying "time"."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from eqsat.egraph import Limits, optimize
from eqsat.egraph.extract import greedy_dag
from eqsat.egraph.ilp import ILPSettings, ilp_extract
from eqsat.egraph.view import selection_cost
from eqsat.ir.graph import Graph, input_, node
from eqsat.models import build
from eqsat.rules.rulesets import default_rules
from experiments.cli import main
from taso_baseline.search import AlphaLimits, alpha_search
from tests.test_extract import make_view


def test_the_alpha_search_stopped_by_its_budget_is_not_time_bounded() -> None:
    r = alpha_search(build("qkv"), cost="h100", limits=AlphaLimits(budget=2, time_limit=600.0))
    assert r.stop == "budget" and not r.time_bounded and r.clock == ""
    assert r.to_dict()["time_bounded"] is False and "time-bounded" not in r.summary()


def test_the_alpha_search_stops_on_its_work_budget_at_the_same_graph_every_time() -> None:
    """Node visits, not seconds: a small work budget stops the search at the same place twice,
    before its popped-graph budget, and the run is not time-bounded."""
    limits = AlphaLimits(budget=10**6, work=200, time_limit=600.0)  # the whole search: 459 visits
    runs = [alpha_search(build("qkv"), cost="h100", limits=limits) for _ in range(2)]
    assert all(r.stop == "work budget" and not r.time_bounded for r in runs)
    assert runs[0].work.visits == runs[1].work.visits >= 200 and runs[0].best == runs[1].best
    assert runs[0].work.expanded < 10**6 and runs[0].work.to_dict()["visits"] == runs[0].work.visits


def test_taso_per_model_budgets_apply_to_its_graphs_as_built_not_to_files_or_resized_models() -> None:
    from experiments.cli import build_parser
    from experiments.commands.optimize import limits_from

    def limits(*argv: str) -> AlphaLimits:
        return limits_from(build_parser().parse_args(["optimize", *argv, "--search", "taso"]))

    assert limits("bert").budget == 100 and limits("bert").work is None
    for argv in (("bert.onnx",), ("bert", "--param", "layers=2")):
        assert limits(*argv).budget == 300 and limits(*argv).work == 8_000_000
    assert limits("bert.onnx", "--work", "5").work == 5


def test_the_alpha_search_stopped_only_by_the_clock_says_time() -> None:
    """A budget it cannot use up in no time: only the clock stops it, and the result says so."""
    r = alpha_search(build("qkv"), cost="h100", limits=AlphaLimits(budget=10**6, time_limit=0.0))
    assert "time" in r.stop and r.time_bounded and "time limit" in r.clock
    assert r.to_dict()["time_bounded"] is True and "time-bounded" in r.summary()


def test_a_saturation_stopped_only_by_the_clock_says_time() -> None:
    """Iteration and node limits far away, no seconds at all: the clock stops the saturation."""
    x = input_("x0", (4, 4))
    for i in range(1, 8):
        x = node("matmul", x, input_(f"x{i}", (4, 4)))
    r = optimize(Graph((x,)), default_rules(), "h100", Limits(iterations=1000, nodes=10**8, seconds=0.0,
                                                               extract="greedy"))
    assert "time" in r.stop and r.time_bounded and "saturation" in r.clock


def test_an_extraction_out_of_time_is_time_bounded_and_one_out_of_nodes_is_not() -> None:
    """The same whole-e-graph proof cut short by no seconds (the clock), given one branch-and-bound
    node (work) and not asked for (0 nodes): only the first depends on the machine."""
    view = make_view([(0, ()), (1, (0,)), (1, (2,)), (2, (1,)), (2, (3,)), (3, (2,)), (3, (0,))])
    costs = [0.0, 5.0, 0.0, 1.0, 1.0, 0.0, 5.0]
    keep = greedy_dag(view, costs, [2])
    start = selection_cost(view, costs, keep, [2])
    clocked = ilp_extract(view, costs, [2], keep, start, ILPSettings(prove_seconds=0.0))
    worked = ilp_extract(view, costs, [2], keep, start, ILPSettings(prove_nodes=1))
    skipped = ilp_extract(view, costs, [2], keep, start, ILPSettings(prove_nodes=0))  # no proof asked for
    assert clocked is not None and "time limit" in clocked.clock
    assert worked is not None and worked.clock == "" and worked.cost <= clocked.cost
    assert skipped is not None and skipped.clock == "" and "cycle-filtered" in skipped.status


def test_saturation_and_extraction_by_default_are_not_time_bounded() -> None:
    r = optimize(build("qkv"), default_rules(), "h100", Limits())
    assert not r.time_bounded and r.to_dict()["time_bounded"] is False


def _attention(path) -> None:
    """Three projections of one input and an output projection (merges by need, exact extraction)."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])
    inits = [numpy_helper.from_array((rng.standard_normal((64, 64)) / 8).astype(np.float32), n)
             for n in ("wq", "wk", "wv", "wo")]
    nodes = [helper.make_node("MatMul", ["x", w], [o]) for w, o in (("wq", "q"), ("wk", "k"), ("wv", "v"))]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"]), helper.make_node("MatMul", ["q", "kt"], ["a"]),
              helper.make_node("MatMul", ["a", "v"], ["o"]), helper.make_node("MatMul", ["o", "wo"], ["y"])]
    save(helper.make_model(helper.make_graph(nodes, "attention", [x], [y], inits),
                           opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("search", ["eqsat", "taso"])
def test_the_same_command_twice_writes_the_same_file_on_a_busy_machine(tmp_path, search) -> None:
    """Twice the same ``optimize`` with the same seed while a CPU burner runs: byte-identical files,
    neither run time-bounded."""
    pytest.importorskip("onnxruntime")
    import json

    src = tmp_path / "attention.onnx"
    _attention(src)
    burner = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        outs = []
        for k in range(2):
            out, js = tmp_path / f"opt{k}.onnx", tmp_path / f"opt{k}.json"
            assert main(["optimize", str(src), "--search", search, "--device", "h100", "--seed", "7",
                         "--out", str(out), "--json", str(js)]) == 0
            assert json.loads(js.read_text())["time_bounded"] is False
            outs.append(out.read_bytes())
    finally:
        burner.kill()
        burner.wait()
    assert outs[0] == outs[1]
