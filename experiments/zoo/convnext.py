"""ConvNeXt as torchvision defines it and the dynamo exporter writes it at opset 20: channels-last
LayerNormalization between Transposes, Linear layers as MatMul plus Add on the 4-D tensor,
``Gelu`` (``approximate="none"``), the layer scale as a Mul by a constant."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments.zoo.net import Net

GELU_OPSET = 20  # the first opset with a Gelu op


def _norm2d(net: Net, x: str, c: int) -> str:
    """LayerNorm2d: permute to channels-last, LayerNormalization over channels, permute back."""
    y = net.layernorm(net.op("Transpose", x, perm=[0, 2, 3, 1]), c, eps=1e-6)
    return net.op("Transpose", y, perm=[0, 3, 1, 2])


def convnext_tiny(path: str | Path, seed: int = 0, size: int = 224, depths: Sequence[int] = (3, 3, 9, 3),
                  dims: Sequence[int] = (96, 192, 384, 768), classes: int = 1000) -> Path:
    """torchvision convnext_tiny: 4x4 stride-4 stem and LayerNorm2d; blocks (7x7 depthwise,
    permute, LayerNorm, Linear 4x, GELU, Linear, layer scale, permute, residual); LayerNorm2d and
    2x2 stride-2 conv between stages; mean, LayerNorm, Linear."""
    net = Net("convnext_tiny", seed)
    x = _norm2d(net, net.conv("x", 3, dims[0], 4, stride=4, pad=0), dims[0])
    for i, (depth, d) in enumerate(zip(depths, dims)):
        if i > 0:
            x = net.conv(_norm2d(net, x, dims[i - 1]), dims[i - 1], d, 2, stride=2, pad=0)
        for _ in range(depth):
            h = net.conv(x, d, d, 7, groups=d)
            h = net.layernorm(net.op("Transpose", h, perm=[0, 2, 3, 1]), d, eps=1e-6)
            h = net.linear(net.op("Gelu", net.linear(h, d, 4 * d), approximate="none"), 4 * d, d)
            h = net.op("Mul", h, net.init(np.full(d, 0.1), np.float32))  # layer scale (trained from 1e-6)
            x = net.op("Add", net.op("Transpose", h, perm=[0, 3, 1, 2]), x)
    c = dims[-1]
    pooled = net.layernorm(net.reshape(net.mean(x, [-1, -2]), 1, c), c, eps=1e-6)
    net.linear(pooled, c, classes, gemm=True)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, GELU_OPSET)
