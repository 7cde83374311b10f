"""Op-table rows for the elementwise math, selects and reductions PyTorch's dynamo exporter emits
(opset 18-20): a power with a constant exponent (ONNX Pow, and Sqrt and Reciprocal as its 0.5 and
-1), HardSigmoid and HardSwish (MobileNetV3), the tanh GELU (GPT-2), a select with a mask (masked
and causal attention), broadcasting to a shape (rotary cos/sin against every head) and the mean
over axes (RMSNorm)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eqsat.errors import ShapeError
from eqsat.ir.domains import Domain
from eqsat.ir.opspec import (
    FLOAT_ONLY,
    NO_MOD,
    Attrs,
    AttrSpec,
    OpSpec,
    Shape,
    numel,
    register,
    register_elementwise,
)


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _unary_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    return (ins[0],)


def _pow(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    with np.errstate(all="ignore"):  # 0 ** -1 is inf and (-1) ** 0.5 NaN, as in onnxruntime
        return np.power(_f64(xs[0]), attrs["exponent"])


register(OpSpec(
    name="pow", arity=1, attrs=(AttrSpec("exponent", "float"),), shape=_unary_shape,
    flops=lambda attrs, ins, outs: numel(outs[0]), evaluate=_pow, elementwise=True, domains=FLOAT_ONLY,
    torch=lambda t, attrs, xs: t.pow(xs[0], attrs["exponent"]),
    same_rank=True,
    doc="x ** exponent with a constant exponent (ONNX Pow; Sqrt is 0.5, Reciprocal -1). The importer "
        "writes x ** 2 as x * x, which is exact in every domain.",
))


def _hardsigmoid(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    return np.clip(attrs["alpha"] * _f64(xs[0]) + attrs["beta"], 0.0, 1.0)


register(OpSpec(
    name="hardsigmoid", arity=1, attrs=(AttrSpec("alpha", "float", 0.2), AttrSpec("beta", "float", 0.5)),
    shape=_unary_shape, flops=lambda attrs, ins, outs: 3 * numel(outs[0]), evaluate=_hardsigmoid,
    torch=lambda t, attrs, xs: t.clamp(xs[0] * attrs["alpha"] + attrs["beta"], 0.0, 1.0),
    elementwise=True, domains=FLOAT_ONLY, same_rank=True,
    doc="max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid; PyTorch's hardsigmoid is alpha 1/6).",
))
register_elementwise(
    "hardswish", 1, lambda x: _f64(x) * np.clip(_f64(x) / 6.0 + 0.5, 0.0, 1.0), FLOAT_ONLY, flops_per_element=4,
    torch_fn=lambda t, x: t.nn.functional.hardswish(x),
    doc="x * hardsigmoid(x) with alpha 1/6, beta 1/2 (ONNX HardSwish, opset 14; MobileNetV3).",
)
_TANH_C = float(np.sqrt(2.0 / np.pi))
register_elementwise(
    "gelu_tanh", 1, lambda x: 0.5 * _f64(x) * (1.0 + np.tanh(_TANH_C * (_f64(x) + 0.044715 * _f64(x) ** 3))),
    FLOAT_ONLY, flops_per_element=10, torch_fn=lambda t, x: t.nn.functional.gelu(x, approximate="tanh"),
    doc="GELU's tanh approximation (ONNX Gelu approximate='tanh', opset 20; GPT-2's gelu_new).",
)


def _where_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    mask, x, y = ins
    for k, s in ((0, mask), (2, y)):
        if len(s) != len(x) or any(a != b and a != 1 for a, b in zip(s, x)):
            raise ShapeError(f"where: input {k} has shape {s}; it must have input 1's rank and broadcast to its "
                             f"shape {x} (sizes equal or 1)")
    return (x,)


def _where(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    mask, x, y = xs
    return np.where(np.asarray(mask != 0, dtype=bool), x, y)


register(OpSpec(
    name="where", arity=3, attrs=(), shape=_where_shape, flops=lambda attrs, ins, outs: numel(outs[0]),
    evaluate=_where, domains=NO_MOD, same_rank=True,
    torch=lambda t, attrs, xs: t.where(xs[0] != 0, xs[1], xs[2]),
    doc="mask != 0 ? x : y (ONNX Where with a mask that is a constant, given as 0/1 reals; masked and "
        "causal attention). The output has x's shape; the mask and y broadcast to it (sizes equal or 1), "
        "so a (1, 1, S, S) causal mask is not copied for every head. A select is not a polynomial: no "
        "modular form.",
))


def _expand_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), target = ins, attrs["shape"]
    lead = len(target) - len(x)
    if lead < 0 or any(d != t and d != 1 for d, t in zip(x, target[lead:])):
        raise ShapeError(f"expand: shape {x} does not broadcast to {target}")
    return (target,)


register(OpSpec(
    name="expand", arity=1, attrs=(AttrSpec("shape", "shape"),), shape=_expand_shape,
    evaluate=lambda attrs, xs, domain: np.broadcast_to(xs[0], attrs["shape"]),
    torch=lambda t, attrs, xs: xs[0].expand(attrs["shape"]),  # a view, as numpy's
    linear_in=(0,), jointly_linear=True,
    doc="Broadcast to ``shape`` (numpy's rules; ONNX Expand): how the importer gives elementwise ops "
        "equal shapes, e.g. rotary cos/sin (1, 1, S, D) against (B, H, S, D). On a constant it folds "
        "into the constant; on an activation it is a real copy.",
))


def _axes_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    if ins:
        rank = max(len(ins[0]), 1)
        values["axes"] = tuple(sorted({a % rank for a in values["axes"]}))
    return values


def _reduce_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), axes = ins, attrs["axes"]
    if not axes or any(not 0 <= a < len(x) for a in axes):
        raise ShapeError(f"reduce_mean: axes {axes} must be a non-empty list of axes of shape {x}")
    if attrs["keepdims"]:
        return (tuple(1 if k in axes else d for k, d in enumerate(x)),)
    return (tuple(d for k, d in enumerate(x) if k not in axes),)


def _reduce_count(attrs: Attrs, ins: Sequence[Shape]) -> int:
    return numel(tuple(ins[0][a] for a in attrs["axes"]))


def _reduce_mean(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    x, axes = xs[0], attrs["axes"]
    total = np.sum(x, axis=axes, keepdims=bool(attrs["keepdims"]))
    count = _reduce_count(attrs, (x.shape,))
    if domain.modulus is not None:
        return domain.reduce(np.asarray(total) * pow(count, -1, domain.modulus))
    return total / count


register(OpSpec(
    name="reduce_mean", arity=1, attrs=(AttrSpec("axes", "ints"), AttrSpec("keepdims", "int", 1)),
    shape=_reduce_shape, normalize=_axes_normalize, evaluate=_reduce_mean,
    torch=lambda t, attrs, xs: t.mean(xs[0], dim=attrs["axes"], keepdim=bool(attrs["keepdims"])),
    flops=lambda attrs, ins, outs: numel(ins[0]), terms=_reduce_count,
    linear_in=(0,), jointly_linear=True, domains=frozenset({"float", "mod"}),
    doc="The mean over ``axes`` (ONNX ReduceMean; its axes are an input from opset 18): RMSNorm's mean of "
        "squares over the last axis. Exact modulo a prime (the count's inverse), not in the integers. The "
        "importer writes a mean over H and W of an NCHW tensor as pool_avg, which the conv rules know.",
))
