"""Each extension recipe of the README, followed step by step: a toy op, a toy rule file used by
both searches, a toy tuner, a device from a JSON file, a toy experiment row."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.ir.evaluate import contraction_terms
from eqsat.ir.graph import Graph, input_, node
from eqsat.ir.ops import OP_TABLE, OpSpec, get_op, register, unregister
from eqsat.onnx import EXPORTERS
from experiments.cli import main

RULES = """
# the README's examples, as a user writes them
matmul-assoc: (matmul ?a (matmul ?b ?c)) <=> (matmul (matmul ?a ?b) ?c)
matmul-dist: (ewadd (matmul ?x ?a) (matmul ?x ?b)) <=> (matmul ?x (ewadd ?a ?b))
relu-fuse: (relu (conv2d :stride ?s :pad ?p ?x ?w)) => (conv2d :stride ?s :pad ?p :act relu ?x ?w) ; vars=x:?x?x?x?,w:?x?x?x?
"""


def test_add_an_op_one_row_prices_evaluates_and_counts_its_terms():
    """Recipe "Add an op": one register() row; cost, evaluation and the exact checks read it."""
    register(OpSpec(name="outer", arity=2, attrs=(), shape=lambda attrs, ins: ((ins[0][0], ins[1][0]),),
                    flops=lambda attrs, ins, outs: outs[0][0] * outs[0][1],
                    evaluate=lambda attrs, xs, domain: np.multiply.outer(xs[0], xs[1]),
                    linear_in=(0, 1), terms=lambda attrs, ins: 1, doc="outer product of two vectors"))
    try:
        g = Graph((node("outer", input_("u", (8,)), input_("v", (16,))),))
        assert g.outputs[0].shape == (8, 16)
        assert RooflineCost("h100").graph_time_us(g) > 0 and contraction_terms(g) == 1
        assert "outer" not in EXPORTERS  # step 3 not done: export would say so, by name
        assert get_op("outer").linear_inputs({}) == (0, 1)
    finally:
        unregister("outer")
    assert "outer" not in OP_TABLE


@pytest.mark.parametrize("search", ["taso", "eqsat"])
def test_add_a_rule_set_a_hand_written_file_is_used_by_both_searches(tmp_path, capsys, search):
    """Recipe "Add a rule set": the README's rules, checked, verified, and used by each search on
    LoRA, whose best graph needs associativity and distributivity (39.72 -> 21.37 µs). The two
    matmul rules carry no vars= metadata: the e-graph infers their ranks."""
    path = tmp_path / "mine.rules"
    path.write_text(RULES)
    assert main(["rules", "check", str(path)]) == 0
    assert main(["rules", "verify", str(path)]) == 0
    out = tmp_path / "r.json"
    extra = ["--alpha", "1.3"] if search == "taso" else []
    assert main(["optimize", "lora", "--search", search, "--rules", str(path), "--json", str(out)] + extra) == 0
    data = json.loads(out.read_text())
    assert data["best_us"] == pytest.approx(21.37, abs=0.01) and data["verified"]["equal"]
    if search == "eqsat":
        used = {k for it in data["iterations"] for k, v in it["matches"].items() if v > 0}
        assert {"matmul-assoc@rank=a2,b2,c2", "matmul-dist@rank=a2,b2,x2"} <= used


def test_a_rule_no_ranks_type_is_an_error_naming_it(tmp_path, capsys):
    path = tmp_path / "bad.rules"
    path.write_text("odd: (matmul ?a (relu ?a)) => (concat :axis 5 ?a ?a)\n")
    assert main(["optimize", "lora", "--search", "eqsat", "--rules", str(path)]) == 2
    assert "rule odd: no ranks" in capsys.readouterr().err


def test_add_a_tuner_one_registry_row(capsys, monkeypatch):
    """Recipe "Add a tuner": a class set by a frozen config whose ``start`` opens a session
    (``next_batch``/``update``), one row in TUNERS, and the CLI runs it."""
    import sys
    import types
    from dataclasses import dataclass

    from autotune.registry import TUNERS
    from autotune.tuners import GridSearch, IncrementalTuner, TunerRow, configure

    @dataclass(frozen=True)
    class FirstLegalConfig:
        batch: int = 8

    class FirstLegal(IncrementalTuner):
        name = "first-legal"
        presets = {"first-legal-4": FirstLegalConfig(batch=4)}

        def __init__(self, config=FirstLegalConfig(), **overrides):
            configure(self, config, overrides)

        def start(self, workload, seed=0):
            return GridSearch(batch=self.batch).start(workload, seed)

    module = types.ModuleType("toy_tuner")
    module.FirstLegal = FirstLegal
    monkeypatch.setitem(sys.modules, "toy_tuner", module)
    monkeypatch.setitem(TUNERS, "first-legal", TunerRow("toy_tuner:FirstLegal"))
    monkeypatch.setitem(TUNERS, "first-legal-4", TunerRow("toy_tuner:FirstLegal", "first-legal-4"))
    assert main(["tune", "--shape", "decode", "--tuner", "first-legal", "--trials", "8"]) == 0
    assert "first-legal on" in capsys.readouterr().out
    assert TUNERS["first-legal-4"].build().batch == 4 and TUNERS["first-legal"].build(batch=2).batch == 2


def test_add_a_device_from_a_json_file(tmp_path, capsys):
    """Recipe "Add a device": a JSON profile works wherever a device is asked for."""
    dev = tmp_path / "slow.json"
    dev.write_text(json.dumps({"name": "slow", "peak_flops": 1e12, "bandwidth": 1e10, "launch_us": 5.0}))
    assert main(["cost", "qkv", "--device", str(dev)]) == 0
    assert "qkv on slow" in capsys.readouterr().out
    assert main(["optimize", "qkv", "--search", "taso", "--device", str(dev), "--preset", "quick"]) == 0


def test_add_an_experiment_one_row(monkeypatch, capsys, tmp_path):
    """Recipe "Add an experiment": an Experiment row in a listed module becomes a subcommand."""
    import sys
    import types

    from experiments.command import Experiment, add_sweep_options, sweep_kwargs
    from experiments.commands import experiment
    from experiments.sweep import Cell, RunOptions, run_cells

    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--greeting", default="hello")
        add_sweep_options(p, str(tmp_path / "toy"), device=False)

    def toy_run(out, *, greeting: str, seed: int = 0, options: RunOptions = RunOptions(), command: str = ""):
        seen.append(options)
        return run_cells([Cell.of("toy", "builtins:dict", greeting=greeting, seed=seed)], out, options=options)

    def run(args: argparse.Namespace) -> int:
        [row] = toy_run(Path(args.out), greeting=args.greeting, seed=args.seed, **sweep_kwargs(args))
        print(f"{row['greeting']} from a toy experiment")
        return 0

    seen: list[RunOptions] = []
    module = types.ModuleType("toy_experiment")
    module.EXPERIMENTS = (Experiment("toy", "a toy experiment", add, run),)
    monkeypatch.setitem(sys.modules, "toy_experiment", module)
    monkeypatch.setattr(experiment, "EXPERIMENT_MODULES", experiment.EXPERIMENT_MODULES + ["toy_experiment"])
    assert main(["experiment", "toy", "--greeting", "hi", "--workers", "2"]) == 0
    assert "hi from a toy experiment" in capsys.readouterr().out
    assert [o.workers for o in seen] == [2] and seen[0].executor == "local"  # the flags, as one value
    assert list((tmp_path / "toy" / "cells" / "toy").glob("*.json"))  # its cell, saved for a resumed run


def test_add_a_search_one_registry_row(monkeypatch, capsys):
    """Recipe "Add a search": a class on the ``Search`` interface, one row in SEARCHES, and
    ``optimize --search NAME`` runs it, verifies its result and prints its summary."""
    import sys
    import types
    from dataclasses import dataclass

    from eqsat.search import SearchResult
    from experiments import searches

    @dataclass(frozen=True)
    class Kept:
        def summary(self) -> str:
            return "input kept"

        def detail_lines(self) -> list[str]:
            return []

        def to_dict(self) -> dict:
            return {}

    @dataclass(frozen=True)
    class Limits:
        seconds: float = 1.0

    class KeepInput:
        name = "keep-input"
        presets = {"only": Limits(), "quick": Limits(0.1)}
        default_preset = "only"
        default_rule_sets = ("epilogue",)

        def limits(self, preset, model=""):
            return self.presets[preset]

        def warm(self):
            """Nothing to start."""

        def run(self, graph, rules, cost_model, limits):
            us = cost_model.graph_time_us(graph)
            return SearchResult(self.name, "", cost_model.name, us, us, graph, 0.0, "kept", Kept())

    module = types.ModuleType("toy_search")
    module.KeepInput = KeepInput
    monkeypatch.setitem(sys.modules, "toy_search", module)
    monkeypatch.setitem(searches.SEARCHES, "keep-input", searches.SearchRow("toy_search:KeepInput", "keep the input"))
    searches.get_search.cache_clear()
    try:
        assert main(["optimize", "qkv", "--search", "keep-input"]) == 0
    finally:
        searches.get_search.cache_clear()
    out = capsys.readouterr().out
    assert "42.28 -> 42.28 µs" in out and "input kept" in out and "stop: kept" in out
