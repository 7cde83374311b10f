"""The eqsat-lab command line: cost, table, models, dot and rules."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from experiments.cli import main


def test_cost_prints_and_writes_json(tmp_path, capsys):
    out = tmp_path / "qkv.json"
    assert main(["cost", "qkv", "--device", "h100", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "42.28 µs" in text and "matmul" in text
    data = json.loads(out.read_text())
    assert data["total_us"] == pytest.approx(42.28, abs=0.01)
    assert [r["op"] for r in data["ops"]] == ["matmul"] * 3
    assert {"flops", "bytes", "time_us", "kind"} <= set(data["ops"][0])


def test_cost_with_parameters_and_custom_device(tmp_path, capsys):
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps({"name": "toy", "peak_flops": 1e12, "bandwidth": 1e11, "launch_us": 1.0}))
    assert main(["cost", "lora", "--param", "tokens=8", "--device", str(dev)]) == 0
    assert "lora on toy" in capsys.readouterr().out


def test_table_writes_csv_and_json(tmp_path, capsys):
    assert main(["table", "--models", "qkv,lora", "--devices", "h100,weak", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "qkv" in text and "lora" in text and "weak µs" in text
    rows = json.loads((tmp_path / "cost_table.json").read_text())
    assert len(rows) == 4
    assert (tmp_path / "cost_table.csv").read_text().startswith("model,device,")


def test_models_and_dot(capsys):
    assert main(["models"]) == 0
    assert "inception_v3" in capsys.readouterr().out
    assert main(["dot", "qkv"]) == 0
    assert capsys.readouterr().out.startswith('digraph "qkv"')


def test_rules_check_and_fmt(tmp_path, capsys):
    path = tmp_path / "r.rules"
    path.write_text("# x\nassoc: (matmul ?a (matmul ?b ?c)) <=> (matmul (matmul ?a ?b) ?c) ; origin=generated\n")
    assert main(["rules", "check", str(path)]) == 0
    assert "1 rules (1 single-output, 0 multi-output; 1 generated)" in capsys.readouterr().out
    assert main(["rules", "fmt", str(path)]) == 0
    assert capsys.readouterr().out.startswith("assoc: (matmul")


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    assert main(["cost", "alexnet"]) == 2
    assert "unknown model 'alexnet'" in capsys.readouterr().err
    assert main(["cost", "qkv", "--device", "tpu"]) == 2
    assert "unknown device 'tpu'" in capsys.readouterr().err
    bad = tmp_path / "bad.rules"
    bad.write_text("ok: (relu ?a) => (relu ?a)\n(matmul ?a) => ?a\n")
    assert main(["rules", "check", str(bad)]) == 2
    assert f"{bad}:2:2:" in capsys.readouterr().err
    out = tmp_path / "never.json"
    assert main(["cost", "qkv", "--param", "d_model=7,3", "--json", str(out)]) == 2
    assert not out.exists()


def test_console_script_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "experiments.cli", "cost", "lora"], capture_output=True, text=True)
    assert proc.returncode == 0 and "39.72 µs" in proc.stdout


def test_user_errors_are_one_line_with_exit_2(tmp_path, capsys):
    """Hostile input: a text size, a NaN or broken device file, a NaN limit and an empty rule file
    each give one line naming what and where, exit 2, no traceback."""
    nan_dev = tmp_path / "nan.json"
    nan_dev.write_text('{"name": "x", "peak_flops": 1e12, "bandwidth": 1e10, "launch_us": NaN}')
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x", ')
    empty = tmp_path / "empty.rules"
    empty.write_text("# nothing here\n")
    cases = [(["cost", "bert", "--param", "layers=abc"], "sizes are integers"),
             (["cost", "qkv", "--device", str(nan_dev)], "launch_us must be a finite number"),
             (["cost", "qkv", "--device", str(broken)], "broken.json: not valid JSON"),
             (["optimize", "qkv", "--rules", str(empty)], "empty.rules: the rule file has no rules"),
             (["optimize", "qkv", "--search", "eqsat", "--alpha", "1.2"], "--alpha applies to another search")]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    with pytest.raises(SystemExit) as exc:
        main(["optimize", "qkv", "--alpha", "nan"])
    assert exc.value.code == 2 and "finite number" in capsys.readouterr().err


def test_a_graph_whose_output_is_its_input_reports_no_speedup():
    from eqsat.cost.roofline import RooflineCost
    from eqsat.ir.graph import Graph, input_
    from eqsat.rules.rulesets import default_rules
    from eqsat.search import run_verified
    from taso_baseline.search import AlphaSearch

    g = Graph((input_("x", (4, 4)),))
    r = run_verified(AlphaSearch(), g, default_rules(["matrix"]), RooflineCost("h100"), AlphaSearch.presets["quick"])
    assert r.original_us == r.best_us == 0.0 and r.speedup_pct == 0.0 and r.to_dict()["speedup_pct"] == 0.0


def test_cost_on_the_measured_device(tmp_path, capsys, monkeypatch):
    """`cost --device ort-cpu` times each kernel once; a second run reads them all back."""
    from eqsat.cost.measured import database

    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    monkeypatch.setattr(database, "machine_load", lambda: (0.5, 2))  # quiet: nothing is timed again for load
    args = ["cost", "resnet_block", "--param", "n=1", "--param", "c=8", "--param", "hw=8", "--device", "ort-cpu"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "resnet_block on ort-cpu (float32)" in first and "predicted end-to-end latency" in first
    database._OPEN.clear()  # as a new process
    assert main(args) == 0
    assert "0 kernel(s) timed now" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:  # refused at parse time, naming the flag
        main(["cost", "qkv", "--device", "ort-cpu:0"])
    assert exit_.value.code == 2
    assert "argument --device: device 'ort-cpu:0': the thread count" in capsys.readouterr().err


def test_a_command_line_loads_only_the_command_it_names():
    """A run imports its own command's module, not all eleven (0.34 CPU s); help and unknown
    commands still see every command."""
    from experiments.cli import COMMAND_MODULES, build_parser, commands

    def names(parser):
        return set(next(a for a in parser._actions if a.dest == "command").choices)

    assert [c.name for c in commands()] == list(COMMAND_MODULES)  # each module is named as its command
    assert names(build_parser(["models"])) == {"models"}
    assert names(build_parser(["-h"])) == names(build_parser(["bogus"])) == names(build_parser()) == set(COMMAND_MODULES)
