"""What onnxruntime makes of a file: its optimized graph's op counts against the file's, and the
zoo-runtime experiment that lists them beside the zoo's cells."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from eqsat.onnx.runtime_graph import op_label, runtime_graph  # noqa: E402
from experiments.runs import zoo_runtime  # noqa: E402


def conv_relu_model(path, channels: int = 4):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((channels, channels, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    shape = [1, channels, 8, 8]
    graph = helper.make_graph(nodes, "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_onnxruntime_fuses_the_relu_into_the_conv_and_the_counts_show_it(tmp_path):
    r = runtime_graph(conv_relu_model(tmp_path / "m.onnx"))
    assert r.file_ops == {"Conv": 1, "Relu": 1}
    assert r.removed == {"Conv": 1, "Relu": 1}
    [(fused, count)] = [(k, v) for k, v in r.added.items() if "Conv" in k]
    assert count == 1 and fused.endswith("+Relu")  # ms.FusedConv+Relu or nchwc.Conv+Relu, by the CPU
    unoptimized = runtime_graph(tmp_path / "m.onnx", level="DISABLE_ALL")
    assert unoptimized.removed == {} and unoptimized.added == {}


def test_labels_name_the_domain_and_what_was_fused():
    conv = helper.make_node("Conv", ["x", "w", "b", "s"], ["y"], domain="com.microsoft.nchwc", activation="Relu")
    assert op_label(conv) == "nchwc.Conv+Add+Relu"
    assert op_label(helper.make_node("FusedMatMul", ["a", "b"], ["c"], domain="com.microsoft")) == "ms.FusedMatMul"
    assert op_label(helper.make_node("Relu", ["a"], ["b"])) == "Relu"


def test_an_unreadable_model_is_one_error_naming_it(tmp_path):
    from eqsat.onnx.common import OnnxError

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(OnnxError, match="bad.onnx: not an ONNX model"):
        runtime_graph(bad)


def test_the_experiment_lists_each_model_beside_the_zoos_cells(tmp_path, capsys):
    from experiments.cli import main

    models = tmp_path / "models"
    models.mkdir()
    conv_relu_model(models / "tiny.onnx")
    results = tmp_path / "zoo.json"
    results.write_text(json.dumps({"rows": [
        {"model": "tiny", "search": "eqsat", "device": "h100", "status": "ok", "predicted_gain": 1.2,
         "measured_ratio": 0.99, "changed": True, "stop": "saturated"},
        {"model": "tiny", "search": "taso", "device": "ort-cpu", "status": "ok", "predicted_gain": 1.0,
         "measured_ratio": 1.0, "changed": False, "stop": "budget; input kept: measured end to end 0.980x, not",
         "kept": {"guard": "end-to-end", "why": "input kept: measured end to end 0.980x, not", "input_us": 0.98,
                  "best_us": 1.0, "gain": 0.98, "threshold": 0.03, "basis": "measured end to end"}},
        {"model": "other", "search": "taso", "device": "h100", "status": "timeout"}]}))
    out = tmp_path / "out"
    assert main(["experiment", "zoo-runtime", "--models", str(models), "--zoo-results", str(results),
                 "--out", str(out)]) == 0
    [row] = json.loads((out / "zoo_runtime.json").read_text())["rows"]
    assert row["model"] == "tiny" and row["removed"] == {"Conv": 1, "Relu": 1}
    assert row["zoo_cells"] == ("eqsat h100: 1.200 -> 0.990; taso ort-cpu: 1.000 -> 1.000 "
                                "(kept: end-to-end, measured end to end 0.980x)")
    assert "| tiny | 2 | " in (out / "zoo_runtime.md").read_text()


def test_a_results_file_that_is_no_zoo_json_is_one_line_and_exit_2(tmp_path, capsys):
    from experiments.cli import main

    bad = tmp_path / "zoo.json"
    bad.write_text("[1, 2]")
    (tmp_path / "models").mkdir()
    conv_relu_model(tmp_path / "models" / "tiny.onnx")
    code = main(["experiment", "zoo-runtime", "--models", str(tmp_path / "models"), "--zoo-results", str(bad),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--zoo-results" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "zoo_runtime.md").exists()
    assert zoo_runtime.zoo_cells([], "tiny") == "-"
