"""The ort-fusions experiment: which onnxruntime-only ops a graph holds, which optimizer variant is
timed, the summary against issue 38's 1.05x goal, and a clear error without the optimizer's sympy."""
from __future__ import annotations

import importlib.util

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from experiments.runs import ort_fusions  # noqa: E402


def test_contrib_ops_counts_onnxruntime_only_ops_in_either_domain():
    nodes = [helper.make_node("SkipLayerNormalization", ["x", "r", "g"], ["a"], domain="com.microsoft"),
             helper.make_node("SimplifiedLayerNormalization", ["a", "g"], ["b"]),  # onnxruntime's, standard domain
             helper.make_node("LayerNormalization", ["b", "g"], ["c"]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    assert ort_fusions.contrib_ops(graph) == {"SimplifiedLayerNormalization": 1, "SkipLayerNormalization": 1}


def test_the_variant_onnxruntime_runs_with_fewest_nodes_is_timed_ties_to_more_fusions():
    tried = [{"runtime_nodes": 50, "contrib": {}}, {"runtime_nodes": 40, "contrib": {"FastGelu": 1}},
             {"runtime_nodes": 40, "contrib": {"FastGelu": 1, "SkipLayerNormalization": 2}}]
    assert ort_fusions.pick(tried) == 2
    assert ort_fusions.pick(tried[:2]) == 1


def test_sizes_come_from_the_zoo_builders_and_labels_name_them():
    assert ort_fusions.sizes("gpt2") == (12, 768)
    assert ort_fusions.sizes("llama_block") == (16, 1024)
    assert ort_fusions.sizes("resnet50") is None and ort_fusions.sizes("not_in_the_zoo") is None
    assert ort_fusions.label({"model_type": "gpt2", "opt_level": 1, "heads": 12, "hidden": 768}) == "gpt2 o1 12x768"
    assert ort_fusions.label({"model_type": "bert", "opt_level": 0, "heads": 0, "hidden": 0}) == "bert o0"


def row(model, ratio, equal=True):
    return {"model": model, "best": "bert o0", "contrib": {"BiasGelu": 6}, "runtime_nodes_in": 200,
            "runtime_nodes_out": 165, "max_diff": 1e-7 if equal else 0.5, "equal": equal, "input_ms": 64.0,
            "fused_ms": 64.0 / ratio, "ratio": ratio, "input_spread": 0.14}


def test_summary_reports_the_geometric_mean_and_what_pays_the_goal_leaving_out_unequal_files():
    lines = ort_fusions.summary([row("vit", 0.9), row("gpt2", 1.1), row("bad", 3.0, equal=False)])
    assert lines[0] == "geometric-mean measured ratio over 2 models: 0.995"
    assert lines[1] == "paying >= 1.05x: gpt2 1.100"
    assert "bad" in lines[2]
    table = ort_fusions.format_table([row("vit", 0.942), row("bad", 3.0, equal=False)])
    assert "| vit | bert o0 | BiasGelu 6 | 200 -> 165 | 1.0e-07 | 64.00 | 67.94 | 0.942 | 14% |" in table
    assert "5.0e-01 (unequal)" in table


def test_without_sympy_the_experiment_is_one_error_naming_the_extra(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sympy" else real(name, *a))
    with pytest.raises(ValueError, match=r"needs sympy: pip install 'eqsat-lab\[ort-fusions\]'"):
        ort_fusions.run(None, tmp_path, zoo=["lora_mlp"])
    assert not list(tmp_path.iterdir())  # no partial output


def test_a_small_gpt2_gets_its_fusions_and_stays_equal(tmp_path):
    pytest.importorskip("sympy")  # onnxruntime's optimizer needs it: the ort-fusions extra
    from experiments.zoo import write_zoo

    [model] = write_zoo(tmp_path / "m", ["gpt2"], small=True)
    out = ort_fusions.fusion_cell(str(model), "d", ("bert", "gpt2"), runs=2, seed=0, out=str(tmp_path))
    assert out["contrib"] == {"FastGelu": 2, "SkipLayerNormalization": 4}
    assert out["equal"] and out["runtime_nodes_out"] < out["runtime_nodes_in"]
    assert out["best"].startswith("gpt2") and out["ratio"] > 0
    assert len(out["variants"]) == 8 and not list((tmp_path / "models" / "ortfused").glob("*.gpt2.*"))


def test_an_optimizer_that_fails_on_every_variant_is_one_error_naming_the_file(tmp_path, monkeypatch):
    from onnxruntime.transformers import optimizer

    def refuse(*args, **kwargs):
        raise AssertionError("no pattern for this graph")

    monkeypatch.setattr(optimizer, "optimize_model", refuse)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path / "relu.onnx"))
    with pytest.raises(ValueError, match="relu.onnx: .* failed on every variant: no pattern for this graph"):
        ort_fusions.fusion_cell(str(tmp_path / "relu.onnx"), "d", ("bert",), runs=2, seed=0, out=str(tmp_path))
