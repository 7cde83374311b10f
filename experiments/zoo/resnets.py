"""Residual and dense convnets as torchvision defines them and the dynamo exporter writes them
(eval mode: every BatchNormalization after a conv folded into its bias; DenseNet's norms before
a ReLU stay BatchNormalization; global average pooling as ReduceMean over the spatial axes)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from experiments.zoo.net import Net

CONV_OPSET = 18


def _head(net: Net, x: str, c: int, classes: int) -> str:
    """avgpool to 1x1, flatten, fc: ReduceMean, Reshape to (1, c), Gemm."""
    flat = net.reshape(net.mean(x, [-1, -2]), 1, c)
    return net.linear(flat, c, classes, gemm=True)


def resnet50(path: str | Path, seed: int = 0, size: int = 224, width: int = 64,
             layers: Sequence[int] = (3, 4, 6, 3), classes: int = 1000) -> Path:
    """torchvision resnet50: 7x7 stem, max pool, bottleneck stages (1x1, 3x3 with the stride,
    1x1 expanding 4x, projection shortcut on the first block of a stage), head."""
    net = Net("resnet50", seed)
    x = net.op("Relu", net.conv("x", 3, width, 7, stride=2))
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = width
    for stage, blocks in enumerate(layers):
        mid = width * 2 ** stage
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            h = net.op("Relu", net.conv(x, c, mid, 1))
            h = net.op("Relu", net.conv(h, mid, mid, 3, stride=stride))
            h = net.conv(h, mid, mid * 4, 1, scale=0.3 / mid ** 0.5)
            short = net.conv(x, c, mid * 4, 1, stride=stride) if b == 0 else x
            x, c = net.op("Relu", net.op("Add", h, short)), mid * 4
    _head(net, x, c, classes)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, CONV_OPSET)


def _squeeze_excite(net: Net, x: str, c: int, squeeze: int, act: str = "Relu", gate: str = "Sigmoid") -> str:
    """torchvision's SqueezeExcitation: mean over H, W; 1x1 conv, act, 1x1 conv, gate; scale."""
    s = net.mean(x, [-1, -2])
    s = net.conv(s, c, squeeze, 1)
    s = net.silu(s) if act == "SiLU" else net.op(act, s)
    return net.op("Mul", net.op(gate, net.conv(s, squeeze, c, 1)), x)


def regnety_400mf(path: str | Path, seed: int = 0, size: int = 224, depths: Sequence[int] = (1, 3, 6, 6),
                  widths: Sequence[int] = (48, 104, 208, 440), group_width: int = 8, classes: int = 1000) -> Path:
    """torchvision regnet_y_400mf: 3x3 stem of 32, stages of Y blocks (1x1, grouped 3x3 with the
    stride, squeeze-excitation at a quarter of the block's input, 1x1; projection shortcut when
    the shape changes; ReLU after the sum), head."""
    net = Net("regnety_400mf", seed)
    x, c = net.op("Relu", net.conv("x", 3, 32, 3, stride=2)), 32
    for depth, w in zip(depths, widths):
        for b in range(depth):
            stride = 2 if b == 0 else 1
            h = net.op("Relu", net.conv(x, c, w, 1))
            h = net.op("Relu", net.conv(h, w, w, 3, stride=stride, groups=w // group_width))
            h = _squeeze_excite(net, h, w, max(1, round(0.25 * c)))
            h = net.conv(h, w, w, 1, scale=0.3 / w ** 0.5)
            short = net.conv(x, c, w, 1, stride=stride) if (stride != 1 or c != w) else x
            x, c = net.op("Relu", net.op("Add", h, short)), w
    _head(net, x, c, classes)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, CONV_OPSET)


def densenet121(path: str | Path, seed: int = 0, size: int = 224, blocks: Sequence[int] = (6, 12, 24, 16),
                growth: int = 32, init: int = 64, bn_size: int = 4, classes: int = 1000) -> Path:
    """torchvision densenet121: 7x7 stem, max pool; dense layers (BN, ReLU, 1x1, BN, ReLU, 3x3)
    each reading the Concat of every earlier feature map of its block (the transition's Concat
    has one input per layer plus one); transitions (BN, ReLU, 1x1 halving, 2x2 average pool);
    final BN, ReLU, head."""
    net = Net("densenet121", seed)
    x = net.op("Relu", net.conv("x", 3, init, 7, stride=2))
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = init
    for i, layers in enumerate(blocks):
        feats = [x]
        for j in range(layers):
            cat = feats[0] if len(feats) == 1 else net.op("Concat", *feats, axis=1)
            cin = c + j * growth
            h = net.conv(net.op("Relu", net.batchnorm(cat, cin)), cin, bn_size * growth, 1, pad=0)
            h = net.conv(net.op("Relu", net.batchnorm(h, bn_size * growth)), bn_size * growth, growth, 3)
            feats.append(h)
        x, c = net.op("Concat", *feats, axis=1), c + layers * growth
        if i < len(blocks) - 1:
            x = net.conv(net.op("Relu", net.batchnorm(x, c)), c, c // 2, 1, pad=0)
            x, c = net.op("AveragePool", x, kernel_shape=[2, 2], strides=[2, 2]), c // 2
    x = net.op("Relu", net.batchnorm(x, c))
    _head(net, x, c, classes)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, CONV_OPSET)
