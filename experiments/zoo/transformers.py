"""Encoder and decoder transformers as the dynamo exporter writes them at opset 20: ViT's
nn.MultiheadAttention sequence-first with its packed projection unpacked by Gathers, GPT-2's packed
QKV projection unpacked by ``Split`` into three, heads by constant-shape Reshape and
Transpose, ``LayerNormalization``, ViT's ``Gelu`` (``none``), GPT-2's Conv1D as Reshape/Gemm/Reshape,
its tanh GELU written out (Hugging Face's NewGELU), its token embedding as ``Gather`` on int64 ids
and its causal mask as ``Where`` on constants."""
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


def _conv1d(net: Net, x: str, rows: int, d_in: int, d_out: int) -> str:
    """Hugging Face's Conv1D (``addmm`` on the flattened rows): Reshape, Gemm, Reshape back."""
    y = net.op("Gemm", net.reshape(x, -1, d_in), net.weight(d_in, d_out), net.weight(d_out, scale=0.1))
    return net.reshape(y, 1, rows, d_out)


def _gelu_new(net: Net, x: str) -> str:
    """GPT-2's NewGELUActivation, written out: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = net.op("Add", x, net.op("Mul", net.op("Pow", x, net.scalar(3.0)), net.scalar(0.044715)))
    t = net.op("Tanh", net.op("Mul", inner, net.scalar(float(np.sqrt(2 / np.pi)))))
    return net.op("Mul", net.op("Mul", x, net.scalar(0.5)), net.op("Add", t, net.scalar(1.0)))


def gpt2(path: str | Path, seed: int = 0, seq: int = 128, d: int = 768, heads: int = 12, layers: int = 2,
         vocab: int = 50257) -> Path:
    """GPT-2 (Hugging Face, eager attention) with ``layers`` blocks: token and position embeddings
    as Gather on int64 ids; the causal mask built once from constants (And, Where) and added to
    the scores; pre-norm blocks (LayerNorm, Conv1D QKV, ``Split`` into three, heads, scores scaled
    by 1/sqrt(hd), Softmax, Conv1D out-projection, residual; LayerNorm, Conv1D, tanh GELU written
    out with Pow and Tanh, Conv1D, residual); final LayerNorm and the tied LM head (MatMul by the
    Transpose of the token embedding). Node for node what ``torch.onnx.export(..., dynamo=True,
    opset_version=20)`` writes for transformers' GPT2LMHeadModel(n_layer=2) (85 nodes at the
    default sizes), weights aside: the export drops zero-initialized Conv1D biases, here random."""
    net = Net("gpt2", seed)
    hd = d // heads
    wte = net.weight(vocab, d, scale=0.02)
    x = net.op("Add", net.op("Gather", wte, net.reshape("ids", -1, seq), axis=0),
               net.op("Gather", net.weight(max(1024, seq), d, scale=0.01), net.init(np.arange(seq)[None]), axis=0))
    causal = np.tril(np.ones((seq, seq), dtype=bool))[None, None]
    keep = net.op("And", net.op("And", net.init(True, np.bool_), net.init(causal, np.bool_)),
                  net.init(np.ones((1, 1, seq, seq), dtype=bool), np.bool_))
    mask = net.op("Where", keep, net.scalar(0.0), net.scalar(float(np.finfo(np.float32).min)))
    for _ in range(layers):
        qkv = _conv1d(net, net.layernorm(x, d), seq, d, 3 * d)
        q, k, v = (net.reshape(t, 1, seq, -1, hd) for t in net.op("Split", qkv, n_out=3, axis=2, num_outputs=3))
        q, v = (net.op("Transpose", t, perm=[0, 2, 1, 3]) for t in (q, v))
        scores = net.op("Mul", net.op("MatMul", q, net.op("Transpose", k, perm=[0, 2, 3, 1])),
                        net.scalar(float(1 / np.sqrt(hd))))
        ctx = net.op("MatMul", net.op("Softmax", net.op("Add", scores, mask), axis=-1), v)
        flat = net.reshape(net.op("Transpose", ctx, perm=[0, 2, 1, 3]), seq, d)
        y = net.op("Gemm", flat, net.weight(d, d), net.weight(d, scale=0.1))
        x = net.op("Add", net.reshape(y, 1, seq, d), x)
        h = _gelu_new(net, _conv1d(net, net.layernorm(x, d), seq, d, 4 * d))
        x = net.op("Add", x, _conv1d(net, h, seq, 4 * d, d))
    net.op("MatMul", net.reshape(net.layernorm(x, d), -1, seq, d), net.op("Transpose", wte, perm=[1, 0]))
    net.output("out")
    return net.save(path, {"ids": (1, seq)}, {"out": (1, seq, vocab)}, GELU_OPSET,
                    input_types={"ids": net.onnx.TensorProto.INT64})
