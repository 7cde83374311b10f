"""The transposed 2-D convolution (ONNX ConvTranspose; UNet's and GANs' upsampling): one op-table
row. Its reference scatters each kernel tap's product into a strided view of the output, so it is
exact in every domain, like conv2d."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eqsat.errors import ShapeError
from eqsat.ir.domains import Domain
from eqsat.ir.opspec import Attrs, AttrSpec, OpSpec, Shape, register

_ATTRS = (
    AttrSpec("stride", "pair", (1, 1)),
    AttrSpec("pads", "ints", (0, 0, 0, 0)),  # ONNX's (top, left, bottom, right), cropped from the full output
    AttrSpec("output_padding", "pair", (0, 0)),
    AttrSpec("dilation", "pair", (1, 1)),
    AttrSpec("groups", "int", 1),
)


def _convt_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    x, w = ins[0], ins[1]
    g, pads = attrs["groups"], attrs["pads"]
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"conv_transpose: input {x} and kernel {w} must both have rank 4 (NCHW, C x O/g x kh x kw)")
    if g < 1 or x[1] != w[0] or x[1] % g != 0:
        raise ShapeError(f"conv_transpose: input {x} has {x[1]} channels; the kernel {w} needs {w[0]}, "
                         f"a multiple of groups {g}")
    if len(pads) != 4 or min(pads) < 0:
        raise ShapeError(f"conv_transpose: pads {pads} must be 4 non-negative integers")
    out = []
    for k in range(2):
        s, d, op = attrs["stride"][k], attrs["dilation"][k], attrs["output_padding"][k]
        if s < 1 or d < 1 or op < 0 or (op >= s and op >= d):
            raise ShapeError(f"conv_transpose: stride {s}, dilation {d} >= 1 and output padding {op} below one of them")
        size = (x[2 + k] - 1) * s + d * (w[2 + k] - 1) + 1 + op - pads[k] - pads[2 + k]
        if size < 1:
            raise ShapeError(f"conv_transpose: pads {pads} leave no output on axis {2 + k} of input {x}")
        out.append(size)
    if len(ins) == 3 and ins[2] != (w[1] * g,):
        raise ShapeError(f"conv_transpose: bias has shape {ins[2]}, expected ({w[1] * g},)")
    return ((x[0], w[1] * g, out[0], out[1]),)


def _convt(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    x, w = xs[:2]
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    g = attrs["groups"]
    (sh, sw), (dh, dw), (oh, ow) = attrs["stride"], attrs["dilation"], attrs["output_padding"]
    full = ((h - 1) * sh + dh * (kh - 1) + 1 + oh, (wd - 1) * sw + dw * (kw - 1) + 1 + ow)
    out = np.zeros((n, g * og) + full, dtype=object if domain.object_arrays else (np.int64 if domain.int64
                                                                                   else np.float64))
    xg, wg = x.reshape(n, g, c // g, h, wd), w.reshape(g, c // g, og, kh, kw)
    for i in range(kh):
        for j in range(kw):
            tap = domain.contract(lambda a, b: np.einsum("ngchw,gco->ngohw", a, b, optimize=not domain.object_arrays),
                                  xg, wg[..., i, j])
            out[:, :, i * dh:i * dh + (h - 1) * sh + 1:sh, j * dw:j * dw + (wd - 1) * sw + 1:sw] += \
                tap.reshape(n, g * og, h, wd)
    t, left, b, r = attrs["pads"]
    out = domain.reduce(out[:, :, t:full[0] - b, left:full[1] - r])
    if len(xs) == 3:
        out = out + xs[2].reshape(1, -1, 1, 1)
    return out


def _convt_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    """torch's transposed conv pads symmetrically; ONNX's uneven pads crop its full output here."""
    top, left, bottom, right = attrs["pads"]
    even = top == bottom and left == right
    bias = xs[2] if len(xs) == 3 else None
    out = t.nn.functional.conv_transpose2d(
        xs[0], xs[1], bias if even else None, attrs["stride"], (top, left) if even else 0, attrs["output_padding"],
        attrs["groups"], attrs["dilation"])
    if even:
        return out
    out = out[:, :, top:out.shape[2] - bottom, left:out.shape[3] - right]
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


register(OpSpec(
    name="conv_transpose", arity=2, optional_inputs=1, attrs=_ATTRS, shape=_convt_shape, evaluate=_convt,
    torch=_convt_torch,
    flops=lambda attrs, ins, outs: 2 * ins[0][0] * ins[0][1] * ins[0][2] * ins[0][3] * ins[1][1] * ins[1][2]
    * ins[1][3],
    terms=lambda attrs, ins: ins[1][0] // max(attrs["groups"], 1) * ins[1][2] * ins[1][3],
    linear_in=(0, 1), same_rank=True,
    doc="Transposed 2-D convolution NCHW x (C, O/groups, kh, kw) with an optional bias (O,): each input "
        "pixel scatters its kernel-weighted copy at stride spacing; ``pads`` crop the full result.",
))
