"""Op-table rows that pick elements at constant positions: a strided slice (ONNX Slice with constant
starts, ends, axes and steps, e.g. rotary embedding's halves) and a gather at constant indices.
Both are linear in their input and exact in every domain."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eqsat.errors import ShapeError
from eqsat.ir.domains import Domain
from eqsat.ir.opspec import Attrs, AttrSpec, OpSpec, Shape, device_constant, numel, register


def _slice_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), starts, ends, steps = ins, attrs["starts"], attrs["ends"], attrs["steps"]
    if not len(starts) == len(ends) == len(steps) == len(x):
        raise ShapeError(f"slice: starts {starts}, ends {ends} and steps {steps} need one entry per axis of {x}")
    out = []
    for k, (d, s, e, st) in enumerate(zip(x, starts, ends, steps)):
        if st < 1 or s < 0 or e > d or e <= s:
            raise ShapeError(f"slice: axis {k} of shape {x}: need 0 <= start {s} < end {e} <= {d} and step {st} >= 1")
        out.append((e - s + st - 1) // st)
    return (tuple(out),)


def _slice(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    return xs[0][tuple(slice(s, e, st) for s, e, st in zip(attrs["starts"], attrs["ends"], attrs["steps"]))]


register(OpSpec(
    name="slice", arity=1,
    attrs=(AttrSpec("starts", "ints"), AttrSpec("ends", "ints"), AttrSpec("steps", "ints")),
    shape=_slice_shape, evaluate=_slice, torch=lambda t, attrs, xs: _slice(attrs, xs, None),  # a view
    linear_in=(0,), jointly_linear=True, same_rank=True,
    doc="x[s0:e0:st0, s1:e1:st1, ...], one start, end and positive step per axis, 0 <= start < end <= size "
        "(ONNX Slice with constant inputs; the importer resolves negative and clamped bounds). A slice that "
        "cuts one axis with step 1 is imported as a split part instead (a view the rules know).",
))


def _gather_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), axis, indices, index_shape = ins, attrs["axis"], attrs["indices"], attrs["index_shape"]
    if not 0 <= axis < len(x):
        raise ShapeError(f"gather: axis {axis} out of range for shape {x}")
    if numel(index_shape) != len(indices) or any(not 0 <= i < x[axis] for i in indices):
        raise ShapeError(f"gather: indices {indices} must be {numel(index_shape)} values in [0, {x[axis]}) "
                         f"(axis {axis} of shape {x})")
    return (x[:axis] + tuple(index_shape) + x[axis + 1:],)


def _gather(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    idx = np.asarray(attrs["indices"], dtype=np.int64).reshape(attrs["index_shape"])
    return np.take(xs[0], idx, axis=attrs["axis"])


def _gather_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    x, axis, index_shape = xs[0], attrs["axis"], tuple(attrs["index_shape"])
    idx = device_constant(t, ("gather", attrs["indices"]), x.device, lambda: np.asarray(attrs["indices"], np.int64))
    return t.index_select(x, axis, idx).reshape(tuple(x.shape[:axis]) + index_shape + tuple(x.shape[axis + 1:]))


register(OpSpec(
    name="gather", arity=1,
    attrs=(AttrSpec("axis", "int"), AttrSpec("indices", "ints"), AttrSpec("index_shape", "shape")),
    shape=_gather_shape, evaluate=_gather, torch=_gather_torch, linear_in=(0,), jointly_linear=True,
    doc="x taken at constant ``indices`` (laid out as ``index_shape``) along ``axis`` (ONNX Gather with "
        "constant indices, normalized to [0, size)). Indices computed at run time are integer tensors, "
        "which the IR does not hold: such a Gather stays opaque.",
))
