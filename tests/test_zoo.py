"""The zoo: twelve exporter-shaped architectures built with onnx.helper, and the experiment that runs
a folder of ONNX files through ``eqsat-lab optimize`` (a failing model is a row, not a crash)."""
from __future__ import annotations

import sys
import tempfile
from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from eqsat import onnx as eo  # noqa: E402
from experiments.cli import main  # noqa: E402
from experiments.runs import zoo as zoo_run  # noqa: E402
from experiments.sweep import RunOptions  # noqa: E402
from experiments.zoo import ZOO, write_zoo  # noqa: E402

# what the dynamo exporter writes for each architecture, and must therefore appear in its file
HABITS = {
    "resnet50": {"Conv", "ReduceMean", "Gemm", "MaxPool"},
    "mobilenet_v3_small": {"HardSwish", "HardSigmoid", "ReduceMean"},
    "efficientnet_b0": {"Sigmoid", "Mul", "ReduceMean"},
    "shufflenet_v2": {"Split", "Transpose", "Reshape", "Concat"},
    "densenet121": {"BatchNormalization", "Concat", "AveragePool"},
    "convnext_tiny": {"LayerNormalization", "Gelu", "Transpose", "MatMul"},
    "regnety_400mf": {"Sigmoid", "ReduceMean", "Conv"},
    "vit": {"Unsqueeze", "Squeeze", "Gather", "Gelu", "LayerNormalization", "Softmax", "Gemm"},
    "gpt2": {"Gather", "And", "Where", "Split", "Gemm", "Pow", "Tanh"},
    "llama_block": {"Pow", "ReduceMean", "Sqrt", "Reciprocal", "Slice", "Neg", "Concat", "Where", "Sigmoid"},
    "lora_mlp": {"MatMul", "Mul", "Add"},
    "unet": {"ConvTranspose", "Concat", "MaxPool"},
}


def test_every_zoo_model_has_its_habits_listed():
    assert set(HABITS) == set(ZOO) and len(ZOO) == 12


@pytest.mark.parametrize("name", list(ZOO))
def test_small_zoo_model_is_valid_onnx_with_the_exporters_ops_and_runs_finite(tmp_path, name):
    path = ZOO[name].write(tmp_path / f"{name}.onnx", seed=0, small=True)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    ops = Counter(n.op_type for n in model.graph.node)
    assert HABITS[name] <= set(ops), HABITS[name] - set(ops)
    assert model.opset_import[0].version in (18, 20)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outs = session.run(None, eo.random_feeds(session, seed=1))
    assert all(np.isfinite(o).all() and np.abs(o).max() > 0 for o in outs)


def test_exporter_attribute_habits_gelu_reduce_mean_and_int64_ids(tmp_path):
    paths = dict(zip(["gpt2", "vit", "resnet50"], write_zoo(tmp_path, ["gpt2", "vit", "resnet50"], small=True)))
    gelu = {name: [a.s.decode() for n in onnx.load(str(paths[name])).graph.node if n.op_type == "Gelu"
                   for a in n.attribute if a.name == "approximate"] for name in ("gpt2", "vit")}
    assert gelu["gpt2"] == [] and set(gelu["vit"]) == {"none"}  # Hugging Face writes GPT-2's tanh GELU out
    resnet = onnx.load(str(paths["resnet50"])).graph
    mean = next(n for n in resnet.node if n.op_type == "ReduceMean")
    assert len(mean.input) == 2 and not any(a.name == "axes" for a in mean.attribute)  # axes as an input
    ids = onnx.load(str(paths["gpt2"])).graph.input[0]
    assert ids.type.tensor_type.elem_type == onnx.TensorProto.INT64


def test_zoo_models_are_deterministic_in_their_seed(tmp_path):
    a = ZOO["llama_block"].write(tmp_path / "a.onnx", seed=3, small=True).read_bytes()
    b = ZOO["llama_block"].write(tmp_path / "b.onnx", seed=3, small=True).read_bytes()
    c = ZOO["llama_block"].write(tmp_path / "c.onnx", seed=4, small=True).read_bytes()
    assert a == b and a != c


def test_unknown_zoo_model_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown zoo model nope"):
        write_zoo(tmp_path, ["nope"])


def test_error_line_is_the_childs_one_line_error():
    err = "progress\neqsat-lab: error: model.onnx: node 3 (Foo): no importer\n"
    assert zoo_run._error_line(err, 2) == "model.onnx: node 3 (Foo): no importer"
    assert zoo_run._error_line("", 3) == "exit code 3"
    assert len(zoo_run._error_line("eqsat-lab: error: " + "x" * 1000, 2)) == 300
    tmp = tempfile.gettempdir()
    assert zoo_run._scrub(f"Load model from {tmp}/eqsat-time-x1/kernel.onnx failed:bad") == \
        "Load model from <temporary file> failed:bad"


