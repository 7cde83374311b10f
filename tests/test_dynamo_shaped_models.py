"""The zoo's exporter-shaped models at their small sizes (experiments/zoo): they import with no opaque
node but GPT-2's token-id Gather, evaluate in the IR like onnxruntime, and write back equal."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from eqsat import onnx as eo  # noqa: E402
from eqsat.ir.evaluate import evaluate  # noqa: E402
from experiments.zoo import ZOO  # noqa: E402

OPAQUE = {"mobilenet_v3_small": [], "llama_block": [], "gpt2": ["Gather"], "unet": []}  # token ids: an integer tensor


@pytest.mark.parametrize("name", sorted(OPAQUE))
def test_dynamo_shaped_models_import_evaluate_and_write_back_equal(tmp_path, name):
    path = ZOO[name].write(tmp_path / f"{name}.onnx", seed=0, small=True)
    imported = eo.load(path)
    assert [o.split()[0] for o in imported.opaque] == OPAQUE[name], imported.opaque
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = eo.random_feeds(session, seed=1)
    want = session.run(None, feeds)
    got = evaluate(imported.graph, {**imported.weights, **feeds})
    for w, g in zip(want, got):
        assert float(np.abs(np.asarray(g) - w).max()) / max(float(np.abs(w).max()), 1e-6) < 1e-5
    eo.save(imported, imported.graph, tmp_path / "back.onnx")
    assert eo.max_difference(path, tmp_path / "back.onnx") < 1e-5


def test_gpt2_is_timed_end_to_end_with_its_int64_token_ids(tmp_path):
    """The measured device's calibration writes the IR graph for timing; GPT-2's ids reach their
    Gather through a reshape, and were declared float there, so onnxruntime refused the file."""
    from eqsat.cost.measured.timer import export_for_timing

    path = ZOO["gpt2"].write(tmp_path / "gpt2.onnx", seed=0, small=True)
    written = export_for_timing(eo.load(path).graph, tmp_path / "timed.onnx")
    session = ort.InferenceSession(str(written), providers=["CPUExecutionProvider"])
    assert [i.type for i in session.get_inputs()] == ["tensor(int64)"]
    session.run(None, eo.random_feeds(session, seed=0))
