"""Op-table rows for convolution, per-channel scale and shift, kernel enlargement and pooling."""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from eqsat.errors import ShapeError
from eqsat.ir.domains import Domain
from eqsat.ir.ops_tensor import _axis_normalize
from eqsat.ir.opspec import (
    ACT_NAMES,
    ACTIVATIONS,
    NO_MOD,
    Attrs,
    AttrSpec,
    OpSpec,
    Shape,
    ShapeRule,
    _rank,
    _window_out,
    numel,
    pad_array,
    register,
)

# --------------------------------------------------------------------------- conv2d and friends
_CONV_ATTRS = (
    AttrSpec("stride", "pair", (1, 1)),
    AttrSpec("pad", "pad", "valid"),
    AttrSpec("act", "choice", "none", ACT_NAMES),
    AttrSpec("groups", "int", 1),
    AttrSpec("dilation", "pair", (1, 1)),
)


def _conv_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    x, w = ins[:2]
    _rank("conv2d", x, 4, "input 0 (NCHW)")
    _rank("conv2d", w, 4, "input 1 (OIHW kernel)")
    g = attrs["groups"]
    if g < 1 or x[1] % g or w[0] % g:
        raise ShapeError(f"conv2d: groups={g} must divide input channels {x[1]} and output channels {w[0]}")
    if w[1] * g != x[1]:
        raise ShapeError(f"conv2d: kernel {w} expects {w[1] * g} input channels (groups={g}), input {x} has {x[1]}")
    if len(ins) == 3 and ins[2] != (w[0],):
        raise ShapeError(f"conv2d: bias (input 2) must have shape ({w[0]},) for kernel {w}, got {ins[2]}")
    (_, _, ho), (_, _, wo) = _window_out("conv2d", attrs, x, w[2], w[3])
    return ((x[0], w[0], ho, wo),)


def _conv_flops(attrs: Attrs, ins: Sequence[Shape], outs: Sequence[Shape]) -> int:
    w = ins[1]
    extra = numel(outs[0]) * ((attrs["act"] != "none") + (len(ins) == 3))
    return 2 * numel(outs[0]) * w[1] * w[2] * w[3] + extra


def _windows(x: np.ndarray, attrs: Attrs, kh: int, kw: int, fill: Any = 0) -> np.ndarray:
    """Sliding windows of an NCHW tensor: shape (N, C, Ho, Wo, kh, kw)."""
    (pt, pb, ho), (pl, pr, wo) = _window_out("window", attrs, x.shape, kh, kw)
    dh, dw = attrs.get("dilation", (1, 1))
    sh, sw = attrs["stride"]
    x = pad_array(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), fill)
    win = sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :ho, :wo]


