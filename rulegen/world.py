"""Worlds: what the rule generator enumerates over, as data.

A world names its leaf tensors (with shape and kind: ``act`` for activations,
``weight`` for parameters) and the op instances it may apply (an op from the
op table with fixed attributes and, optionally, the kind each input must
have: TASO's "kinds" rule, e.g. a conv reads an activation and a weight).
``alt_dims`` gives, per leaf axis, the sizes that verification may use in
place of the fingerprint shape, so that every rule is also tested at
rectangular shapes; an axis with one size is part of the leaf's identity (a
3x3 kernel stays 3x3), the others are free sizes.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eqsat.ir.graph import Node, input_, weight
from eqsat.ir.ops import get_op

ACT, WEIGHT, ANY = "act", "weight", "any"


@dataclass(frozen=True)
class Leaf:
    """A world input: name, fingerprint shape, kind, and per-axis sizes for shape-generalized tests."""

    name: str
    shape: tuple[int, ...]
    kind: str = ACT
    alt_dims: tuple[tuple[int, ...], ...] = ()

    def node(self) -> Node:
        return (weight if self.kind == WEIGHT else input_)(self.name, self.shape)


@dataclass(frozen=True)
class OpInstance:
    """An op with fixed attributes, and the kind each input must have (None: any)."""

    op: str
    attrs: tuple[tuple[str, Any], ...] = ()
    kinds: tuple[str, ...] | None = None

    @property
    def arity(self) -> int:
        spec = get_op(self.op)
        return spec.arity if spec.arity is not None else 2

    @property
    def label(self) -> str:
        shown = ",".join(f"{k}={v}" for k, v in self.attrs)
        return f"{self.op}[{shown}]" if shown else self.op

    def accepts(self, args: tuple[Node, ...]) -> bool:
        """The kinds rule: weight-kind inputs must be weight-only terms, act-kind ones must not."""
        if self.kinds is None:
            return True
        for want, x in zip(self.kinds, args):
            if want == WEIGHT and not x.is_const or want == ACT and x.is_const:
                return False
        return True


@dataclass(frozen=True)
class World:
    name: str
    leaves: tuple[Leaf, ...]
    ops: tuple[OpInstance, ...]
    note: str = ""

    def leaf_nodes(self) -> tuple[Node, ...]:
        return tuple(leaf.node() for leaf in self.leaves)

    def test_dims(self, name: str, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """Per-axis sizes to test a variable at: its own leaf's, a same-shape leaf's, or (a fresh
        variable of a new shape) those of the most specific leaf of its rank whose fixed sizes it has."""
        same = [leaf for leaf in self.leaves if leaf.name == name] or [leaf for leaf in self.leaves
                                                                      if leaf.shape == shape]
        if not same:
            same = [leaf for leaf in self.leaves if len(leaf.shape) == len(shape) and leaf.alt_dims and all(
                len(opts) > 1 or opts[0] == s for opts, s in zip(leaf.alt_dims, shape))]
            same.sort(key=lambda leaf: -sum(len(opts) == 1 for opts in leaf.alt_dims))
        return same[0].alt_dims if same and same[0].alt_dims else tuple((s,) for s in shape)

    def kind_of(self, name: str) -> str:
        """The kind of a rule variable: its leaf's, or ``any`` for a generalized variable."""
        return next((leaf.kind for leaf in self.leaves if leaf.name == name), ANY)

    def leaf(self, name: str) -> Leaf:
        for leaf in self.leaves:
            if leaf.name == name:
                return leaf
        raise KeyError(f"world {self.name!r} has no leaf {name!r}")


_MAT_DIMS = ((2, 3, 5), (2, 3, 5))
MATRIX = World(
    name="matrix",
    leaves=tuple(Leaf(n, (4, 4), ACT, _MAT_DIMS) for n in "ABC"),
    ops=(
        OpInstance("transpose"),
        OpInstance("relu"),
        OpInstance("matmul"),
        OpInstance("ewadd"),
        OpInstance("ewmul"),
        OpInstance("concat", (("axis", 1),)),
    ),
    note="three 4x4 inputs; transpose, relu, matmul, ewadd, ewmul, column concat (the reference world)",
)

_ACT_DIMS = ((1, 2), (2, 3), (4, 5), (4, 6))
CONV = World(
    name="conv",
    leaves=(
        Leaf("X", (1, 2, 4, 4), ACT, _ACT_DIMS),
        Leaf("Y", (1, 2, 4, 4), ACT, _ACT_DIMS),
        Leaf("W", (2, 2, 3, 3), WEIGHT, ((2, 3), (2, 3), (3,), (3,))),
        Leaf("V", (2, 2, 3, 3), WEIGHT, ((2, 3), (2, 3), (3,), (3,))),
        Leaf("K", (2, 2, 1, 1), WEIGHT, ((2, 3), (2, 3), (1,), (1,))),
        Leaf("L", (2, 2, 1, 1), WEIGHT, ((2, 3), (2, 3), (1,), (1,))),
    ),
    ops=(
        OpInstance("conv2d", (("pad", "same"),), (ACT, WEIGHT)),
        OpInstance("conv2d", (("pad", "same"), ("act", "relu")), (ACT, WEIGHT)),
        OpInstance("relu", (), (ACT,)),
        OpInstance("ewadd"),
        OpInstance("concat", (("axis", 1),), (ACT, ACT)),
        OpInstance("concat", (("axis", 0),), (WEIGHT, WEIGHT)),
        OpInstance("enlarge", (("size", 3),), (WEIGHT,)),
    ),
    note=("activations X, Y (1x2x4x4); 3x3 kernels W, V and 1x1 kernels K, L (O=I=2); conv SAME with and "
          "without fused relu, relu, ewadd, channel concat of activations, output-channel concat of kernels, "
          "enlarge to 3x3; kinds rule: a conv reads an activation and a weight"),
)

WORLDS: Mapping[str, World] = {"matrix": MATRIX, "conv": CONV}


def get_world(name: str) -> World:
    try:
        return WORLDS[name]
    except KeyError:
        raise KeyError(f"unknown world {name!r} (known: {', '.join(WORLDS)})") from None
