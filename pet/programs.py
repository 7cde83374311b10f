"""Convolution programs and their shape-preserving transformations, as graphs of the op table.

A :class:`ConvProblem` is one conv2d. A transformation rewrites it into another multilinear
tensor program with the same input and output shapes, built from reshape, transpose and conv2d,
and says along each spatial axis how an output position reads the input: ``reads(o, j)`` is the
global input index that kernel offset ``j`` reads for output position ``o`` (None: padding). That
index arithmetic follows from the reshape/transpose layout of the program; the box analysis
(:mod:`pet.boxes`) uses it, and the numerical tests evaluate the graphs themselves.

* :class:`SpatialSplit`: cut H or W into ``parts`` pieces moved into the batch, each padded on
  its own (partially equivalent: the positions next to a seam lose their neighbours).
* :class:`DilationToBatch`: a conv with dilation d becomes d×d interleaved sub-images in the batch
  and a conv with dilation 1 (CSRNet's case; fully equivalent when d divides H and W).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from eqsat.graph import Graph, Node, input_, node, weight
from eqsat.ops import conv_pads

AXES = {"H": 2, "W": 3}


@dataclass(frozen=True)
class ConvProblem:
    """conv2d(x[N, C, H, W], w[O, C, K, K]) with explicit padding, stride and dilation."""

    N: int
    C: int
    O: int
    H: int
    W: int
    K: int = 3
    pad: int = 1
    stride: int = 1
    dilation: int = 1

    def attrs(self, dilation: int | None = None, pad: int | None = None) -> dict:
        d = self.dilation if dilation is None else dilation
        p = self.pad if pad is None else pad
        return {"stride": (self.stride, self.stride), "pad": (p, p), "dilation": (d, d)}

    def out_size(self, size: int) -> int:
        return conv_pads(self.pad, size, self.K, self.stride, self.dilation)[2]

    def leaves(self) -> tuple[Node, Node]:
        return input_("x", (self.N, self.C, self.H, self.W)), weight("w", (self.O, self.C, self.K, self.K))

    def original(self) -> Graph:
        x, w = self.leaves()
        return Graph([node("conv2d", x, w, **self.attrs())], name="conv")

    def reads(self, axis: str) -> Callable[[int, int], int | None]:
        size = self.H if axis == "H" else self.W

        def f(o: int, j: int) -> int | None:
            i = o * self.stride - self.pad + j * self.dilation
            return i if 0 <= i < size else None

        return f


@dataclass(frozen=True)
class SpatialSplit:
    """Split axis H or W into ``parts`` equal pieces moved into the batch (PET's Figure 1)."""

    axis: str
    parts: int
    flip_kernel: bool = False  # a deliberately wrong variant: the kernel mirrored along W

    @property
    def name(self) -> str:
        return f"split-{self.axis}-{self.parts}" + ("-flipped" if self.flip_kernel else "")

    def applies(self, p: ConvProblem) -> bool:
        size = p.H if self.axis == "H" else p.W
        if self.parts < 2 or size % self.parts:
            return False
        piece = size // self.parts
        try:
            return self.parts * conv_pads(p.pad, piece, p.K, p.stride, p.dilation)[2] == p.out_size(size)
        except ValueError:
            return False

    def program(self, p: ConvProblem) -> Graph:
        s, ax = self.parts, AXES[self.axis]
        x, w = p.leaves()
        shape = list(x.shape)
        split = shape[:ax] + [s, shape[ax] // s] + shape[ax + 1:]      # N C H s W/s  (or N C s H/s W)
        xs = node("reshape", x, shape=tuple(split))
        to_batch = (ax,) + tuple(i for i in range(len(split)) if i != ax)  # s first
        xb = node("transpose", xs, perm=to_batch)
        piece = list(xb.shape)
        batched = node("reshape", xb, shape=(s * piece[1],) + tuple(piece[2:]))
        kernel = w
        if self.flip_kernel:
            kernel = _flip_w(w)
        y = node("conv2d", batched, kernel, **p.attrs())
        yo = list(y.shape)
        ys = node("reshape", y, shape=(s, p.N) + tuple(yo[1:]))          # s N O H' W'
        back = [1, 2, 3, 4]
        back.insert(ax, 0)                                                # s next to its axis again
        yt = node("transpose", ys, perm=tuple(back))
        out = node("reshape", yt, shape=(p.N, p.O, p.out_size(p.H), p.out_size(p.W)))
        return Graph([out], name=self.name)

    def reads(self, p: ConvProblem, axis: str) -> Callable[[int, int], int | None]:
        if axis != self.axis:
            return p.reads(axis)
        size = p.H if axis == "H" else p.W
        piece = size // self.parts
        out_piece = p.out_size(size) // self.parts
        flip = self.flip_kernel and axis == "W"

        def f(o: int, j: int) -> int | None:
            q, local_o = divmod(o, out_piece)
            jj = p.K - 1 - j if flip else j
            i = local_o * p.stride - p.pad + jj * p.dilation
            return q * piece + i if 0 <= i < piece else None

        return f


def _flip_w(w: Node) -> Node:
    """The kernel mirrored along its last axis, as a weight-only subgraph (split + concat)."""
    k = w.shape[3]
    sp = node("split", w, axis=3, sizes=(1,) * k)
    cols = [node("proj", sp, index=i) for i in range(k)]
    return node("concat", *reversed(cols), axis=3)


@dataclass(frozen=True)
class DilationToBatch:
    """A dilated conv as d×d interleaved sub-images in the batch and an undilated conv."""

    @property
    def name(self) -> str:
        return "dilation-to-batch"

    def applies(self, p: ConvProblem) -> bool:
        d = p.dilation
        return d > 1 and p.stride == 1 and p.H % d == 0 and p.W % d == 0 and p.pad == d * (p.K - 1) // 2

    def program(self, p: ConvProblem) -> Graph:
        d = p.dilation
        x, w = p.leaves()
        xs = node("reshape", x, shape=(p.N, p.C, p.H // d, d, p.W // d, d))
        xt = node("transpose", xs, perm=(3, 5, 0, 1, 2, 4))                 # d d N C H/d W/d
        xb = node("reshape", xt, shape=(d * d * p.N, p.C, p.H // d, p.W // d))
        y = node("conv2d", xb, w, **p.attrs(dilation=1, pad=(p.K - 1) // 2))
        ys = node("reshape", y, shape=(d, d, p.N, p.O, p.H // d, p.W // d))
        yt = node("transpose", ys, perm=(2, 3, 4, 0, 5, 1))                 # N O H/d d W/d d
        return Graph([node("reshape", yt, shape=(p.N, p.O, p.H, p.W))], name=self.name)

    def reads(self, p: ConvProblem, axis: str) -> Callable[[int, int], int | None]:
        d = p.dilation
        size = p.H if axis == "H" else p.W
        sub = size // d
        half = (p.K - 1) // 2

        def f(o: int, j: int) -> int | None:
            r, local_o = o % d, o // d
            i = local_o - half + j
            return i * d + r if 0 <= i < sub else None

        return f


Transformation = SpatialSplit | DilationToBatch


def candidates(p: ConvProblem, max_parts: int = 4) -> list[Transformation]:
    """Every shape-preserving transformation of ``p`` the generator knows."""
    out: list[Transformation] = [SpatialSplit(a, s) for a in ("H", "W") for s in range(2, max_parts + 1)
                                 if SpatialSplit(a, s).applies(p)]
    if DilationToBatch().applies(p):
        out.append(DilationToBatch())
    return out
