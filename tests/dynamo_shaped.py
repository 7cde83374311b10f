"""Small models shaped like what ``torch.onnx.export(..., dynamo=True)`` writes at opset 18 for
MobileNetV3-Small, a LLaMA decoder block, a GPT-2 block and a small UNet, built with onnx.helper
(no torch), node for node where it matters to the importer: HardSwish/HardSigmoid and squeeze-excite with ReduceMean
over (2, 3) with its axes as an input; RMSNorm as Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul;
rotary embedding with cos/sin computed from constants, Slice halves, Neg and Concat, broadcast over
the heads; a causal mask as a constant boolean Where; GPT-2's token Gather of int64 ids, its
position Gather of a constant range, gelu_new as its Pow/Tanh formula; UNet's ConvTranspose.

``python tests/dynamo_shaped.py`` prints each model's node count and its opaque nodes with reasons.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.zoo.net import Net as _Net

OPSET = 18


def _save(net: _Net, path: str | Path, inputs: dict[str, tuple[int, tuple[int, ...]]],
          outputs: dict[str, tuple[int, ...]]) -> Path:
    """Like ``_Net.save`` with typed inputs (GPT-2's token ids are int64)."""
    h, fl = net.h, net.onnx.TensorProto.FLOAT
    graph = h.make_graph(net.nodes, net.name, [h.make_tensor_value_info(k, t, list(s)) for k, (t, s) in inputs.items()],
                         [h.make_tensor_value_info(k, fl, list(v)) for k, v in outputs.items()], net.inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="pytorch-dynamo-shaped")
    net.onnx.checker.check_model(model, full_check=True)
    net.onnx.save(model, str(path))
    return Path(path)


def _f(net: _Net, value: float | np.ndarray) -> str:
    return net.const(value, np.float32, as_node=False)


def _i(net: _Net, value: int | list[int]) -> str:
    return net.const(value, np.int64, as_node=False)


def mobilenet_v3_small(path: str | Path, seed: int = 0, size: int = 32) -> Path:
    """Stem conv + HardSwish, a squeeze-excite depthwise block (ReLU), a HardSwish inverted residual
    with squeeze-excite, the head: ReduceMean(2, 3) global pooling, Flatten, Linear, HardSwish, Linear."""
    net = _Net("mobilenet_v3_small", seed)

    def se(x: str, c: int, squeeze: int) -> str:
        s = net.op("ReduceMean", x, _i(net, [2, 3]), keepdims=1)
        s = net.op("Relu", net.conv(s, c, squeeze, 1))
        s = net.op("HardSigmoid", net.conv(s, squeeze, c, 1), alpha=1.0 / 6.0, beta=0.5)
        return net.op("Mul", x, s)

    x = net.op("HardSwish", net.conv("x", 3, 16, 3, stride=2))
    h = net.op("Relu", net.conv(x, 16, 16, 3, stride=2, groups=16))
    x = net.conv(se(h, 16, 8), 16, 16, 1)
    for c_in, c_mid, c_out in ((16, 72, 24), (24, 96, 24)):
        h = net.op("HardSwish", net.conv(x, c_in, c_mid, 1))
        h = net.op("HardSwish", net.conv(h, c_mid, c_mid, 5, groups=c_mid))
        h = net.conv(se(h, c_mid, c_mid // 4), c_mid, c_out, 1)
        x = net.op("Add", x, h) if c_in == c_out else h
    x = net.op("HardSwish", net.conv(x, 24, 96, 1))
    pooled = net.op("Flatten", net.op("ReduceMean", x, _i(net, [2, 3]), keepdims=1), axis=1)
    fc = net.op("HardSwish", net.op("Gemm", pooled, net.weight(128, 96), net.weight(128, scale=0.1), transB=1))
    net.nodes.append(net.h.make_node("Gemm", [fc, net.weight(10, 128), net.weight(10, scale=0.1)], ["out"], transB=1))
    return _save(net, path, {"x": (1, (1, 3, size, size))}, {"out": (1, 10)})


def _rms_norm(net: _Net, x: str, d: int) -> str:
    var = net.op("ReduceMean", net.op("Pow", x, _f(net, 2.0)), _i(net, [-1]), keepdims=1)
    inv = net.op("Reciprocal", net.op("Sqrt", net.op("Add", var, _f(net, 1e-6))))
    return net.op("Mul", net.weight(d, scale=1.0), net.op("Mul", x, inv))


def _heads(net: _Net, x: str, seq: int, heads: int, hd: int) -> str:
    return net.op("Transpose", net.op("Reshape", x, _i(net, [1, seq, heads, hd])), perm=[0, 2, 1, 3])


def _causal_mask(net: _Net, seq: int) -> str:
    return net.const(np.tril(np.ones((1, 1, seq, seq), dtype=bool)), np.bool_, as_node=False)


def llama_block(path: str | Path, seed: int = 0, seq: int = 16, d: int = 64, heads: int = 4, ff: int = 128) -> Path:
    """RMSNorm, Q/K/V projections, rotary embedding, causal attention, out projection, residual,
    RMSNorm, SiLU-gated MLP, residual, on a (1, seq, d) input."""
    net = _Net("llama_block", seed)
    hd = d // heads
    inv_freq = _f(net, 1.0 / (10000 ** (np.arange(0, hd, 2) / hd)))
    pos = _f(net, np.arange(seq, dtype=np.float32).reshape(1, seq, 1))
    freqs = net.op("Mul", pos, net.op("Unsqueeze", inv_freq, _i(net, [0])))
    emb = net.op("Concat", freqs, freqs, axis=-1)
    cos, sin = (net.op("Unsqueeze", net.op(f, emb), _i(net, [1])) for f in ("Cos", "Sin"))  # (1, 1, seq, hd)

    def rotary(t: str) -> str:
        x1 = net.op("Slice", t, _i(net, [0]), _i(net, [hd // 2]), _i(net, [3]), _i(net, [1]))
        x2 = net.op("Slice", t, _i(net, [hd // 2]), _i(net, [np.iinfo(np.int64).max]), _i(net, [3]), _i(net, [1]))
        rotated = net.op("Concat", net.op("Neg", x2), x1, axis=-1)
        return net.op("Add", net.op("Mul", t, cos), net.op("Mul", rotated, sin))

    h = _rms_norm(net, "x", d)
    q, k, v = (_heads(net, net.op("MatMul", h, net.weight(d, d)), seq, heads, hd) for _ in range(3))
    q, k = rotary(q), rotary(k)
    scores = net.op("Mul", net.op("MatMul", q, net.op("Transpose", k, perm=[0, 1, 3, 2])), _f(net, hd ** -0.5))
    scores = net.op("Where", _causal_mask(net, seq), scores, _f(net, -np.inf))
    attn = net.op("MatMul", net.op("Softmax", scores, axis=-1), v)
    attn = net.op("Reshape", net.op("Transpose", attn, perm=[0, 2, 1, 3]), _i(net, [1, seq, d]))
    x = net.op("Add", "x", net.op("MatMul", attn, net.weight(d, d)))
    h = _rms_norm(net, x, d)
    gate = net.op("MatMul", h, net.weight(d, ff))
    up = net.op("MatMul", h, net.weight(d, ff))
    mlp = net.op("MatMul", net.op("Mul", net.op("Mul", gate, net.op("Sigmoid", gate)), up), net.weight(ff, d))
    net.nodes.append(net.h.make_node("Add", [x, mlp], ["out"]))
    return _save(net, path, {"x": (1, (1, seq, d))}, {"out": (1, seq, d)})


def gpt2_block(path: str | Path, seed: int = 0, seq: int = 16, d: int = 64, heads: int = 4, vocab: int = 100) -> Path:
    """Token and position embeddings, LayerNorm, the packed c_attn projection split into q, k, v,
    scaled causal attention, c_proj, residual, LayerNorm, the gelu_new MLP, residual, final LayerNorm."""
    net = _Net("gpt2_block", seed)
    hd = d // heads
    tokens = net.op("Gather", net.weight(vocab, d, scale=0.02), "ids", axis=0)
    positions = net.op("Gather", net.weight(seq, d, scale=0.01), _i(net, [list(range(seq))]), axis=0)
    x = net.op("Add", tokens, positions)

    def norm(t: str) -> str:
        return net.op("LayerNormalization", t, net.weight(d, scale=1.0), net.weight(d, scale=0.1), axis=-1,
                      epsilon=1e-5)

    qkv = net.linear(norm(x), d, 3 * d)
    q, k, v = (_heads(net, t, seq, heads, hd) for t in net.op("Split", qkv, _i(net, [d, d, d]), axis=2, n_out=3))
    scores = net.op("Div", net.op("MatMul", q, net.op("Transpose", k, perm=[0, 1, 3, 2])), _f(net, np.sqrt(hd)))
    scores = net.op("Where", _causal_mask(net, seq), scores, _f(net, np.finfo(np.float32).min))
    attn = net.op("MatMul", net.op("Softmax", scores, axis=-1), v)
    attn = net.op("Reshape", net.op("Transpose", attn, perm=[0, 2, 1, 3]), _i(net, [1, seq, d]))
    x = net.op("Add", x, net.linear(attn, d, d))
    h = net.linear(norm(x), d, 4 * d)
    cube = net.op("Mul", net.op("Pow", h, _f(net, 3.0)), _f(net, 0.044715))
    t = net.op("Tanh", net.op("Mul", net.op("Add", h, cube), _f(net, np.sqrt(2 / np.pi))))
    gelu = net.op("Mul", net.op("Mul", h, _f(net, 0.5)), net.op("Add", t, _f(net, 1.0)))
    x = net.op("Add", x, net.linear(gelu, 4 * d, d))
    net.nodes.append(net.h.make_node("LayerNormalization", [x, net.weight(d, scale=1.0), net.weight(d, scale=0.1)],
                                     ["out"], axis=-1, epsilon=1e-5))
    return _save(net, path, {"ids": (7, (1, seq))}, {"out": (1, seq, d)})


def small_unet(path: str | Path, seed: int = 0, size: int = 32) -> Path:
    """Two down levels (conv, ReLU, MaxPool), a bottleneck, two up levels (ConvTranspose 2x2 stride 2,
    Concat with the skip, conv, ReLU) and a 1x1 head."""
    net = _Net("small_unet", seed)
    x, c, skips = "x", 3, []
    for width in (8, 16):
        x = net.op("Relu", net.conv(x, c, width, 3))
        skips.append((x, width))
        x, c = net.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2]), width
    x, c = net.op("Relu", net.conv(x, c, 32, 3)), 32
    for skip, width in reversed(skips):
        up = net.op("ConvTranspose", x, net.weight(c, width, 2, 2), net.weight(width, scale=0.1), kernel_shape=[2, 2],
                    strides=[2, 2])
        x, c = net.op("Relu", net.conv(net.op("Concat", up, skip, axis=1), 2 * width, width, 3)), width
    net.nodes.append(net.h.make_node("Conv", [x, net.weight(2, c, 1, 1)], ["out"], kernel_shape=[1, 1]))
    return _save(net, path, {"x": (1, (1, 3, size, size))}, {"out": (1, 2, size, size)})


DYNAMO_SHAPED: dict[str, Callable[..., Path]] = {
    "small_unet": small_unet,
    "mobilenet_v3_small": mobilenet_v3_small,
    "llama_block": llama_block,
    "gpt2_block": gpt2_block,
}


if __name__ == "__main__":  # the opaque-node count of each model: python tests/dynamo_shaped.py
    import tempfile

    from eqsat import onnx as eo

    with tempfile.TemporaryDirectory() as tmp:
        for name, build in DYNAMO_SHAPED.items():
            imported = eo.load(build(Path(tmp) / f"{name}.onnx"))
            print(f"{name}: {sum(imported.ops.values())} ONNX nodes, {len(imported.opaque)} opaque")
            for reason in imported.opaque:
                print(f"  {reason}")
