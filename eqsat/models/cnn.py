"""Convolutional benchmarks from TASO's examples / TENSAT's evaluation suite.

All convs are bias-free with a fused activation and no batch norm, as in TASO's
example scripts. ``image`` and ``batch`` are parameters so that tests can
evaluate the same structure at small sizes; every builder documents where it
departs from the original network.
"""
from __future__ import annotations

from eqsat.ir.graph import Graph, Node, node
from eqsat.models.builder import ModelBuilder


# --------------------------------------------------------------------------- ResNet-50 / ResNeXt-50
def _bottleneck(b: ModelBuilder, x: Node, mid: int, out: int, stride: int, groups: int) -> Node:
    y = b.conv(x, mid, 1)
    y = b.conv(y, mid, 3, stride=stride, groups=groups)
    y = b.conv(y, out, 1, act="none")
    shortcut = x
    if stride != 1 or x.shape[1] != out:
        shortcut = b.conv(x, out, 1, stride=stride, act="none", prefix="proj")
    return b.op("relu", b.add(y, shortcut))


def resnext50(batch: int = 1, image: int = 224, groups: int = 32, dtype: str = "bf16") -> Graph:
    """ResNeXt-50 (32x4d layout as TASO builds it): stem conv 7x7/2 (64) + maxpool 3x3/2, then
    bottlenecks 1x1 (C) -> grouped 3x3 (C, ``groups`` groups) -> 1x1 (2C) with a projection
    shortcut, add and relu; stages C = 128x3, 256x4, 512x6, 1024x3, stride 2 at each stage start
    (but the first). No classifier head (TASO's script stops at the last block)."""
    b = ModelBuilder("resnext50", dtype)
    x = b.input("x", (batch, 3, image, image))
    x = b.conv(x, 64, 7, stride=2)
    x = b.pool("max", x, 3, 2, "same")
    for stage, (width, blocks) in enumerate(((128, 3), (256, 4), (512, 6), (1024, 3))):
        for i in range(blocks):
            stride = 2 if stage > 0 and i == 0 else 1
            x = _bottleneck(b, x, width, 2 * width, stride, groups)
    return b.graph(x)


def resnet50(batch: int = 1, image: int = 56, dtype: str = "bf16") -> Graph:
    """ResNet-50 body as TASO's example builds it: input 1x64x56x56 (no stem), bottleneck
    blocks with C = 64x3, 128x4, 256x6, 512x3 (output 4C), stride 2 at each stage start but the first."""
    b = ModelBuilder("resnet50", dtype)
    x = b.input("x", (batch, 64, image, image))
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for i in range(blocks):
            stride = 2 if stage > 0 and i == 0 else 1
            x = _bottleneck(b, x, width, 4 * width, stride, 1)
    return b.graph(x)


# --------------------------------------------------------------------------- NasNet-A
def _sep(b: ModelBuilder, x: Node, channels: int, kernel: int, stride: int = 1) -> Node:
    """Separable conv: depthwise kxk (groups = channels) then pointwise 1x1."""
    y = b.conv(x, x.shape[1], kernel, stride=stride, groups=x.shape[1], act="none", prefix="dw")
    return b.conv(y, channels, 1, prefix="pw")


def _normal_cell(b: ModelBuilder, prev: Node, cur: Node, c: int) -> Node:
    h = b.conv(prev, c, 1, prefix="squeeze")
    x = b.conv(cur, c, 1, prefix="squeeze")
    avg = lambda t: b.pool("avg", t, 3, 1, "same")  # noqa: E731
    adds = (
        b.add(_sep(b, x, c, 3), x),
        b.add(_sep(b, h, c, 3), _sep(b, x, c, 3)),
        b.add(avg(x), h),
        b.add(avg(h), avg(h)),
        b.add(_sep(b, h, c, 3), _sep(b, h, c, 3)),
    )
    return b.concat(adds, axis=1)


def _reduction_cell(b: ModelBuilder, prev: Node, cur: Node, c: int) -> Node:
    h = b.conv(prev, c, 1, prefix="squeeze")
    x = b.conv(cur, c, 1, prefix="squeeze")
    r0 = b.add(_sep(b, h, c, 7, 2), _sep(b, x, c, 5, 2))
    r1 = b.add(b.pool("max", x, 3, 2, "same"), _sep(b, h, c, 7, 2))
    r2 = b.add(b.pool("avg", x, 3, 2, "same"), _sep(b, h, c, 5, 2))
    r3 = b.add(b.pool("max", x, 3, 2, "same"), _sep(b, r0, c, 3))
    r4 = b.add(b.pool("avg", r0, 3, 1, "same"), r1)
    return b.concat((r0, r1, r2, r3, r4), axis=1)


