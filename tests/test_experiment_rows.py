"""Every experiment and benchmark is a row of the registry: listed with its output files, and
each benchmark row runs from the CLI and writes exactly the files its row names."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.commands.experiment import EXPERIMENT_MODULES, experiments

ROOT = Path(__file__).resolve().parents[1]


def test_list_names_every_modules_rows_and_their_outputs(capsys):
    assert main(["experiment", "--list"]) == 0
    out = capsys.readouterr().out
    for module in EXPERIMENT_MODULES:
        for row in importlib.import_module(module).EXPERIMENTS:
            assert row.outputs, f"{row.name} names no output files"
            line = next(x for x in out.splitlines() if x.split() and x.split()[0] == row.name)
            writes = out.splitlines()[out.splitlines().index(line) + 1]
            assert writes.split("writes: ")[1] == ", ".join(row.outputs)


def test_no_experiment_named_is_a_user_error(capsys):
    assert main(["experiment"]) == 2
    assert "--list" in capsys.readouterr().err


def test_every_benchmark_module_is_a_row_and_has_no_entry_point_of_its_own():
    runs = {r.run.__qualname__ for r in experiments()}
    for path in sorted((ROOT / "experiments" / "runs").glob("*.py")):
        text = path.read_text()
        assert "__main__" not in text and "ArgumentParser(" not in text, f"{path.name} parses its own command line"
        if path.name.startswith("bench_"):
            assert f"lazy(experiments.runs.{path.stem}:main)" in runs, f"{path.name} is not an experiment row"


def _written(out: Path, name: str) -> None:
    row = next(r for r in experiments() if r.name == name)
    for pattern in row.outputs:
        assert list(out.glob(re.sub(r"<[^>]+>", "*", pattern))), f"{name} did not write {pattern}"


def _egraph(tmp_path: Path) -> str:
    dump = tmp_path / "qkv.egraph.json"
    assert main(["optimize", "qkv", "--search", "eqsat", "--preset", "quick", "--dump-egraph", str(dump)]) == 0
    return str(dump)


QUICK = {
    "caps": ["--models", "qkv", "--nodes", "300", "--seconds", "0.2"],
    "rulegen": ["--worlds", "matrix", "--max-k", "1", "--workers", "1"],
    "novelty": ["--max-ops", "2"],
    "extraction": ["--solvers", "highs", "--seconds", "5"],
    "chain": ["--max-k", "2", "--workers", "1"],
    "soundness": ["--sets", "epilogue", "--per-rule", "1"],
    "fuzz": ["--rounds", "1", "--scale", "1", "--select", "device_files"],
    "walltime": ["--models", "qkv,bert:layers=1/2:hidden=64:seq=8:heads=2", "--runs", "1"],  # depths: the curve
}
SLOW = {"chain", "soundness", "fuzz", "walltime"}  # 6-50 s each on 2 busy cores


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in QUICK])
def test_each_benchmark_row_runs_in_quick_mode(name, tmp_path, capsys):
    extra = [_egraph(tmp_path)] if name == "extraction" else []
    out = tmp_path / "out"
    assert main(["experiment", name, *extra, *QUICK[name], "--out", str(out)]) == 0
    _written(out, name)


def test_every_benchmark_row_has_a_quick_mode_here():
    bench = {r.name for r in importlib.import_module("experiments.runs.benchmarks").EXPERIMENTS}
    assert bench == set(QUICK)


def test_a_bad_benchmark_option_is_one_line(tmp_path, capsys):
    assert main(["experiment", "soundness", "--sets", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown rule set(s) nope" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
