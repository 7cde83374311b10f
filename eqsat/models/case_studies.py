"""The reference three case studies (docs/reference.md), as their original graphs."""
from __future__ import annotations

from eqsat.ir.graph import Graph
from eqsat.models.builder import ModelBuilder


def resnet_block(n: int = 32, c: int = 64, hw: int = 56, dtype: str = "bf16") -> Graph:
    """ResNet-style block: left conv3x3 -> relu -> conv3x3, right conv1x1 -> relu, add, relu.

    Convs are bias-free and unfused, as in the slides' starting graph (85.6 µs on h100).
    """
    b = ModelBuilder("resnet_block", dtype)
    x = b.input("x", (n, c, hw, hw))
    left = b.conv(x, c, 3, act="none", prefix="w1_")
    left = b.op("relu", left)
    left = b.conv(left, c, 3, act="none", prefix="w2_")
    right = b.op("relu", b.conv(x, c, 1, act="none", prefix="w3_"))
    return b.graph(b.op("relu", b.add(left, right)))


def qkv(batch: int = 16, d_model: int = 4096, dtype: str = "bf16") -> Graph:
    """Decode-time attention projections Q = X·Wq, K = X·Wk, V = X·Wv (three outputs)."""
    b = ModelBuilder("qkv", dtype)
    x = b.input("x", (batch, d_model))
    return b.graph(*(b.op("matmul", x, b.weight(f"w{name}", (d_model, d_model))) for name in "qkv"))


def lora(tokens: int = 512, d_model: int = 4096, rank: int = 16, dtype: str = "bf16") -> Graph:
    """LoRA at inference: Y = X·W + (X·A)·B with A d×r, B r×d."""
    b = ModelBuilder("lora", dtype)
    x = b.input("x", (tokens, d_model))
    w = b.weight("w", (d_model, d_model))
    a = b.weight("a", (d_model, rank))
    bb = b.weight("b", (rank, d_model))
    return b.graph(b.add(b.op("matmul", x, w), b.op("matmul", b.op("matmul", x, a), bb)))
