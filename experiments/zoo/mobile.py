"""Mobile convnets as torchvision defines them and the dynamo exporter writes them: depthwise
convs with folded BatchNormalization, ``HardSwish``/``HardSigmoid`` (MobileNetV3), SiLU as
Sigmoid and Mul (EfficientNet), squeeze-excitation through ReduceMean, ShuffleNet's chunk as
``Split`` with sizes as an input and its channel shuffle as Reshape/Transpose/Reshape."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from experiments.zoo.net import Net
from experiments.zoo.resnets import CONV_OPSET, _head, _squeeze_excite


def _divisible(v: float, d: int = 8) -> int:
    """torchvision's _make_divisible: round to a multiple of ``d``, never below 90% of ``v``."""
    new = max(d, int(v + d / 2) // d * d)
    return new + d if new < 0.9 * v else new


# MobileNetV3-Small: input channels, kernel, expanded, output, squeeze-excite, activation, stride
MOBILENET_V3_SMALL = (
    (16, 3, 16, 16, True, "Relu", 2), (16, 3, 72, 24, False, "Relu", 2), (24, 3, 88, 24, False, "Relu", 1),
    (24, 5, 96, 40, True, "HardSwish", 2), (40, 5, 240, 40, True, "HardSwish", 1),
    (40, 5, 240, 40, True, "HardSwish", 1), (40, 5, 120, 48, True, "HardSwish", 1),
    (48, 5, 144, 48, True, "HardSwish", 1), (48, 5, 288, 96, True, "HardSwish", 2),
    (96, 5, 576, 96, True, "HardSwish", 1), (96, 5, 576, 96, True, "HardSwish", 1),
)


def mobilenet_v3_small(path: str | Path, seed: int = 0, size: int = 224, blocks: int = len(MOBILENET_V3_SMALL),
                       classes: int = 1000) -> Path:
    """torchvision mobilenet_v3_small (its first ``blocks`` inverted residuals): HardSwish 3x3
    stem; blocks of 1x1 expand, depthwise kxk, squeeze-excitation with ReLU and HardSigmoid, 1x1
    project, residual when shapes allow; 1x1 to 6x, pool, Linear, HardSwish, Linear."""
    net = Net("mobilenet_v3_small", seed)
    x = net.op("HardSwish", net.conv("x", 3, 16, 3, stride=2))
    c = 16
    for cin, k, exp, cout, se, act, stride in MOBILENET_V3_SMALL[:blocks]:
        h = x if exp == cin else net.op(act, net.conv(x, cin, exp, 1))
        h = net.op(act, net.conv(h, exp, exp, k, stride=stride, groups=exp))
        if se:
            h = _squeeze_excite(net, h, exp, _divisible(exp // 4), gate="HardSigmoid")
        h = net.conv(h, exp, cout, 1, scale=0.5 / exp ** 0.5)
        x, c = (net.op("Add", h, x) if stride == 1 and cin == cout else h), cout
    x = net.op("HardSwish", net.conv(x, c, 6 * c, 1))
    flat = net.reshape(net.mean(x, [-1, -2]), 1, 6 * c)
    hidden = net.op("HardSwish", net.linear(flat, 6 * c, 1024, gemm=True))
    net.linear(hidden, 1024, classes, gemm=True)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, CONV_OPSET)


# EfficientNet-B0: expand ratio, kernel, stride, input channels, output channels, layers
EFFICIENTNET_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
                   (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))


def efficientnet_b0(path: str | Path, seed: int = 0, size: int = 224, stages: int = len(EFFICIENTNET_B0),
                    classes: int = 1000) -> Path:
    """torchvision efficientnet_b0 (its first ``stages`` stages): SiLU 3x3 stem of 32; MBConv
    blocks (1x1 expand, depthwise kxk, squeeze-excitation at a quarter of the block's input with
    SiLU and Sigmoid, 1x1 project, residual at stride 1); 1x1 to 1280, pool, Linear."""
    net = Net("efficientnet_b0", seed)
    x, c = net.silu(net.conv("x", 3, 32, 3, stride=2)), 32
    for expand, k, stride, cin, cout, layers in EFFICIENTNET_B0[:stages]:
        for i in range(layers):
            cin_i, s = (cin, stride) if i == 0 else (cout, 1)
            exp = cin_i * expand
            h = x if expand == 1 else net.silu(net.conv(x, cin_i, exp, 1))
            h = net.silu(net.conv(h, exp, exp, k, stride=s, groups=exp))
            h = _squeeze_excite(net, h, exp, max(1, cin_i // 4), act="SiLU")
            h = net.conv(h, exp, cout, 1, scale=0.5 / exp ** 0.5)
            x = net.op("Add", h, x) if s == 1 and cin_i == cout else h
        c = cout
    x = net.silu(net.conv(x, c, 1280, 1))
    _head(net, x, 1280, classes)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, CONV_OPSET)


def _half(n: int) -> int:
    """The size after a 3x3 stride-2 conv or pool with padding 1."""
    return (n + 1) // 2


def _shuffle(net: Net, x: str, c: int, hw: int) -> str:
    """channel_shuffle(x, 2): view as (1, 2, c/2, h, w), transpose the two group axes, view back."""
    y = net.op("Transpose", net.reshape(x, 1, 2, c // 2, hw, hw), perm=[0, 2, 1, 3, 4])
    return net.reshape(y, 1, c, hw, hw)


def shufflenet_v2(path: str | Path, seed: int = 0, size: int = 224, repeats: Sequence[int] = (4, 8, 4),
                  channels: Sequence[int] = (24, 116, 232, 464, 1024), classes: int = 1000) -> Path:
    """torchvision shufflenet_v2_x1_0: 3x3 stem, max pool; stages whose first unit has two
    stride-2 branches and whose others split the channels in two (``Split`` with sizes) and
    transform one half; each unit ends in a Concat and a channel shuffle; 1x1 conv, mean, Linear."""
    net = Net("shufflenet_v2", seed)
    x = net.op("Relu", net.conv("x", 3, channels[0], 3, stride=2))
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c, hw = channels[0], _half(_half(size))
    for reps, cout in zip(repeats, channels[1:-1]):
        half = cout // 2
        for i in range(reps):
            if i == 0:
                left = net.op("Relu", net.conv(net.conv(x, c, c, 3, stride=2, groups=c), c, half, 1))
                right, rc = x, c
                hw = _half(hw)
            else:
                left, right = net.op("Split", x, net.init([half, half]), n_out=2, axis=1)
                rc = half
            r = net.op("Relu", net.conv(right, rc, half, 1))
            r = net.conv(r, half, half, 3, stride=2 if i == 0 else 1, groups=half)
            r = net.op("Relu", net.conv(r, half, half, 1))
            x, c = _shuffle(net, net.op("Concat", left, r, axis=1), cout, hw), cout
    x = net.op("Relu", net.conv(x, c, channels[-1], 1))
    net.linear(net.mean(x, [2, 3], keepdims=False), channels[-1], classes, gemm=True)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, CONV_OPSET)
