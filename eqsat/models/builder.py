"""A small helper for writing model builders: fresh weight names and layer shorthands."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from eqsat.ir.graph import Graph, Node, input_, node, split, weight
from eqsat.ir.ops import Shape


class ModelBuilder:
    """Creates uniquely named weights and common layers (bias-free, activation fused)."""

    def __init__(self, name: str, dtype: str = "bf16"):
        self.name = name
        self.dtype = dtype
        self._counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        k = self._counts.get(prefix, 0)
        self._counts[prefix] = k + 1
        return f"{prefix}{k}"

    # leaves -----------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int]) -> Node:
        return input_(name, shape)

    def weight(self, prefix: str, shape: Sequence[int]) -> Node:
        return weight(self.fresh(prefix), shape)

    # layers -----------------------------------------------------------------
    def conv(self, x: Node, out_channels: int, kernel: int | tuple[int, int], *, stride: int | tuple[int, int] = 1,
             pad: str | int | tuple[int, int] = "same", act: str = "relu", groups: int = 1,
             prefix: str = "conv") -> Node:
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        w = self.weight(prefix, (out_channels, x.shape[1] // groups, kh, kw))
        return node("conv2d", x, w, stride=stride, pad=pad, act=act, groups=groups)

    def linear(self, x: Node, out_features: int, *, act: str = "none", prefix: str = "w") -> Node:
        w = self.weight(prefix, (x.shape[-1], out_features))
        return node("matmul", x, w, act=act)

    def pool(self, kind: str, x: Node, kernel: int, stride: int = 1, pad: str | int = "valid") -> Node:
        return node(f"pool_{kind}", x, kernel=kernel, stride=stride, pad=pad)

    def global_avg_pool(self, x: Node) -> Node:
        return node("pool_avg", x, kernel=(x.shape[2], x.shape[3]), stride=1, pad="valid")

    @staticmethod
    def op(op: str, *inputs: Node, **attrs) -> Node:
        return node(op, *inputs, **attrs)

    @staticmethod
    def add(a: Node, b: Node) -> Node:
        return node("ewadd", a, b)

    @staticmethod
    def mul(a: Node, b: Node) -> Node:
        return node("ewmul", a, b)

    @staticmethod
    def concat(xs: Iterable[Node], axis: int = 1) -> Node:
        xs = tuple(xs)
        return xs[0] if len(xs) == 1 else node("concat", *xs, axis=axis)

    @staticmethod
    def split(x: Node, axis: int, sizes: Iterable[int]) -> tuple[Node, ...]:
        return split(x, axis, sizes)

    @staticmethod
    def reshape(x: Node, shape: Shape) -> Node:
        return node("reshape", x, shape=tuple(shape))

    @staticmethod
    def transpose(x: Node, perm: Sequence[int] | None = None) -> Node:
        return node("transpose", x, perm=None if perm is None else tuple(perm))

    def graph(self, *outputs: Node) -> Graph:
        return Graph(tuple(outputs), self.dtype, self.name)
