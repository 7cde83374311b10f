"""Experiments: the compare job, resumable cells, local/Ray executors, budget/alpha/hardware tables."""
from __future__ import annotations

import collections
import csv
import json

import pytest

from eqsat.models import build
from eqsat.rules.rulesets import default_rules
from experiments import sweep
from experiments.cli import main
from experiments.runs.budget import curve_rows
from experiments.runs.hardware import penalty_rows
from experiments.sweep import Cell, RunOptions, run_cells
from taso_baseline.search import AlphaLimits, AlphaSearch, alpha_search


def _cells(n: int) -> list[Cell]:
    # builtins.dict(**params) returns the params: a cell function any process can import
    return [Cell.of("toy", "builtins:dict", index=i, seed=7) for i in range(n)]


def test_compare_quick_smoke(tmp_path, capsys):
    """The CI smoke run: both searches on two small models, on their own rules and on the same
    rules, every output file, verified results."""
    assert main(["compare", "--quick", "--models", "qkv,lora", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Table 1 of 2 (compare), device h100: each search on its own default rules" in text
    assert "TASO α search (taso): matrix conv epilogue folds (" in text
    assert "Table 2 of 2 (compare_same_rules), device h100: both searches on the same rules" in text
    assert "TASO α search (taso): matrix-min conv-min epilogue folds (334 rules)" in text
    assert text.count("geometric mean of the search-time ratio") == 2
    assert text.count("best cost, eqsat against taso: better on 1, equal on 1, worse on 0 of 2 models") == 2
    for stem, taso_rules in (("compare", None), ("compare_same_rules", "matrix-min,conv-min,epilogue,folds")):
        rows = list(csv.DictReader(open(tmp_path / f"{stem}.csv")))
        assert [r["model"] for r in rows] == ["qkv", "lora"]
        data = json.loads((tmp_path / f"{stem}.json").read_text())
        assert {r["search"] for r in data["runs"]} == {"taso", "eqsat"}
        assert [r.get("rules") for r in data["runs"] if r["search"] == "taso"] == [taso_rules] * 2
        assert all(r["verified"] for r in data["runs"])
        assert data["geomean_time_ratio"] > 0 and data["time_limit_cells"] == 0
        for row in data["rows"]:
            assert row["eqsat_us"] <= row["original_us"] + 1e-9 and row["taso_us"] <= row["original_us"] + 1e-9
        lora = next(r for r in data["rows"] if r["model"] == "lora")
        assert lora["eqsat_us"] == pytest.approx(21.4, rel=0.005)  # the e-graph needs no α to climb
        assert lora["eqsat_vs_taso"] == "better"
        assert (tmp_path / f"{stem}.png").stat().st_size > 10_000
    # the e-graph reads its own rules in both tables: one cell, run once
    assert len(list((tmp_path / "cells" / "compare").glob("*.json"))) == 6


def test_compare_marks_time_limits_and_counts_best_costs():
    from experiments.compare import format_table, row_from, summary, tables

    def run(search, us, seconds, stop):  # a clock's stop is marked time-bounded, as the searches mark it
        return {"search": search, "ops": 3, "original_us": 10.0, "best_us": us, "speedup_pct": 0.0,
                "search_s": seconds, "stop": stop, "verified": True, "time_bounded": "time limit" in stop}

    rows = [row_from("a", {"taso": run("taso", 8.0, 4.0, "time limit"), "eqsat": run("eqsat", 7.0, 1.0, "saturated")}),
            row_from("b", {"taso": run("taso", 8.0, 1.0, "budget"), "eqsat": run("eqsat", 8.0, 4.0, "saturated")}),
            row_from("c", {"taso": run("taso", 6.0, 2.0, "budget"),
                           "eqsat": run("eqsat", 7.0, 2.0, "hard time limit (iteration 3 overran)")})]
    s = summary(rows)
    assert (s["better"], s["equal"], s["worse"], s["time_limit_cells"]) == (1, 1, 1, 2)
    assert s["geomean_time_ratio"] == pytest.approx(1.0)
    own = tables()[0]
    text = format_table(own, 1, rows, "h100", collections.defaultdict(lambda: 1))  # any rule sets: 1 rule
    lines = {line.split()[0]: line for line in text.splitlines()}
    assert "4.00 T" in lines["a"] and "1.00 T" not in lines["a"] and lines["a"].endswith("better")
    assert "2.00 T" in lines["c"] and lines["c"].endswith("worse") and " T" not in lines["b"]
    assert "better on 1, equal on 1, worse on 1 of 3 models" in text and "(2 cells)" in text


def test_compare_runs_both_searches_on_the_rule_sets_named(tmp_path, capsys):
    """``--rules`` gives both searches the same sets in the second table (each run records them);
    the first stays each search on its own; an unknown set is one clear error before any cell runs."""
    assert main(["compare", "--quick", "--models", "qkv", "--rules", "matrix-min", "epilogue", "matrix4-min",
                 "--out", str(tmp_path / "k4")]) == 0
    runs = json.loads((tmp_path / "k4" / "compare_same_rules.json").read_text())["runs"]
    assert {r["search"] for r in runs} == {"taso", "eqsat"}
    assert all(r["rules"] == "matrix-min,epilogue,matrix4-min" and r["verified"] for r in runs)
    own = json.loads((tmp_path / "k4" / "compare.json").read_text())["runs"]
    assert all("rules" not in r for r in own)
    capsys.readouterr()
    assert main(["compare", "--quick", "--rules", "matrix9", "--out", str(tmp_path / "bad")]) == 2
    assert "matrix9" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_unknown_model_is_a_clear_error_and_writes_nothing(tmp_path, capsys):
    assert main(["compare", "--models", "qkv,resnet51", "--out", str(tmp_path / "o")]) == 2
    assert "resnet51" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_finished_cells_are_read_back_not_recomputed(tmp_path, monkeypatch):
    cells = _cells(4)
    first = run_cells(cells, tmp_path, options=RunOptions(progress=False))
    assert first == [{"index": i, "seed": 7} for i in range(4)]
    cells[1].path(tmp_path).unlink()  # a cell the interrupted run never finished
    cells[2].path(tmp_path).write_text('{"fn": "builtins:di')  # a torn write
    ran: list[Cell] = []
    real = sweep.run_cell
    monkeypatch.setattr(sweep, "run_cell", lambda c: ran.append(c) or real(c))
    assert run_cells(cells, tmp_path, options=RunOptions(progress=False)) == first
    assert ran == [cells[1], cells[2]]


def test_a_progress_bar_leaves_the_e_graph_worker_free_to_fork(tmp_path):
    """tqdm's monitor thread, started by the cells' bar, made ``compare``'s e-graph worker start by
    spawn (a worker forks only from a lone thread): 0.3 s more start-up, the imports done again."""
    from eqsat.egraph.process import start_method

    if start_method() != "fork":
        pytest.skip("this platform or test process cannot fork the worker anyway")
    run_cells(_cells(2), tmp_path, options=RunOptions(progress=True))
    assert start_method() == "fork"


def test_the_next_cell_starts_its_fixed_work_while_one_runs(tmp_path, monkeypatch):
    """A cell function's ``prefetch`` hears of the next cell (and the one running) before the
    running one starts; one that raises changes nothing but the time it would have saved."""
    heard = []

    def toy(**params):
        heard.append(("run", params["index"]))
        return params

    def hook(params, running):
        heard.append(("prefetch", params["index"], running["index"]))
        if params["index"] == 2:
            raise RuntimeError("a failed prefetch")

    toy.prefetch = hook
    monkeypatch.setattr(sweep, "resolve", lambda name: toy)
    got = run_cells(_cells(3), tmp_path, options=RunOptions(progress=False))
    assert got == [{"index": i, "seed": 7} for i in range(3)]
    assert heard == [("prefetch", 1, 0), ("run", 0), ("prefetch", 2, 1), ("run", 1), ("run", 2)]


def test_compare_prepares_the_e_graph_cell_while_the_alpha_cell_runs(monkeypatch):
    """``compare``'s e-graph cell follows the α cell of the same model: its prefetch builds the
    graph and sends the worker the graph's preload key then, and the cell searches that very graph
    (so its run is recorded under the key for the next one)."""
    from eqsat.egraph.optimize import SaturationWorker
    from experiments import searches

    eqsat_cell = {"model": "lora", "search": "eqsat", "device": "h100", "seed": 0, "quick": False}
    searches.prefetch_search(eqsat_cell, {"model": "qkv", "search": "eqsat"})  # its worker is busy: nothing
    assert not searches._PREFETCHED
    searches.prefetch_search(eqsat_cell, {"model": "lora", "search": "taso"})
    prepared = SaturationWorker.shared().prepared
    assert prepared is not None and searches._PREFETCHED == {searches._graph_key("lora", "eqsat", None): prepared[0]}
    used = []
    real = searches.search_graph
    monkeypatch.setattr(searches, "search_graph", lambda graph, *a, **k: used.append(graph) or real(graph, *a, **k))
    searches.run_search(**(eqsat_cell | {"search": "taso", "quick": True}))  # the α cell between: not its graph
    row = searches.run_search(**eqsat_cell)
    assert used[1] is prepared[0] and used[0] is not prepared[0] and not searches._PREFETCHED and row["verified"]


def test_a_changed_cell_is_not_confused_with_a_saved_one(tmp_path):
    a, b = Cell.of("toy", "builtins:dict", x=1), Cell.of("toy", "builtins:dict", x=2)
    assert a.path(tmp_path) != b.path(tmp_path)
    run_cells([a], tmp_path, options=RunOptions(progress=False))
    assert run_cells([a, b], tmp_path, options=RunOptions(progress=False)) == [{"x": 1}, {"x": 2}]


def test_local_processes_give_the_same_results(tmp_path):
    cells = _cells(5)
    assert run_cells(cells, tmp_path / "p", options=RunOptions(workers=2, progress=False)) == run_cells(
        cells, tmp_path / "s", options=RunOptions(progress=False)
    )


def test_ray_executor_runs_the_same_cells(tmp_path):
    ray = pytest.importorskip("ray")
    try:
        got = run_cells(_cells(3), tmp_path, options=RunOptions(executor="ray", progress=False))
    finally:
        ray.shutdown()
    assert got == [{"index": i, "seed": 7} for i in range(3)]


def test_bad_executor_and_workers_are_rejected():
    with pytest.raises(ValueError, match="executor"):
        RunOptions(executor="dask")
    with pytest.raises(ValueError, match="workers"):
        RunOptions(workers=0)


def test_the_command_line_builds_one_run_options_value():
    """``--workers``/``--executor`` become one RunOptions, handed to the experiment's ``run`` whole."""
    import argparse

    from experiments.command import add_sweep_options, sweep_kwargs

    p = argparse.ArgumentParser()
    add_sweep_options(p, "results/x")
    kwargs = sweep_kwargs(p.parse_args(["--workers", "3"]))
    assert set(kwargs) == {"options", "command"}
    assert kwargs["options"].workers == 3 and kwargs["options"].executor == "local"
    assert kwargs["options"] == RunOptions(workers=3, progress=kwargs["options"].progress)


def test_alpha_trace_gives_every_smaller_budget():
    """The α search with budget B is a prefix of a longer run: its trace answers every budget."""
    rules = default_rules(AlphaSearch.default_rule_sets)
    graph = build("resnet_block")
    long = alpha_search(graph, rules, "h100", AlphaLimits(alpha=1.5, budget=100))  # 400 took 8 s, 100 2.4 s
    bests = [t.best_us for t in long.work.trace]
    assert bests == sorted(bests, reverse=True) and bests[-1] == pytest.approx(long.best_us)
    for budget in (2, 10, 60):
        short = alpha_search(graph, rules, "h100", AlphaLimits(alpha=1.5, budget=budget))
        from_trace = min(t.best_us for t in long.work.trace if t.expanded <= budget)
        assert short.best_us == pytest.approx(from_trace)


def test_budget_curve_rows_from_cells():
    taso = {
        "model": "m",
        "search": "taso",
        "alpha": 1.3,
        "original_us": 10.0,
        "trace": [[0.0, 0, 10.0], [0.5, 3, 8.0], [0.9, 9, 8.0]],
    }
    eqsat = {
        "model": "m",
        "search": "eqsat",
        "k_multi": 1,
        "iteration_limit": 3,
        "node_limit": 50_000,
        "search_s": 2.0,
        "best_us": 7.5,
        "original_us": 10.0,
        "stop": "saturated",
    }
    rows = curve_rows([taso, eqsat])
    assert [r["best_us"] for r in rows] == [10.0, 8.0, 8.0, 7.5]
    assert rows[-1]["setting"] == "k_multi=1" and rows[0]["setting"] == "alpha=1.3"


def test_hardware_penalties_are_relative_to_each_devices_own_best():
    results = [
        {"model": "m", "found_on": "a", "cost_on": {"a": 10.0, "b": 30.0}, "input_on": {"a": 12.0, "b": 25.0}},
        {"model": "m", "found_on": "b", "cost_on": {"a": 11.0, "b": 20.0}, "input_on": {"a": 12.0, "b": 25.0}},
    ]
    pen = {(r["found_on"], r["run_on"]): r["penalty"] for r in penalty_rows(results)}
    assert pen == {("a", "a"): 1.0, ("a", "b"): 1.5, ("b", "a"): 1.1, ("b", "b"): 1.0}


@pytest.mark.slow
def test_hardware_experiment_reproduces_the_resnet_penalty(tmp_path):
    """The reference case: the h100-best ResNet block graph is 1.34x slower on the weak device."""
    assert (
        main(["experiment", "hardware", "--models", "resnet_block", "--devices", "h100,weak", "--out", str(tmp_path)])
        == 0
    )
    rows = json.loads((tmp_path / "hardware.json").read_text())["rows"]
    pen = {(r["found_on"], r["run_on"]): r for r in rows}
    assert pen[("h100", "h100")]["cost_us"] == pytest.approx(57.8, rel=0.005)
    assert pen[("h100", "weak")]["penalty"] == pytest.approx(1.34, abs=0.01)


def test_real_quick_optimizes_on_measured_costs_and_times_every_file(tmp_path, monkeypatch, capsys):
    """`experiment real --quick`: both searches on ort-cpu, the roofline's pick beside them, every
    written file timed end to end, and the cost model's accuracy over the candidate graphs."""
    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    assert main(["experiment", "real", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "real.json").read_text())
    assert {r["model"] for r in data["rows"]} == {"resnet_block", "lora"}
    for r in data["rows"]:
        for name in ("taso", "eqsat", "h100"):
            assert r[f"{name}_verified"] and r[f"{name}_ms"] > 0 and r[f"{name}_speedup"] > 0
            written = tmp_path / "models" / f"{r['model']}.{name}.onnx"
            if not r[f"{name}_changed"]:  # a kept input is handed back as the input file: speedup 1, not noise
                assert written.read_bytes() == (tmp_path / "models" / f"{r['model']}.onnx").read_bytes()
                assert r[f"{name}_speedup"] == 1.0 and r[f"{name}_measured_ratio"] > 0
            else:
                assert r[f"{name}_speedup"] == r[f"{name}_measured_ratio"]
    assert any(not r[f"{n}_changed"] for r in data["rows"] for n in ("taso", "eqsat", "h100"))
    summary = data["summary"]
    assert summary["candidates"] >= 8 and 0 <= summary["mean_relative_error"] < 1
    assert (tmp_path / "real.png").stat().st_size > 0
    assert "Kendall" in capsys.readouterr().out


def test_tuning_budget_holds_tuners_to_the_bound(tmp_path, capsys):
    assert main(["experiment", "tuning-budget", "--tuners", "random,oracle", "--shapes", "small",
                 "--random-shapes", "1", "--seeds", "2", "--trials", "16,32", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "tuning_budget.json").read_text())["rows"]
    assert len(rows) == 2 * 2 * 2  # tuners x shapes x budgets
    oracle = [r for r in rows if r["tuner"] == "oracle"]
    assert all(r["median_pct"] == r["oracle_median_pct"] for r in oracle)
    assert all(r["worst_pct"] <= r["median_pct"] for r in rows)
    assert "holds on" in capsys.readouterr().out


def test_the_pytorch_experiment_reports_an_unchanged_module_as_1_and_splits_a_layout_gain():
    from experiments.runs.pytorch import gains

    timed = {"original_us": 100.0, "original-copy_us": 98.0, "optimized_us": 102.0}
    same = gains(timed | {"changed": False, "layout": "contiguous"})
    assert same["eager_gain"] == 1.0 and same["identical"] and same["eager_measured"] == pytest.approx(100 / 102)
    laid = gains(timed | {"changed": False, "layout": "channels_last", "optimized_us": 80.0, "rewritten_us": 97.0})
    assert (laid["eager_gain"], laid["rewrite_gain"], laid["layout_gain"]) == (1.25, 1.0, 1.25)
    both = gains(timed | {"changed": True, "layout": "channels_last", "optimized_us": 80.0, "rewritten_us": 90.0})
    assert both["rewrite_gain"] == pytest.approx(100 / 90) and both["layout_gain"] == pytest.approx(90 / 80)
    assert not both["identical"] and both["aa_ratio"] == pytest.approx(100 / 98)