def _taps(win: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """Each kernel tap's strided view of the windows (N, C, Ho, Wo), without copying: a reduction
    over a few taps as a sum of views runs at memory speed, where reducing the 6-D window view
    (or contracting it in a batched product of 1x1 matrices, a depthwise conv) is 5-10x slower."""
    for i in range(win.shape[-2]):
        for j in range(win.shape[-1]):
            yield i, j, win[..., i, j]


def _conv_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    x, w = xs[:2]
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    g = attrs["groups"]
    win = _windows(x, attrs, kh, kw)
    ho, wo = win.shape[2:4]
    if kh == kw == 1 and (ho, wo) == x.shape[2:]:  # pointwise, stride 1, unpadded: one product per group
        flat = x.reshape(n, g, c // g, ho * wo)
        out = domain.contract(np.matmul, w.reshape(1, g, o // g, c // g), flat, terms=c // g)
    elif g == c == o and g > 1:  # depthwise: one channel in, one out per group
        out = sum(tap * w[:, 0, i, j].reshape(1, o, 1, 1) for i, j, tap in _taps(win))  # int64-exact: < 2^46 each
        out = domain.reduce(out)
    else:
        win = win.reshape(n, g, c // g, ho, wo, kh, kw)
        wg = w.reshape(g, o // g, c // g, kh, kw)
        out = domain.contract(lambda a, b: np.einsum("ngchwij,gocij->ngohw", a, b, optimize=not domain.object_arrays),
                              win, wg, terms=c // g * kh * kw)
    out = out.reshape(n, o, ho, wo)
    if len(xs) == 3:
        out = out + xs[2].reshape(1, o, 1, 1)
    return ACTIVATIONS[attrs["act"]].fn(out)


def _torch_window_pads(t: Any, op: str, x: Any, attrs: Attrs, kh: int, kw: int, fill: float = 0.0,
                       pool: bool = False) -> tuple[Any, tuple[int, int]]:
    """``x`` and the symmetric padding torch's window ops take: uneven padding (SAME with an odd
    total; a pool's past half its window) is applied here with ``fill``, torch's own otherwise."""
    (pt, pb, _), (pl, pr, _) = _window_out(op, attrs, tuple(x.shape), kh, kw)
    if pt == pb and pl == pr and (not pool or (2 * pt <= kh and 2 * pl <= kw)):
        return x, (pt, pl)
    return t.nn.functional.pad(x, (pl, pr, pt, pb), value=fill), (0, 0)


def _conv_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    w = xs[1]
    x, pad = _torch_window_pads(t, "conv2d", xs[0], attrs, w.shape[2], w.shape[3])
    bias = xs[2] if len(xs) == 3 else None
    out = t.nn.functional.conv2d(x, w, bias, attrs["stride"], pad, attrs["dilation"], attrs["groups"])
    return ACTIVATIONS[attrs["act"]].torch(t, out)


register(OpSpec(
    name="conv2d", arity=2, optional_inputs=1, attrs=_CONV_ATTRS, shape=_conv_shape, flops=_conv_flops,
    terms=lambda attrs, ins: ins[1][1] * ins[1][2] * ins[1][3],
    evaluate=_conv_eval, torch=_conv_torch, linear_in=(0, 1), merge_axes=((0, 1),), same_rank=True,
    doc="2-D convolution NCHW x OIHW with an optional bias (O,); pad is same/valid/explicit; fused "
        "activation; groups; dilation.",
))


# --------------------------------------------------------------------------- per-channel ops
def _channel_shape(op: str, n_vectors: int) -> ShapeRule:
    def shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
        x, axis = ins[0], attrs["axis"]
        if not 0 <= axis < len(x):
            raise ShapeError(f"{op}: axis {axis} out of range for input 0 of shape {x}")
        for i, v in enumerate(ins[1:1 + n_vectors], start=1):
            if v != (x[axis],):
                raise ShapeError(f"{op}: input {i} must have shape ({x[axis]},) (axis {axis} of input 0, "
                                 f"shape {x}), got {v}")
        return (x,)
    return shape


def _along(v: Any, x: Any, axis: int) -> Any:
    """Vector ``v`` shaped to broadcast along ``axis`` of ``x``."""
    return v.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))


_CHANNEL_ATTRS = (AttrSpec("axis", "int", 1),)
register(OpSpec(
    name="chmul", arity=2, attrs=_CHANNEL_ATTRS, shape=_channel_shape("chmul", 1), normalize=_axis_normalize,
    flops=lambda attrs, ins, outs: numel(outs[0]),
    evaluate=lambda attrs, xs, domain: xs[0] * _along(xs[1], xs[0], attrs["axis"]),
    torch=lambda t, attrs, xs: xs[0] * _along(xs[1], xs[0], attrs["axis"]),
    linear_in=(0, 1), doc="Scale each slice along `axis` by a vector (per-channel multiply).",
))
register(OpSpec(
    name="chadd", arity=2, attrs=_CHANNEL_ATTRS, shape=_channel_shape("chadd", 1), normalize=_axis_normalize,
    flops=lambda attrs, ins, outs: numel(outs[0]),
    evaluate=lambda attrs, xs, domain: xs[0] + _along(xs[1], xs[0], attrs["axis"]),
    torch=lambda t, attrs, xs: xs[0] + _along(xs[1], xs[0], attrs["axis"]),
    jointly_linear=True, doc="Add a vector along `axis` (per-channel bias).",
))
register(
    OpSpec(
        name="affine",
        arity=3,
        attrs=_CHANNEL_ATTRS,
        shape=_channel_shape("affine", 2),
        normalize=_axis_normalize,
        flops=lambda attrs, ins, outs: 2 * numel(outs[0]),
        evaluate=lambda attrs, xs, domain: (
            xs[0] * _along(xs[1], xs[0], attrs["axis"]) + _along(xs[2], xs[0], attrs["axis"])
        ),
        torch=lambda t, attrs, xs: t.addcmul(_along(xs[2], xs[0], attrs["axis"]), xs[0],
                                             _along(xs[1], xs[0], attrs["axis"])),  # one kernel
        doc="x * scale + shift per slice along `axis`: inference BatchNormalization, one kernel.",
    )
)


def _enlarge_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (w,), (kh, kw) = ins, attrs["size"]
    _rank("enlarge", w, 4, "input 0 (OIHW kernel)")
    if kh < w[2] or kw < w[3] or (kh - w[2]) % 2 or (kw - w[3]) % 2:
        raise ShapeError(f"enlarge: cannot centre kernel {w} in a {kh}x{kw} window")
    return ((w[0], w[1], kh, kw),)


def _enlarge_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    (w,), (kh, kw) = xs, attrs["size"]
    ph, pw = (kh - w.shape[2]) // 2, (kw - w.shape[3]) // 2
    return pad_array(w, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _enlarge_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    (w,), (kh, kw) = xs, attrs["size"]
    ph, pw = (kh - w.shape[2]) // 2, (kw - w.shape[3]) // 2
    return t.nn.functional.pad(w, (pw, pw, ph, ph))


register(
    OpSpec(
        name="enlarge",
        arity=1,
        attrs=(AttrSpec("size", "pair"),),
        shape=_enlarge_shape,
        evaluate=_enlarge_eval,
        torch=_enlarge_torch,
        linear_in=(0,),
        jointly_linear=True,
        same_rank=True,
        doc="Zero-pad a conv kernel (centred) to size kh x kw.",
    )
)


_POOL_ATTRS = (AttrSpec("kernel", "pair"), AttrSpec("stride", "pair", (1, 1)), AttrSpec("pad", "pad", "valid"))


def _pool_shape(op: str) -> ShapeRule:
    def shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
        (x,) = ins
        _rank(op, x, 4, "input 0 (NCHW)")
        (_, _, ho), (_, _, wo) = _window_out(op, attrs, x, *attrs["kernel"])
        return ((x[0], x[1], ho, wo),)

    return shape


def _pool_avg_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    kh, kw = attrs["kernel"]
    total = sum(tap for _, _, tap in _taps(_windows(xs[0], attrs, kh, kw)))
    if domain.modulus is not None:
        return total * pow(kh * kw, -1, domain.modulus)
    return total / (kh * kw)


def _pool_max_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    kh, kw = attrs["kernel"]
    x = xs[0]
    fill = -np.inf if not domain.exact else (min(x.flat) - 1 if x.size else 0)
    taps = (tap for _, _, tap in _taps(_windows(x, attrs, kh, kw, fill=fill)))
    return functools.reduce(np.maximum, taps)


def _pool_torch(kind: str) -> Callable[[Any, Attrs, Sequence[Any]], Any]:
    def run(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
        kernel = attrs["kernel"]
        fill = 0.0 if kind == "avg" else float("-inf")
        x, pad = _torch_window_pads(t, f"pool_{kind}", xs[0], attrs, *kernel, fill=fill, pool=True)
        if kind == "avg":  # padding counts as zeros: the sum over the window is divided by its size
            return t.nn.functional.avg_pool2d(x, kernel, attrs["stride"], pad, count_include_pad=True)
        return t.nn.functional.max_pool2d(x, kernel, attrs["stride"], pad)
    return run


register(
    OpSpec(
        name="pool_avg",
        arity=1,
        attrs=_POOL_ATTRS,
        shape=_pool_shape("pool_avg"),
        flops=lambda attrs, ins, outs: numel(outs[0]) * attrs["kernel"][0] * attrs["kernel"][1],
        terms=lambda attrs, ins: attrs["kernel"][0] * attrs["kernel"][1],
        evaluate=_pool_avg_eval,
        torch=_pool_torch("avg"),
        linear_in=(0,),
        jointly_linear=True,
        domains=frozenset({"float", "mod"}),
        same_rank=True,
        doc="Average pooling; padding counts as zeros (so it is linear).",
    )
)
register(
    OpSpec(
        name="pool_max",
        arity=1,
        attrs=_POOL_ATTRS,
        shape=_pool_shape("pool_max"),
        flops=lambda attrs, ins, outs: numel(outs[0]) * attrs["kernel"][0] * attrs["kernel"][1],
        terms=lambda attrs, ins: attrs["kernel"][0] * attrs["kernel"][1],
        evaluate=_pool_max_eval,
        torch=_pool_torch("max"),
        domains=NO_MOD,
        same_rank=True,
        doc="Max pooling; padding never wins.",
    )
)
