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
