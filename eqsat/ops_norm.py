"""Op-table rows for normalizations: softmax (attention's, along one axis)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .domains import Domain
from .errors import ShapeError
from .opspec import FLOAT_ONLY, Attrs, AttrSpec, OpSpec, Shape, numel, register


def _softmax_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    rank, axis = len(ins[0]), attrs["axis"]
    if not -rank <= axis < rank:
        raise ShapeError(f"softmax: axis {axis} is out of range for an input of rank {rank}")
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
    doc="exp(x) / sum(exp(x)) along ``axis`` (ONNX Softmax, opset 13 and later).",
))
