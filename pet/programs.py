"""Convolution programs and their shape-preserving transformations, as graphs of the op table.

A :class:`ConvProblem` is one conv2d. A transformation rewrites it into another multilinear
tensor program with the same input and output shapes, built from pad, reshape, transpose, conv2d
and slicing (split + proj),
and says along each spatial axis how an output position reads the input: ``reads(o, j)`` is the
global input index that kernel offset ``j`` reads for output position ``o`` (None: padding). That
index arithmetic follows from the reshape/transpose layout of the program; the box analysis
(:mod:`pet.boxes`) uses it, and the numerical tests evaluate the graphs themselves.

* :class:`SpatialSplit`: cut H or W into ``parts`` pieces moved into the batch, each padded on
  its own (partially equivalent: the positions next to a seam lose their neighbours). When
  ``parts`` does not divide the axis (ResNet-18's 7x7), the input is zero-padded at the end
  first and the padded output positions are sliced off: pad -> conv -> slice.
* :class:`DilationToBatch`: a conv with dilation d becomes d×d interleaved sub-images in the batch
  and a conv with dilation 1 (CSRNet's case; fully equivalent when d divides H and W).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eqsat.ir.graph import Graph, Node, input_, node, weight
from eqsat.ir.ops import conv_pads

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

    def piece(self, p: ConvProblem) -> int:
        """Input size of one piece; when ``parts`` does not divide the axis, the input is
        zero-padded at the end to ``parts * piece`` (pad -> conv -> slice)."""
        size = p.H if self.axis == "H" else p.W
        return -(-size // self.parts)

    def padding(self, p: ConvProblem) -> int:
        size = p.H if self.axis == "H" else p.W
        return self.parts * self.piece(p) - size

    def applies(self, p: ConvProblem) -> bool:
        """Every piece's output covers whole output positions, in order, and the padded tail is
        at most one output position's worth (or none)."""
        size = p.H if self.axis == "H" else p.W
        if self.parts < 2 or self.piece(p) < 2:
            return False
        piece = self.piece(p)
        try:
            out_piece = conv_pads(p.pad, piece, p.K, p.stride, p.dilation)[2]
        except ValueError:
            return False
        if self.padding(p) == 0:
            return self.parts * out_piece == p.out_size(size)
        return p.stride == 1 and out_piece == piece and self.parts * out_piece >= p.out_size(size)

    def program(self, p: ConvProblem) -> Graph:
        s, ax = self.parts, AXES[self.axis]
        x, w = p.leaves()
        extra = self.padding(p)
        if extra:  # zero-pad the axis at its end to a multiple of the parts
            pads = [0] * 8
            pads[4 + ax] = extra
            x = node("pad", x, pads=tuple(pads))
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
        full = [p.N, p.O, p.out_size(p.H), p.out_size(p.W)]
        full[ax] = s * yo[ax]
        out = node("reshape", yt, shape=tuple(full))
        want = p.out_size(p.H if self.axis == "H" else p.W)
        if full[ax] > want:  # slice the padded tail off (a view)
            out = node("proj", node("split", out, axis=ax, sizes=(want, full[ax] - want)), index=0)
        return Graph([out], name=self.name)

    def reads(self, p: ConvProblem, axis: str) -> Callable[[int, int], int | None]:
        if axis != self.axis:
            return p.reads(axis)
        size = p.H if axis == "H" else p.W
        piece = self.piece(p)
        out_piece = conv_pads(p.pad, piece, p.K, p.stride, p.dilation)[2]
        flip = self.flip_kernel and axis == "W"

        def f(o: int, j: int) -> int | None:
            q, local_o = divmod(o, out_piece)
            jj = p.K - 1 - j if flip else j
            i = local_o * p.stride - p.pad + jj * p.dilation
            g = q * piece + i
            return g if 0 <= i < piece and g < size else None  # past the end: the padded zeros

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
