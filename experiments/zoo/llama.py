"""A LLaMA decoder block as the dynamo exporter writes Hugging Face's eager code at opset 18:
RMSNorm as Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul, rotary embedding as Slice/Neg/Concat and a
Mul by constant cos/sin tables that broadcasts over the heads axis, causal attention with
``Where`` on a constant mask, and the SiLU-gated MLP (Sigmoid and Mul)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.zoo.net import Net
from experiments.zoo.transformers import _heads, _merge

LLAMA_OPSET = 18


def _rmsnorm(net: Net, x: str, d: int, eps: float = 1e-6) -> str:
    """x * 1/sqrt(mean(x^2) + eps) * weight."""
    var = net.op("ReduceMean", net.op("Pow", x, net.scalar(2.0)), net.init([-1]), keepdims=1)
    inv = net.op("Reciprocal", net.op("Sqrt", net.op("Add", var, net.scalar(eps))))
    return net.op("Mul", net.init(1 + 0.1 * net.rng.standard_normal(d), np.float32), net.op("Mul", x, inv))


def _rotary(net: Net, x: str, cos: str, sin: str, hd: int) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[..., hd/2:], x[..., :hd/2])."""
    first = net.op("Slice", x, net.init([0]), net.init([hd // 2]), net.init([-1]))
    second = net.op("Slice", x, net.init([hd // 2]), net.init([np.iinfo(np.int64).max]), net.init([-1]))
    rotated = net.op("Concat", net.op("Neg", second), first, axis=-1)
    return net.op("Add", net.op("Mul", x, cos), net.op("Mul", rotated, sin))


def llama_block(path: str | Path, seed: int = 0, seq: int = 128, d: int = 1024, heads: int = 16, ffn: int = 2816,
                theta: float = 10000.0) -> Path:
    """One LlamaDecoderLayer on (1, seq, d) hidden states: RMSNorm, Q/K/V projections without
    bias, rotary embedding on Q and K, causal attention, o-projection, residual; RMSNorm,
    down(silu(gate(x)) * up(x)), residual."""
    net = Net("llama_block", seed)
    hd = d // heads
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    angles = np.concatenate([np.outer(np.arange(seq), inv_freq)] * 2, axis=-1)[None, None]  # (1, 1, seq, hd)
    cos, sin = net.init(np.cos(angles), np.float32), net.init(np.sin(angles), np.float32)
    h = _rmsnorm(net, "x", d)
    q, k, v = (_heads(net, net.linear(h, d, d, bias=False), seq, heads, hd) for _ in range(3))
    q, k = _rotary(net, q, cos, sin, hd), _rotary(net, k, cos, sin, hd)
    scores = net.op("Mul", net.op("MatMul", q, net.op("Transpose", k, perm=[0, 1, 3, 2])),
                    net.scalar(float(1 / np.sqrt(hd))))
    mask = net.init(np.tril(np.ones((seq, seq), dtype=bool))[None, None], np.bool_)
    scores = net.op("Where", mask, scores, net.scalar(float(np.finfo(np.float32).min)))
    ctx = net.op("MatMul", net.op("Softmax", scores, axis=-1), v)
    x = net.op("Add", "x", net.linear(_merge(net, ctx, seq, d), d, d, bias=False))
    h = _rmsnorm(net, x, d)
    gated = net.op("Mul", net.silu(net.linear(h, d, ffn, bias=False)), net.linear(h, d, ffn, bias=False))
    net.op("Add", x, net.linear(gated, ffn, d, bias=False))
    net.output("out")
    return net.save(path, {"x": (1, seq, d)}, {"out": (1, seq, d)}, LLAMA_OPSET)