def nasnet_a(batch: int = 1, image: int = 224, channels: tuple[int, ...] = (128, 256, 512),
             normal_cells: int = 5, dtype: str = "bf16") -> Graph:
    """NasNet-A as TASO's example builds it: the ResNeXt stem, then for each stage width C
    ``normal_cells`` normal cells and one reduction cell. Separable convs are a depthwise
    (grouped) conv followed by a 1x1 conv. Normal cell: 1x1 squeezes of both cell inputs to C,
    five pairwise adds of sep-conv 3x3, avg-pool 3x3 and identity, concat of the five.
    Reduction cell: sep 7x7/5x5/3x3 at stride 2 plus max and avg pools, concat of five.
    Deviation: a reduction cell's two inputs must share a spatial size, so the cell after a
    reduction takes the reduction output as both inputs (NASNet uses a factorized reduction)."""
    b = ModelBuilder("nasnet_a", dtype)
    x = b.input("x", (batch, 3, image, image))
    x = b.conv(x, 64, 7, stride=2)
    x = b.pool("max", x, 3, 2, "same")
    prev = cur = x
    for c in channels:
        for _ in range(normal_cells):
            prev, cur = cur, _normal_cell(b, prev, cur, c)
        cur = _reduction_cell(b, prev, cur, c)
        prev = cur
    return b.graph(cur)


# --------------------------------------------------------------------------- Inception-v3
def _inception_a(b: ModelBuilder, x: Node, pool_features: int) -> Node:
    b1 = b.conv(x, 64, 1)
    b5 = b.conv(b.conv(x, 48, 1), 64, 5)
    b3 = b.conv(b.conv(b.conv(x, 64, 1), 96, 3), 96, 3)
    bp = b.conv(b.pool("avg", x, 3, 1, "same"), pool_features, 1)
    return b.concat((b1, b5, b3, bp))


def _inception_b(b: ModelBuilder, x: Node) -> Node:
    b3 = b.conv(x, 384, 3, stride=2, pad="valid")
    bd = b.conv(b.conv(b.conv(x, 64, 1), 96, 3), 96, 3, stride=2, pad="valid")
    return b.concat((b3, bd, b.pool("max", x, 3, 2, "valid")))


def _inception_c(b: ModelBuilder, x: Node, c7: int) -> Node:
    b1 = b.conv(x, 192, 1)
    b7 = b.conv(b.conv(b.conv(x, c7, 1), c7, (1, 7)), 192, (7, 1))
    bd = b.conv(x, c7, 1)
    for out, k in ((c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))):
        bd = b.conv(bd, out, k)
    bp = b.conv(b.pool("avg", x, 3, 1, "same"), 192, 1)
    return b.concat((b1, b7, bd, bp))


def _inception_d(b: ModelBuilder, x: Node) -> Node:
    b3 = b.conv(b.conv(x, 192, 1), 320, 3, stride=2, pad="valid")
    b7 = b.conv(b.conv(b.conv(x, 192, 1), 192, (1, 7)), 192, (7, 1))
    b7 = b.conv(b7, 192, 3, stride=2, pad="valid")
    return b.concat((b3, b7, b.pool("max", x, 3, 2, "valid")))


def _inception_e(b: ModelBuilder, x: Node) -> Node:
    b1 = b.conv(x, 320, 1)
    t = b.conv(x, 384, 1)
    b3 = b.concat((b.conv(t, 384, (1, 3)), b.conv(t, 384, (3, 1))))
    u = b.conv(b.conv(x, 448, 1), 384, 3)
    bd = b.concat((b.conv(u, 384, (1, 3)), b.conv(u, 384, (3, 1))))
    bp = b.conv(b.pool("avg", x, 3, 1, "same"), 192, 1)
    return b.concat((b1, b3, bd, bp))


