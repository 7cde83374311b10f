"""The attention-ceiling experiment: its blocks are the zoo transformers' sizes, the unfused core
equals onnxruntime's MultiHeadAttention (causal and not), and the bound is the plain arithmetic."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from experiments.runs import attention_ceiling as ac  # noqa: E402
from experiments.zoo import ZOO  # noqa: E402


def defaults(model):
    return {k: p.default for k, p in inspect.signature(ZOO[model].build).parameters.items()}


def test_the_blocks_are_the_zoo_transformers_at_their_full_sizes():
    vit, gpt2, llama = defaults("vit"), defaults("gpt2"), defaults("llama_block")
    assert ac.BLOCKS["vit"] == ac.Block("vit", (vit["size"] // vit["patch"]) ** 2 + 1, vit["heads"], vit["d"],
                                        vit["layers"], False)
    assert ac.BLOCKS["gpt2"] == ac.Block("gpt2", gpt2["seq"], gpt2["heads"], gpt2["d"], gpt2["layers"], True)
    assert ac.BLOCKS["llama_block"] == ac.Block("llama_block", llama["seq"], llama["heads"], llama["d"], 1, True)


@pytest.mark.parametrize("causal", [False, True])
def test_the_unfused_core_equals_multi_head_attention(tmp_path, causal):
    unfused, mha = ac.write_pair(ac.Block("t", 8, 2, 16, 1, causal), tmp_path)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 8, 16)).astype(np.float32) for n in "qkv"}
    a, b = (ort.InferenceSession(str(p)).run(None, feeds)[0] for p in (unfused, mha))
    assert np.abs(a - b).max() < 1e-5
    first_token_alone = np.allclose(b[0, 0], feeds["v"][0, 0], atol=1e-6)  # causal: token 0 sees only itself
    assert first_token_alone == causal


def test_the_bound_is_model_over_model_less_what_every_layer_saves():
    assert ac.bound(100.0, 6, 1.0) == pytest.approx(100 / 94)
    assert ac.bound(100.0, 2, -1.0) == pytest.approx(100 / 102)  # a slower fusion is a bound under 1
    with pytest.raises(ValueError, match="do not add up"):
        ac.bound(10.0, 6, 2.0)


def test_a_model_without_a_block_is_one_error(tmp_path):
    with pytest.raises(ValueError, match="no attention block for resnet50"):
        ac.run(tmp_path, zoo=["resnet50"])
    assert not list(tmp_path.iterdir())
