"""``eqsat-lab experiment peers`` (experiments/runs/peers.py): one tiny model through one search and
the peers that are installed (absent ones skipped with a note), every file checked and timed."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def test_the_peers_experiment_writes_one_checked_and_timed_table(tmp_path, capsys):
    from experiments.cli import main
    from experiments.runs.peers import PEERS, available

    out = tmp_path / "peers"
    assert main(["experiment", "peers", "--small", "--runs", "5", "--searches", "eqsat", "--device", "h100",
                 "--peers", "onnxsim,ort-transformers", "--out", str(out)]) == 0
    rows = json.loads((out / "peers.json").read_text())["rows"]
    printed = capsys.readouterr().out
    tools = {r["tool"] for r in rows}
    assert "eqsat" in tools
    for name in ("onnxsim", "ort-transformers"):
        assert (name in tools) == available(PEERS[name])
        assert (name in tools) or f"{name} is not installed" in printed
    for r in rows:
        assert r["status"] in ("ok", "differs", "failed")
        if r["status"] == "ok":
            assert r["max_difference"] <= 1e-3 and r["ratio"] > 0 and r["noise"] >= 0 and r["us"] > 0
    assert (out / "peers.png").stat().st_size > 0 and "geometric mean" in (out / "peers.md").read_text()


def test_realistic_weights_move_every_float_parameter(tmp_path):
    from onnx import numpy_helper

    from experiments.runs.peers import realistic_copy
    from experiments.zoo import ZOO

    src = ZOO["lora_mlp"].write(tmp_path / "m.onnx", small=True)
    dst = realistic_copy(src, tmp_path / "r" / "m.onnx", seed=0)
    before = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(src)).graph.initializer}
    after = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(dst)).graph.initializer}
    assert before.keys() == after.keys()
    for name, arr in before.items():
        assert after[name].shape == arr.shape and after[name].dtype == arr.dtype
        if arr.dtype.kind == "f" and arr.size > 100:
            assert 0.01 < float(np.std(after[name] - arr)) < 0.03
        elif arr.dtype.kind != "f" or arr.size <= 1:  # scalars are constants of the computation
            assert np.array_equal(after[name], arr)


def test_hf_init_zeroes_linear_biases_and_sets_layernorm_to_unit(tmp_path):
    """transformers' initialization: the identities' zero biases and unit scales appear in the copy."""
    from onnx import numpy_helper

    from experiments.runs.peers import hf_init_copy
    from experiments.zoo import ZOO

    src = ZOO["vit"].write(tmp_path / "vit.onnx", small=True)
    model = onnx.load(str(hf_init_copy(src, tmp_path / "hf" / "vit.onnx")))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    norms = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    assert norms and all(np.all(inits[n.input[1]] == 1) and np.all(inits[n.input[2]] == 0) for n in norms)
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    biases = [b for n in model.graph.node if n.op_type == "Add" for a, b in (n.input, n.input[::-1])
              if b in inits and producer.get(a) == "MatMul"]
    assert biases and all(np.all(inits[b] == 0) for b in biases)