def inception_v3(batch: int = 1, image: int = 299, dtype: str = "bf16") -> Graph:
    """Inception-v3 without batch norm (TENSAT's batch 1; TASO used 32): stem, A x3
    (pool features 32/64/64), B, C x4 (c7 = 128/160/160/192), D, E x2, then a global
    average pool. Needs ``image`` >= 75. Deviation: no classifier and no auxiliary head."""
    if image < 75:
        raise ValueError(f"inception_v3 needs image >= 75, got {image}")
    b = ModelBuilder("inception_v3", dtype)
    x = b.input("x", (batch, 3, image, image))
    x = b.conv(x, 32, 3, stride=2, pad="valid")
    x = b.conv(x, 32, 3, pad="valid")
    x = b.conv(x, 64, 3)
    x = b.pool("max", x, 3, 2, "valid")
    x = b.conv(x, 80, 1)
    x = b.conv(x, 192, 3, pad="valid")
    x = b.pool("max", x, 3, 2, "valid")
    for pf in (32, 64, 64):
        x = _inception_a(b, x, pf)
    x = _inception_b(b, x)
    for c7 in (128, 160, 160, 192):
        x = _inception_c(b, x, c7)
    x = _inception_d(b, x)
    for _ in range(2):
        x = _inception_e(b, x)
    return b.graph(b.global_avg_pool(x))


# --------------------------------------------------------------------------- SqueezeNet / VGG-19
def _fire(b: ModelBuilder, x: Node, squeeze: int, expand: int) -> Node:
    s = b.conv(x, squeeze, 1, prefix="squeeze")
    return b.concat((b.conv(s, expand, 1, prefix="e1_"), b.conv(s, expand, 3, prefix="e3_")))


def squeezenet(batch: int = 1, image: int = 224, classes: int = 1000, dtype: str = "bf16") -> Graph:
    """SqueezeNet 1.0: conv 7x7/2 (96), eight fire modules (squeeze 1x1 -> expand 1x1 || 3x3
    -> concat) with max pools after fire 4 and 8, conv 1x1 to ``classes``, global average pool.
    26 convs and 8 concats."""
    b = ModelBuilder("squeezenet", dtype)
    x = b.input("x", (batch, 3, image, image))
    x = b.pool("max", b.conv(x, 96, 7, stride=2, pad="valid"), 3, 2, "valid")
    for i, (sq, ex) in enumerate(((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                  (64, 256), (64, 256)), start=2):
        x = _fire(b, x, sq, ex)
        if i in (4, 8):
            x = b.pool("max", x, 3, 2, "valid")
    x = b.conv(x, classes, 1)
    return b.graph(b.global_avg_pool(x))


def vgg19(batch: int = 1, image: int = 224, classes: int = 1000, hidden: int = 4096, dtype: str = "bf16") -> Graph:
    """VGG-19: 16 convs 3x3 (64x2, 128x2, 256x4, 512x4, 512x4, max pool 2x2/2 after each
    group), then three matmuls (``hidden``, ``hidden``, ``classes``) with relu fused."""
    b = ModelBuilder("vgg19", dtype)
    x = b.input("x", (batch, 3, image, image))
    for width, reps in ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4)):
        for _ in range(reps):
            x = b.conv(x, width, 3)
        x = b.pool("max", x, 2, 2, "valid")
    flat = b.reshape(x, (batch, x.shape[1] * x.shape[2] * x.shape[3]))
    y = b.linear(flat, hidden, act="relu", prefix="fc")
    y = b.linear(y, hidden, act="relu", prefix="fc")
    return b.graph(b.linear(y, classes, prefix="fc"))


# --------------------------------------------------------------------------- PET's case-study layers
def resnet18_stage4(batch: int = 16, channels: int = 512, size: int = 7, dtype: str = "bf16") -> Graph:
    """ResNet-18's last stage as PET evaluates it: two basic blocks (3x3 conv + relu, 3x3 conv, add
    the block's input, relu) on ``channels`` x ``size`` x ``size``; no downsampling, no head."""
    b = ModelBuilder("resnet18_stage4", dtype)
    x = b.input("x", (batch, channels, size, size))
    for _ in range(2):
        y = b.conv(b.conv(x, channels, 3), channels, 3, act="none")
        x = b.op("relu", b.add(y, x))
    return b.graph(x)


def csrnet_backend(batch: int = 16, size: int = 14, dtype: str = "bf16") -> Graph:
    """CSRNet's dilated back-end as PET evaluates it: six 3x3 convs with dilation 2 and relu,
    512 -> 512 -> 512 -> 512 -> 256 -> 128 -> 64 channels on ``size`` x ``size``."""
    b = ModelBuilder("csrnet_backend", dtype)
    x = b.input("x", (batch, 512, size, size))
    for out in (512, 512, 512, 256, 128, 64):
        w = b.weight("dilated", (out, x.shape[1], 3, 3))
        x = node("conv2d", x, w, stride=1, pad=2, dilation=2, act="relu")
    return b.graph(x)
