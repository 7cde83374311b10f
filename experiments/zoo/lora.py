"""A LoRA MLP as PEFT's ``lora.Linear`` exports with the dynamo exporter: each adapted
``nn.Linear`` is ``x @ W + b + (x @ A) @ B * scale`` (MatMul, Add, MatMul, MatMul, Mul, Add)."""
from __future__ import annotations

from pathlib import Path

from experiments.zoo.convnext import GELU_OPSET
from experiments.zoo.net import Net


def _lora_linear(net: Net, x: str, d_in: int, d_out: int, rank: int, alpha: float) -> str:
    base = net.linear(x, d_in, d_out)
    low = net.op("MatMul", net.op("MatMul", x, net.weight(d_in, rank)), net.weight(rank, d_out, scale=0.05))
    return net.op("Add", base, net.op("Mul", low, net.scalar(alpha / rank)))


def lora_mlp(path: str | Path, seed: int = 0, tokens: int = 256, d: int = 1024, hidden: int = 4096,
             rank: int = 16, alpha: float = 32.0) -> Path:
    """A transformer MLP (Linear, exact GELU, Linear) with a rank-``rank`` adapter on both
    Linears, on a (1, tokens, d) batch."""
    net = Net("lora_mlp", seed)
    h = net.op("Gelu", _lora_linear(net, "x", d, hidden, rank, alpha), approximate="none")
    _lora_linear(net, h, hidden, d, rank, alpha)
    net.output("out")
    return net.save(path, {"x": (1, tokens, d)}, {"out": (1, tokens, d)}, GELU_OPSET)
