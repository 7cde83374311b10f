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
