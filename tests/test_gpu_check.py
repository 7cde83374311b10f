"""The GPU check's two halves: the searching half writes graph files that read back as the very
graphs the search chose; the measuring half imports nothing the search needs and, on this CPU,
runs the folder end to end (a dry run of what the GPU machine runs)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eqsat.errors import EqsatError
from eqsat.ir.graph import Graph, input_, node, weight
from eqsat.ir.graphfile import from_json, read_graph, to_json, write_graph
from eqsat.models import build

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("model", ["resnet_block", "bert", "nasrnn"])
def test_a_graph_file_reads_back_as_the_same_graph(tmp_path, model):
    params = {"resnet_block": {"n": 1, "c": 8, "hw": 8}, "bert": {"seq": 8, "hidden": 32, "heads": 2, "layers": 1},
              "nasrnn": {"steps": 2, "hidden": 16}}[model]
    graph = build(model, **params)
    write_graph(graph, tmp_path / "g.json")
    again = read_graph(tmp_path / "g.json")
    assert again == graph and again.digest == graph.digest and again.name == graph.name


def test_fixed_weights_travel_and_a_malformed_file_is_one_sentence(tmp_path):
    x, m = input_("x", (2, 3)), weight("m", (2, 3))
    mask = np.asarray([[1.0, 0, 1], [0, 1, 0]])
    graph = Graph((node("ewmul", x, m),), "fp32", "p").with_fixed({"m": mask})
    again = from_json(json.loads(json.dumps(to_json(graph))))
    assert again == graph and np.array_equal(again.fixed["m"], mask)
    bad = to_json(graph)
    bad["nodes"][-1][2] = [7]  # reads a node that is not before it
    with pytest.raises(EqsatError, match="not before it"):
        from_json(bad, "bad.json")
    with pytest.raises(EqsatError, match="not an eqsat-lab graph file"):
        from_json({"nodes": []}, "x.json")


def test_the_measuring_half_imports_nothing_the_search_needs():
    """The GPU machine has numpy, onnx and torch, but no egglog, highspy, scipy or xgboost."""
    pytest.importorskip("torch")
    probe = ("import sys\nfor m in ('egglog', 'highspy', 'scipy', 'xgboost', 'networkx', 'onnxruntime'):\n"
             "    sys.modules[m] = None\nimport eqsat.pytorch.gpu_check, eqsat.pytorch.module, eqsat.ir.graphfile\n"
             "print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_both_halves_run_end_to_end_on_this_cpu(tmp_path):
    """The searching half writes lora's two graphs; the measuring half (a CPU dry run, no
    torch.compile) times both, finds them equal, and writes its three files."""
    pytest.importorskip("torch")
    from eqsat.pytorch import gpu_check
    from experiments.runs.gpu_check import run

    run(["lora", "resnet_block"], tmp_path, seed=0, quick=True)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    entry, convs = manifest["models"]
    assert entry["search"]["changed"] and entry["predicted"]["h100"]["eqsat"] < entry["predicted"]["h100"]["original"]
    assert entry["layouts"] == {} and convs["layouts"] == {"eqsat+channels_last": "channels_last"}
    assert gpu_check.main([str(tmp_path), str(tmp_path / "m"), "--runs", "4", "--compile-share", "0"]) == 0
    rows = json.loads((tmp_path / "m" / "gpu_check.json").read_text())["rows"]
    assert [(r["model"], r["variant"], r["layout"]) for r in rows] == [
        ("lora", "original", "contiguous"), ("lora", "eqsat", "contiguous"),
        ("resnet_block", "original", "contiguous"), ("resnet_block", "eqsat", "contiguous"),
        ("resnet_block", "eqsat+channels_last", "channels_last")]
    assert all(r["eager_us"] > 0 and r["max_rel_diff"] < 1e-3 for r in rows) and rows[-1]["changed"]
    assert "| lora | eqsat |" in (tmp_path / "m" / "gpu_check.md").read_text()
    assert gpu_check.main([str(tmp_path / "nothing"), str(tmp_path / "m2")]) == 2