def test_a_child_past_its_time_limit_is_killed_and_reported():
    code, _, wall = zoo_run.run_optimize([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert code is None and wall < 10


def test_table_shows_a_failed_row_with_its_error():
    rows = [{"model": "m", "search": "taso", "device": "h100", "onnx_ops": 5, "opaque": None, "wall_s": 1.0,
             "status": "exit 2", "error": "m.onnx: bad | thing"},
            {"model": "m", "search": "eqsat", "device": "h100", "onnx_ops": 5, "opaque": 1, "wall_s": 2.0,
             "status": "ok", "error": "", "search_s": 0.5, "predicted_gain": 1.2, "measured_ratio": 1.0,
             "changed": False, "max_diff": 0.0}]
    lines = zoo_run.format_table(rows).splitlines()
    assert len(lines) == 4 and all(ln.count("|") == lines[0].count("|") for ln in lines)
    assert "exit 2: m.onnx: bad / thing" in lines[2] and "1.000 (=)" in lines[3]


def test_summary_counts_opaque_share_and_flags_files_under_the_floor():
    base = {"search": "taso", "device": "h100", "status": "ok", "onnx_ops": 50, "opaque": 1}
    rows = [base | {"model": "a", "measured_ratio": 1.21}, base | {"model": "b", "measured_ratio": 0.5},
            base | {"model": "c", "status": "timeout", "onnx_ops": 100, "opaque": 0}]
    lines = zoo_run.summary(rows)
    assert lines[0] == "2 of 3 cells ok; opaque nodes 2 of 200 ONNX nodes (1.0%) over 3 models"
    assert "2 models, geometric-mean measured ratio 0.778, worst 0.500; under 0.98: b 0.50" in lines[1]


def test_measured_device_prices_are_compared_with_end_to_end_times_run_call_included():
    base = {"model": "m", "search": "eqsat", "status": "ok", "predicted_gain": 1.1, "measured_ratio": 1.0}
    rows = [base | {"device": "ort-cpu", "original_us": 900.0, "written_us": 800.0, "written_latency_us": 860.0,
                    "input_ms": 1.0, "output_ms": 1.0},  # input priced 960 µs (-4%), written 860 µs (-14%)
            base | {"device": "ort-cpu:2", "original_us": 500.0, "written_us": 500.0, "written_latency_us": 600.0,
                    "input_ms": 1.0, "output_ms": 1.0},  # 600 µs against 1 ms: -40%
            base | {"device": "h100", "original_us": 9.0, "written_us": 8.0, "input_ms": 1.0}]  # a roofline: no row
    assert zoo_run.priced_latencies(rows[0]) == (960.0, 860.0)
    table = zoo_run.format_prediction_table(rows).splitlines()
    assert len(table) == 4 and "| -4% |" in table[2] and "| -14% |" in table[2] and "| -40% |" in table[3]
    assert zoo_run.prediction_summary(rows) == [
        "measured device: 2 of 4 priced files (inputs and written files of 2 cells) within 15% of their "
        "end-to-end time; worst 40% off"]


def test_a_changed_model_file_gets_a_new_cell_key(tmp_path):
    path = ZOO["lora_mlp"].write(tmp_path / "m.onnx", seed=0, small=True)
    before = zoo_run.digest(path)
    ZOO["lora_mlp"].write(path, seed=1, small=True)
    assert zoo_run.digest(path) != before


@pytest.mark.parametrize("argv, message", [
    (["--models", "MISSING"], "not a folder of .onnx files"),
    (["--devices", "bogus"], "unknown device 'bogus'"),
    (["--searches", "bogus"], "unknown search bogus"),
    (["--zoo", "nope"], "unknown zoo model nope"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = [a.replace("MISSING", str(tmp_path / "missing")) for a in argv]
    assert main(["experiment", "zoo", "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out" / "zoo.csv").exists()


@pytest.mark.slow
def test_experiment_runs_a_folder_and_a_broken_file_is_a_row(tmp_path, capsys):
    models = tmp_path / "models"
    write_zoo(models, ["lora_mlp"], small=True)
    (models / "broken.onnx").write_bytes(b"not an onnx file")
    rows = zoo_run.run(str(models), tmp_path / "out", searches=["taso"], devices=["h100"], quick=True,
                       options=RunOptions(progress=False))
    by_model = {r["model"]: r for r in rows}
    assert by_model["broken"]["status"].startswith("exit") and by_model["broken"]["error"]
    good = by_model["lora_mlp"]
    assert good["status"] == "ok" and good["max_diff"] <= good["tolerance"] and good["measured_ratio"] > 0
    assert (tmp_path / "out" / "zoo.csv").exists() and "broken" in (tmp_path / "out" / "zoo.md").read_text()
    again = zoo_run.run(str(models), tmp_path / "out", searches=["taso"], devices=["h100"], quick=True,
                        options=RunOptions(progress=False))  # resumed from the cells: the same rows
    assert again == rows
