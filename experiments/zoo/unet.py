"""A small UNet as the dynamo exporter writes it: double 3x3 conv blocks (folded
BatchNormalization, ReLU), max-pool downsampling, ``ConvTranspose`` 2x2 stride-2 upsampling and
``Concat`` skips from the encoder."""
from __future__ import annotations

from pathlib import Path

from experiments.zoo.net import Net
from experiments.zoo.resnets import CONV_OPSET


def _double(net: Net, x: str, c_in: int, c_out: int) -> str:
    return net.op("Relu", net.conv(net.op("Relu", net.conv(x, c_in, c_out, 3)), c_out, c_out, 3))


def unet(path: str | Path, seed: int = 0, size: int = 128, width: int = 32, levels: int = 3,
         classes: int = 2) -> Path:
    """``levels`` encoder blocks (width doubling, max pool between), a bottleneck, and as many
    decoder blocks (ConvTranspose halving the channels, Concat with the encoder's output,
    double conv); a 1x1 conv to ``classes``. ``size`` must be divisible by 2**levels."""
    if size % 2 ** levels:
        raise ValueError(f"unet: size {size} is not divisible by 2**levels = {2 ** levels}")
    net = Net("unet", seed)
    x, c, skips = "x", 3, []
    for i in range(levels):
        x, c = _double(net, x, c, width * 2 ** i), width * 2 ** i
        skips.append((x, c))
        x = net.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
    x, c = _double(net, x, c, 2 * c), 2 * c
    for skip, sc in reversed(skips):
        up = net.op("ConvTranspose", x, net.weight(c, sc, 2, 2, scale=(1 / c) ** 0.5), net.weight(sc, scale=0.1),
                    kernel_shape=[2, 2], strides=[2, 2])
        x, c = _double(net, net.op("Concat", skip, up, axis=1), 2 * sc, sc), sc
    net.conv(x, c, classes, 1)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes, size, size)}, CONV_OPSET)
