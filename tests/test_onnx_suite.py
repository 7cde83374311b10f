"""``eqsat-lab experiment onnx-suite`` on a sample of ONNX's own backend test cases: none crashes,
none comes back wrong (the full suite is the experiment; docs/results/onnx_suite/README.md)."""
from __future__ import annotations

import json

from experiments.cli import main
from experiments.runs import onnx_suite


def test_a_sample_of_onnxs_backend_cases_reads_and_writes_back_equal_or_is_refused(tmp_path, capsys):
    kinds = [k for k in onnx_suite.KINDS if k != "light"]  # the light models take seconds each: the experiment's
    assert main(["experiment", "onnx-suite", "--kinds", ",".join(kinds), "--sample", "200",
                 "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "onnx_suite.json").read_text())["rows"]
    assert len(rows) == 200 and {r["kind"] for r in rows} <= set(kinds)
    by = {c: [r for r in rows if r["class"] == c] for c in onnx_suite.CLASSES}
    assert not by["crashed"] and not by["wrong"], [(r["case"], r["message"]) for r in by["crashed"] + by["wrong"]]
    assert len(by["equal"]) + len(by["equal-opaque"]) > 100
    assert all(r["message"] and "\n" not in r["message"] for r in by["refused"])
    assert "| total |" in capsys.readouterr().out


def test_the_sample_is_drawn_with_the_seed_and_an_unknown_family_is_a_user_error(capsys):
    names = [("node", f"c{i}") for i in range(50)]
    assert onnx_suite.pick(names, 10, None, 0) == onnx_suite.pick(names, 10, None, 0) != onnx_suite.pick(names, 10, None, 1)
    assert onnx_suite.pick(names, 10, 3, 0) == onnx_suite.pick(names, 10, None, 0)[:3]
    assert main(["experiment", "onnx-suite", "--kinds", "nodes"]) == 2
    assert "no case family 'nodes'" in capsys.readouterr().err
