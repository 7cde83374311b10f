"""Shared fixtures: hand-built graphs for each step of the reference case studies."""
from __future__ import annotations

import pytest

from eqsat.ir.graph import Graph, input_, node, split, weight


def resnet_steps(n: int = 32, c: int = 64, hw: int = 56) -> dict[str, Graph]:
    """The ResNet block after each step of the α = 1.5 path (docs/reference.md)."""
    x = input_("x", (n, c, hw, hw))
    w1, w2, w3 = weight("w1_0", (c, c, 3, 3)), weight("w2_0", (c, c, 3, 3)), weight("w3_0", (c, c, 1, 1))
    conv = lambda a, w, act="none": node("conv2d", a, w, pad="same", act=act)  # noqa: E731
    original = node("relu", node("ewadd", conv(node("relu", conv(x, w1)), w2), node("relu", conv(x, w3))))
    fused = node("relu", node("ewadd", conv(conv(x, w1, "relu"), w2), conv(x, w3, "relu")))
    big3 = node("enlarge", w3, size=3)
    left, right = split(node("concat", conv(x, w1, "relu"), conv(x, big3, "relu"), axis=1), 1, (c, c))
    pair = node("relu", node("ewadd", conv(left, w2), right))
    left, right = split(conv(x, node("concat", w1, big3, axis=0), "relu"), 1, (c, c))
    merged = node("relu", node("ewadd", conv(left, w2), right))
    return {k: Graph((v,), name=f"resnet_{k}") for k, v in
            dict(original=original, fused=fused, pair=pair, merged=merged).items()}


def qkv_steps(batch: int = 16, d: int = 4096) -> dict[str, Graph]:
    x = input_("x", (batch, d))
    wq, wk, wv = (weight(f"w{k}0", (d, d)) for k in "qkv")
    original = tuple(node("matmul", x, w) for w in (wq, wk, wv))
    q, k = split(node("concat", node("matmul", x, wq), node("matmul", x, wk), axis=1), 1, (d, d))
    pair = (q, k, node("matmul", x, wv))
    kq = node("matmul", x, node("concat", wk, wq, axis=1))
    k1, q1 = split(kq, 1, (d, d))
    two = (q1, k1, node("matmul", x, wv))
    kq_part, v_part = split(node("concat", kq, node("matmul", x, wv), axis=1), 1, (2 * d, d))
    k2, q2 = split(kq_part, 1, (d, d))
    pair2 = (q2, k2, v_part)
    k3, q3, v3 = split(node("matmul", x, node("concat", wk, wq, wv, axis=1)), 1, (d, d, d))
    return {"original": Graph(original), "pair": Graph(pair), "two": Graph(two), "pair2": Graph(pair2),
            "merged": Graph((q3, k3, v3))}


def lora_steps(tokens: int = 512, d: int = 4096, r: int = 16) -> dict[str, Graph]:
    x = input_("x", (tokens, d))
    w, a, b = weight("w", (d, d)), weight("a", (d, r)), weight("b", (r, d))
    mm = lambda p, q: node("matmul", p, q)  # noqa: E731
    return {
        "original": Graph((node("ewadd", mm(x, w), mm(mm(x, a), b)),)),
        "assoc": Graph((node("ewadd", mm(x, w), mm(x, mm(a, b))),)),
        "merged": Graph((mm(x, node("ewadd", w, mm(a, b))),)),
    }


@pytest.fixture(autouse=True)
def _file_check_equal(request, monkeypatch):
    """A written file priced off ort-cpu is timed against its input in onnxruntime before it is kept
    (``eqsat.onnx.written.timed_in_onnxruntime``); tiny test models time within noise of each
    other, so a test about what a search writes would pass or fail with the machine's load. Here
    the check reports equal times, unless the test is marked ``file_check`` (the check itself)."""
    if request.node.get_closest_marker("file_check") is None:
        try:
            from eqsat.onnx import written
        except ImportError:  # pragma: no cover - the onnx extra is missing
            return
        monkeypatch.setattr(written, "timed_in_onnxruntime", lambda model, out, key, threads=1, runs=8: {
            "ort_input_us": 100.0, "ort_written_us": 100.0, "ort_noise": 0.0})


@pytest.fixture
def steps():
    return {"resnet": resnet_steps, "qkv": qkv_steps, "lora": lora_steps}
