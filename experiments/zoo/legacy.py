"""The first exporter-shaped models (the TorchScript exporter at opset 17, the dynamo one at 18), built
with :class:`experiments.zoo.net.Net` (PyTorch is not needed).

Each builder writes what the TorchScript exporter (opset 17) or the dynamo exporter (opset 18)
emits for a common module, node for node where it matters to the importer: ``nn.Linear`` on a
batch as a 3-D x 2-D MatMul plus a bias Add, Shape -> Gather -> Unsqueeze -> Concat chains for
views, Constant nodes for scalars, MultiheadAttention's packed projection unpacked with
Unsqueeze/Transpose/Squeeze/Gather, LayerNormalization, GELU as its erf form, ReLU6 as Clip with
rank-0 bounds, ceil_mode max pools, BatchNormalization folded into conv biases (eval-mode
export). :data:`EXPORTER_MODELS` names them; ``eqsat-lab experiment onnx --models`` takes the names.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.zoo.net import Net as _Net


def _gelu_erf(net: _Net, x: str, dynamo: bool) -> str:
    """nn.GELU(): x * 0.5 * (1 + erf(x / sqrt 2)) (dynamo multiplies by 1/sqrt 2)."""
    c = (lambda v: net.const(v, np.float32, as_node=not dynamo))
    inner = net.op("Mul", x, c(1 / np.sqrt(2))) if dynamo else net.op("Div", x, c(np.sqrt(2)))
    one_plus = net.op("Add", net.op("Erf", inner), c(1.0))
    return net.op("Mul", net.op("Mul", x, one_plus), c(0.5))


def transformer_layer(path: str | Path, seed: int = 0, dynamo: bool = False, seq: int = 64, d: int = 256,
                      heads: int = 4, ff: int = 1024) -> Path:
    """nn.TransformerEncoderLayer(d, heads, ff, activation="gelu"), eval, batch_first=False, on a
    (seq, 1, d) input: packed in-projection, scaled dot-product attention, out-projection,
    residuals, two LayerNorms and the GELU MLP."""
    net = _Net("transformer_layer", seed)
    hd = d // heads
    proj = net.linear("src", d, 3 * d)  # (seq, 1, 3d)
    packed = net.op("Reshape", proj, net.const([seq, 1, 3, d], as_node=not dynamo))  # unflatten(-1, (3, d))
    packed = net.op("Unsqueeze", packed, net.const([0], as_node=not dynamo))
    packed = net.op("Transpose", packed, perm=[3, 1, 2, 0, 4])  # .transpose(0, -2)
    packed = net.op("Squeeze", packed, net.const([3], as_node=not dynamo))  # (3, seq, 1, d)
    q, k, v = (net.op("Gather", packed, net.const(i, as_node=not dynamo), axis=0) for i in range(3))
    q, k, v = (net.op("Transpose", net.op("Reshape", t, net.const([seq, heads, hd], as_node=not dynamo)),
                      perm=[1, 0, 2]) for t in (q, k, v))  # (heads, seq, hd)
    scale = net.const(np.sqrt(1 / np.sqrt(hd)), np.float32, as_node=not dynamo)
    scores = net.op("MatMul", net.op("Mul", q, scale), net.op("Mul", net.op("Transpose", k, perm=[0, 2, 1]), scale))
    attn = net.op("MatMul", net.op("Softmax", scores, axis=-1), v)
    attn = net.op("Reshape", net.op("Transpose", attn, perm=[1, 0, 2]), net.const([seq, d], as_node=not dynamo))
    out = net.op("Reshape", net.linear(attn, d, d, gemm=not dynamo), net.const([seq, 1, d], as_node=not dynamo))
    h1 = net.op("LayerNormalization", net.op("Add", "src", out), net.weight(d, scale=1.0), net.weight(d, scale=0.1),
                axis=-1, epsilon=1e-5)
    mlp = net.linear(_gelu_erf(net, net.linear(h1, d, ff), dynamo), ff, d)
    net.op("LayerNormalization", net.op("Add", h1, mlp), net.weight(d, scale=1.0), net.weight(d, scale=0.1),
           axis=-1, epsilon=1e-5)
    net.nodes[-1].output[0] = "out"
    return net.save(path, {"src": (seq, 1, d)}, {"out": (seq, 1, d)}, 18 if dynamo else 17)


def qkv_linears(path: str | Path, seed: int = 0, tokens: int = 128, d: int = 1024) -> Path:
    """Three nn.Linear(d, d) reading one (1, tokens, d) input, concatenated by one 3-input Concat
    on axis -1 (what the issue's QKV module exports)."""
    net = _Net("qkv_linears", seed)
    parts = [net.linear("x", d, d) for _ in range(3)]
    net.nodes.append(net.h.make_node("Concat", parts, ["out"], axis=-1))
    return net.save(path, {"x": (1, tokens, d)}, {"out": (1, tokens, 3 * d)}, 17)


def lora_mlp(path: str | Path, seed: int = 0, tokens: int = 256, d: int = 1024, rank: int = 16) -> Path:
    """A LoRA linear x W + (x A) B on a (1, tokens, d) batch, as an nn.Module exports it."""
    net = _Net("lora_mlp", seed)
    base = net.op("MatMul", "x", net.weight(d, d))
    low = net.op("MatMul", net.op("MatMul", "x", net.weight(d, rank)), net.weight(rank, d, scale=0.01))
    net.nodes.append(net.h.make_node("Add", [base, low], ["out"]))
    return net.save(path, {"x": (1, tokens, d)}, {"out": (1, tokens, d)}, 17)


def mobilenet_v2_blocks(path: str | Path, seed: int = 0, size: int = 56) -> Path:
    """MobileNetV2's inverted residual blocks (BN folded into conv biases): 1x1 expand, ReLU6 as
    Clip with rank-0 Constant bounds, 3x3 depthwise, ReLU6, 1x1 project, residual; then the head:
    GlobalAveragePool, Flatten, Gemm."""
    net = _Net("mobilenet_v2_blocks", seed)
    zero, six = net.const(0.0, np.float32), net.const(6.0, np.float32)
    x, c = net.op("Clip", net.conv("x", 3, 24, 3, stride=2), zero, six), 24
    for expand in (6, 6):
        h = net.op("Clip", net.conv(x, c, c * expand, 1), zero, six)
        h = net.op("Clip", net.conv(h, c * expand, c * expand, 3, groups=c * expand), zero, six)
        x = net.op("Add", x, net.conv(h, c * expand, c, 1))
    pooled = net.op("Flatten", net.op("GlobalAveragePool", net.op("Clip", net.conv(x, c, 320, 1), zero, six)), axis=1)
    net.nodes.append(net.h.make_node("Gemm", [pooled, net.weight(100, 320), net.weight(100, scale=0.1)], ["out"],
                                     transB=1))
    return net.save(path, {"x": (1, 3, size * 2, size * 2)}, {"out": (1, 100)}, 17)


def squeezenet_fires(path: str | Path, seed: int = 0, size: int = 224) -> Path:
    """squeezenet1_1's stem and fire modules: conv, ceil_mode max pools (exact there), fire
    (squeeze 1x1, expand 1x1 and 3x3 concatenated), classifier conv, average pool, flatten."""
    net = _Net("squeezenet_fires", seed)
    x = net.op("MaxPool", net.op("Relu", net.conv("x", 3, 64, 3, stride=2)), kernel_shape=[3, 3], strides=[2, 2],
               ceil_mode=1)
    x = net.op("Relu", net.op("Conv", x, net.weight(64, 64, 3, 3), net.weight(64, scale=0.1), kernel_shape=[3, 3],
                              pads=[0, 0, 0, 0]))
    c = 64
    for squeeze, expand in ((16, 64), (16, 64), (32, 128)):
        s = net.op("Relu", net.conv(x, c, squeeze, 1))
        x = net.op("Concat", net.op("Relu", net.conv(s, squeeze, expand, 1)),
                   net.op("Relu", net.conv(s, squeeze, expand, 3)), axis=1)
        c = 2 * expand
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    x = net.op("Relu", net.conv(x, c, 100, 1))
    net.nodes.append(net.h.make_node("Flatten", [net.op("GlobalAveragePool", x)], ["out"], axis=1))
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, 100)}, 17)


