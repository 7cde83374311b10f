"""Op-table rows for normalizations and transformer nonlinearities: softmax along one axis, layer
normalization over the trailing axes, erf and the exact GELU (what PyTorch's exporters emit for
attention blocks)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eqsat.errors import ShapeError
from eqsat.ir.domains import Domain
from eqsat.ir.opspec import FLOAT_ONLY, Attrs, AttrSpec, OpSpec, Shape, numel, register, register_elementwise


def _axis(op: str, attrs: Attrs, x: Shape) -> int:
    rank, axis = len(x), attrs["axis"]
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


def _softmax_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    _axis("softmax", attrs, ins[0])
    return (ins[0],)


def _softmax(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    x = np.asarray(xs[0], dtype=np.float64)
    shifted = np.exp(x - np.max(x, axis=attrs["axis"], keepdims=True))  # stable: the largest term is 1
    return shifted / np.sum(shifted, axis=attrs["axis"], keepdims=True)


register(OpSpec(
    name="softmax", arity=1, attrs=(AttrSpec("axis", "int", -1),),
    shape=_softmax_shape,
    flops=lambda attrs, ins, outs: 5 * numel(outs[0]),  # max, subtract, exp, sum, divide
    evaluate=_softmax, domains=FLOAT_ONLY, same_rank=True,
    torch=lambda t, attrs, xs: t.softmax(xs[0], dim=attrs["axis"]),
    doc="exp(x) / sum(exp(x)) along ``axis`` (ONNX Softmax, opset 13 and later).",
))


def _layernorm_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    x, scale, bias = ins
    tail = x[_axis("layernorm", attrs, x):]
    for k, s in ((1, scale), (2, bias)):
        if s != tail:
            raise ShapeError(f"layernorm: input {k} has shape {s}; it must be the normalized axes' shape {tail}")
    return (x,)


def _layernorm(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    x = np.asarray(xs[0], dtype=np.float64)
    axes = tuple(range(attrs["axis"] % x.ndim, x.ndim))
    centred = x - x.mean(axis=axes, keepdims=True)
    var = (centred * centred).mean(axis=axes, keepdims=True)
    return centred / np.sqrt(var + attrs["epsilon"]) * xs[1] + xs[2]


register(OpSpec(
    name="layernorm", arity=3, attrs=(AttrSpec("axis", "int", -1), AttrSpec("epsilon", "float", 1e-5)),
    shape=_layernorm_shape,
    flops=lambda attrs, ins, outs: 8 * numel(outs[0]),  # mean, centre, square, mean, rsqrt, scale, shift
    evaluate=_layernorm, domains=FLOAT_ONLY,
    torch=lambda t, attrs, xs: t.nn.functional.layer_norm(
        xs[0], tuple(xs[0].shape[attrs["axis"] % xs[0].ndim:]), xs[1], xs[2], attrs["epsilon"]),
    doc="Layer normalization over the axes from ``axis`` on, times a scale plus a bias "
        "(ONNX LayerNormalization, opset 17).",
))


def _erf(x: Any) -> Any:
    from scipy.special import erf

    return erf(np.asarray(x, dtype=np.float64))


register_elementwise("erf", 1, _erf, FLOAT_ONLY, torch_fn=lambda t, x: t.erf(x),
                     doc="The error function (ONNX Erf); exporters write GELU with it.")
register_elementwise(
    "gelu", 1, lambda x: 0.5 * x * (1.0 + _erf(np.asarray(x, dtype=np.float64) / np.sqrt(2.0))), FLOAT_ONLY,
    flops_per_element=8, torch_fn=lambda t, x: t.nn.functional.gelu(x),
    doc="The exact GELU, x * (1 + erf(x / sqrt 2)) / 2 (ONNX Gelu, opset 20; onnxruntime's Gelu).",
)
