"""Attention and RNN benchmarks from TASO's examples (as TENSAT's evaluation builds them)."""
from __future__ import annotations

from eqsat.ir.graph import Graph, Node
from eqsat.models.builder import ModelBuilder


def bert(seq: int = 64, hidden: int = 1024, heads: int = 16, layers: int = 8, dtype: str = "bf16") -> Graph:
    """BERT-style attention stack, TENSAT's unbatched variant (64 tokens x 1024 hidden).

    Per layer: Q/K/V = x·W (hidden x hidden); each is reshaped to (seq, heads, d)
    and transposed to per-head layout; logits = q·kᵀ and out = logits·v as batched
    matmuls; the heads are transposed back, reshaped and sent through an output
    linear layer that feeds the next layer. As in TASO's example there is no
    softmax, layer norm or residual (not in the op set); unlike TASO's script,
    every layer's attention output is kept alive (TENSAT's fix).
    """
    if hidden % heads:
        raise ValueError(f"bert: hidden {hidden} is not divisible by heads {heads}")
    d = hidden // heads
    b = ModelBuilder("bert", dtype)
    x = b.input("x", (seq, hidden))
    for _ in range(layers):
        q, k, v = (b.linear(x, hidden, prefix=f"w{n}") for n in "qkv")
        heads_first = lambda t: b.transpose(b.reshape(t, (seq, heads, d)), (1, 0, 2))  # noqa: E731
        kt = b.transpose(b.reshape(k, (seq, heads, d)), (1, 2, 0))
        logits = b.op("matmul", heads_first(q), kt)
        out = b.op("matmul", logits, heads_first(v))
        out = b.reshape(b.transpose(out, (1, 0, 2)), (seq, hidden))
        x = b.linear(out, hidden, prefix="wo")
    return b.graph(x)


def _combine(b: ModelBuilder, x: Node, h: Node) -> Node:
    return b.add(b.linear(x, h.shape[-1], prefix="wx"), b.linear(h, h.shape[-1], prefix="wh"))


def nasrnn(steps: int = 5, hidden: int = 512, batch: int = 1, dtype: str = "bf16") -> Graph:
    """NAS-discovered RNN cell unrolled over ``steps`` steps (TASO's nasrnn example).

    The initial state is a weight. Each step computes 8 "combine" nodes
    x·W + h·U (hidden x hidden each, 16 matmuls), then a fixed tree of relu,
    sigmoid, tanh, add and mul that ends in tanh and becomes the next state.
    80 matmuls at the defaults; the step-0 h·U products are weight-only and fold.
    """
    b = ModelBuilder("nasrnn", dtype)
    state = b.weight("h_init", (batch, hidden))
    for s in range(steps):
        x = b.input(f"x{s}", (batch, hidden))
        t = [_combine(b, x, state) for _ in range(8)]
        act = lambda name, y: b.op(name, y)  # noqa: E731
        m0 = b.add(act("relu", t[0]), act("sigmoid", t[1]))
        m1 = b.add(act("sigmoid", t[2]), act("tanh", t[3]))
        m2 = b.mul(act("sigmoid", t[4]), act("tanh", t[5]))
        m3 = b.mul(act("sigmoid", t[6]), act("relu", t[7]))
        m4 = b.add(act("sigmoid", m1), act("tanh", m2))
        m5 = b.mul(act("tanh", m0), act("tanh", m3))
        state = act("tanh", b.mul(act("tanh", m4), act("tanh", m5)))
    return b.graph(state)