def googlenet_stem(path: str | Path, seed: int = 0, size: int = 224) -> Path:
    """GoogLeNet's stem and first inception block: ceil_mode max pools whose last window is
    partial (112 -> 56), four branches concatenated, one of them behind a stride-1 max pool."""
    net = _Net("googlenet_stem", seed)
    x = net.op("Relu", net.conv("x", 3, 64, 7, stride=2))
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    x = net.op("Relu", net.conv(net.op("Relu", net.conv(x, 64, 64, 1)), 64, 192, 3))
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    branches = [
        net.op("Relu", net.conv(x, 192, 64, 1)),
        net.op("Relu", net.conv(net.op("Relu", net.conv(x, 192, 96, 1)), 96, 128, 3)),
        net.op("Relu", net.conv(net.op("Relu", net.conv(x, 192, 16, 1)), 16, 32, 3)),
        net.op("Relu", net.conv(net.op("MaxPool", x, kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                                       ceil_mode=1), 192, 32, 1)),
    ]
    net.nodes.append(net.h.make_node("Concat", branches, ["out"], axis=1))
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, 256, 28, 28)}, 17)


def vgg11(path: str | Path, seed: int = 0, size: int = 224) -> Path:
    """torchvision's vgg11 (507 MB of float32 weights): eight 3x3 convs with ReLU and five max
    pools, adaptive average pool (an exact 7x7 identity here), Flatten and three Gemm layers."""
    net = _Net("vgg11", seed)
    x, c = "x", 3
    for width in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
        if width == "M":
            x = net.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
        else:
            x, c = net.op("Relu", net.conv(x, c, int(width), 3)), int(width)
    x = net.op("Flatten", net.op("AveragePool", x, kernel_shape=[1, 1]), axis=1)
    x = net.op("Relu", net.linear(x, 512 * 7 * 7, 4096, gemm=True))
    x = net.op("Relu", net.linear(x, 4096, 4096, gemm=True))
    net.nodes.append(net.h.make_node("Gemm", [x, net.weight(1000, 4096), net.weight(1000, scale=0.1)], ["out"],
                                     transB=1))
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, 1000)}, 17)


EXPORTER_MODELS: dict[str, Callable[..., Path]] = {
    "pt_transformer": transformer_layer,
    "pt_transformer_dynamo": lambda path, seed=0: transformer_layer(path, seed, dynamo=True),
    "pt_qkv": qkv_linears,
    "pt_lora": lora_mlp,
    "pt_mobilenet_v2": mobilenet_v2_blocks,
    "pt_squeezenet": squeezenet_fires,
    "pt_googlenet": googlenet_stem,
    "pt_vgg11": vgg11,
}
"""Name -> builder(path, seed) of an exporter-shaped ONNX file."""
LARGE = frozenset({"pt_vgg11"})  # half a gigabyte: the results table, not the default tests
