"""Encoder and decoder transformers as the dynamo exporter writes them at opset 20: ViT's
nn.MultiheadAttention sequence-first with its packed projection unpacked by Gathers, GPT-2's packed
QKV projection unpacked by ``Split`` with sizes as an input, heads by constant-shape Reshape and
Transpose, ``LayerNormalization``, ``Gelu`` (``none`` for ViT, ``tanh`` for GPT-2), GPT-2's
token embedding as ``Gather`` on int64 ids and its causal mask as ``Where`` on a constant."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.zoo.convnext import GELU_OPSET
from experiments.zoo.net import Net


def _heads(net: Net, x: str, seq: int, heads: int, hd: int) -> str:
    """(1, seq, heads*hd) -> (1, heads, seq, hd)."""
    return net.op("Transpose", net.reshape(x, 1, seq, heads, hd), perm=[0, 2, 1, 3])


def _merge(net: Net, x: str, seq: int, d: int) -> str:
    """(1, heads, seq, hd) -> (1, seq, d)."""
    return net.reshape(net.op("Transpose", x, perm=[0, 2, 1, 3]), 1, seq, d)


def attention(net: Net, x: str, seq: int, d: int, heads: int, causal: bool = False) -> str:
    """Multi-head self-attention: packed QKV Linear, Split, scores scaled by 1/sqrt(hd) (GPT-2
    divides by a constant), a causal ``Where`` on a constant mask, Softmax, out-projection."""
    hd = d // heads
    q, k, v = net.op("Split", net.linear(x, d, 3 * d), net.init([d, d, d]), n_out=3, axis=-1)
    q, k, v = (_heads(net, t, seq, heads, hd) for t in (q, k, v))
    scores = net.op("MatMul", q, net.op("Transpose", k, perm=[0, 1, 3, 2]))
    if causal:
        scores = net.op("Div", scores, net.scalar(float(np.sqrt(hd))))
        mask = net.init(np.tril(np.ones((seq, seq), dtype=bool))[None, None], np.bool_)
        scores = net.op("Where", mask, scores, net.scalar(float(np.finfo(np.float32).min)))
    else:
        scores = net.op("Mul", scores, net.scalar(float(1 / np.sqrt(hd))))
    ctx = net.op("MatMul", net.op("Softmax", scores, axis=-1), v)
    return net.linear(_merge(net, ctx, seq, d), d, d)


def mha_seq_first(net: Net, x: str, seq: int, d: int, heads: int) -> str:
    """nn.MultiheadAttention (batch_first=False, as torchvision's ViT calls it) as the dynamo
    exporter writes it: to sequence-first, the packed in-projection unpacked by Reshape,
    Unsqueeze, Transpose, Squeeze and three Gathers, q and k each scaled by the square root of
    1/sqrt(hd), the out-projection as Gemm on (seq, d), back to batch-first."""
    hd = d // heads
    packed = net.linear(net.op("Transpose", x, perm=[1, 0, 2]), d, 3 * d)  # (seq, 1, 3d)
    packed = net.op("Unsqueeze", net.reshape(packed, seq, 1, 3, d), net.init([0]))
    packed = net.op("Squeeze", net.op("Transpose", packed, perm=[3, 1, 2, 0, 4]), net.init([-2]))
    q, k, v = (net.op("Transpose", net.reshape(net.op("Gather", packed, net.init(i), axis=0), seq, heads, hd),
                      perm=[1, 0, 2]) for i in range(3))
    scale = net.init([np.sqrt(1 / np.sqrt(hd))], np.float32)
    q = net.op("Mul", net.reshape(q, 1, heads, seq, hd), scale)
    k = net.op("Mul", net.reshape(net.op("Transpose", k, perm=[0, 2, 1]), 1, heads, hd, seq), scale)
    ctx = net.op("MatMul", net.op("Softmax", net.op("MatMul", q, k), axis=-1), net.reshape(v, 1, heads, seq, hd))
    flat = net.reshape(net.op("Transpose", ctx, perm=[2, 0, 1, 3]), seq, d)
    return net.op("Transpose", net.reshape(net.linear(flat, d, d, gemm=True), seq, 1, d), perm=[1, 0, 2])


def vit(path: str | Path, seed: int = 0, size: int = 224, patch: int = 16, d: int = 384, heads: int = 6,
        layers: int = 6, mlp: int = 1536, classes: int = 1000) -> Path:
    """A small torchvision VisionTransformer: patch conv, flatten and permute, class token
    Concat, position embedding Add; pre-norm encoder layers (LayerNorm, nn.MultiheadAttention,
    residual, LayerNorm, MLP with exact GELU, residual); final LayerNorm, the class token (Gather),
    Gemm. Node for node what ``torch.onnx.export(..., dynamo=True, opset_version=20)`` writes for
    ``VisionTransformer(224, 16, 6, 6, 384, 1536)`` (torch 2.13), weights aside."""
    net = Net("vit", seed)
    n = (size // patch) ** 2
    seq = n + 1
    x = net.conv("x", 3, d, patch, stride=patch, pad=0, scale=1 / np.sqrt(3 * patch * patch))
    x = net.op("Transpose", net.reshape(x, 1, d, n), perm=[0, 2, 1])
    x = net.op("Concat", net.weight(1, 1, d, scale=0.02), x, axis=1)
    x = net.op("Add", x, net.weight(1, seq, d, scale=0.02))
    for _ in range(layers):
        x = net.op("Add", mha_seq_first(net, net.layernorm(x, d, eps=1e-6), seq, d, heads), x)
        h = net.op("Gelu", net.linear(net.layernorm(x, d, eps=1e-6), d, mlp), approximate="none")
        x = net.op("Add", x, net.linear(h, mlp, d))
    cls = net.op("Gather", net.layernorm(x, d, eps=1e-6), net.init(0), axis=1)  # x[:, 0]
    net.linear(cls, d, classes, gemm=True)
    net.output("out")
    return net.save(path, {"x": (1, 3, size, size)}, {"out": (1, classes)}, GELU_OPSET)


def gpt2(path: str | Path, seed: int = 0, seq: int = 128, d: int = 768, heads: int = 12, layers: int = 2,
         vocab: int = 50257) -> Path:
    """GPT-2 (Hugging Face's eager attention) with ``layers`` blocks: token and position
    embeddings as Gather on int64 ids, pre-norm blocks (LayerNorm, causal attention, residual,
    LayerNorm, MLP 4x with tanh GELU, residual), final LayerNorm and the tied LM head (MatMul by
    the Transpose of the token embedding)."""
    net = Net("gpt2", seed)
    wte = net.weight(vocab, d, scale=0.02)
    x = net.op("Add", net.op("Gather", wte, "ids", axis=0),
               net.op("Gather", net.weight(1024 if seq <= 1024 else seq, d, scale=0.01),
                      net.init(np.arange(seq)[None]), axis=0))
    for _ in range(layers):
        x = net.op("Add", x, attention(net, net.layernorm(x, d), seq, d, heads, causal=True))
        h = net.op("Gelu", net.linear(net.layernorm(x, d), d, 4 * d), approximate="tanh")
        x = net.op("Add", x, net.linear(h, 4 * d, d))
    net.op("MatMul", net.layernorm(x, d), net.op("Transpose", wte, perm=[1, 0]))
    net.output("out")
    return net.save(path, {"ids": (1, seq)}, {"out": (1, seq, vocab)}, GELU_OPSET,
                    input_types={"ids": net.onnx.TensorProto.INT64})
