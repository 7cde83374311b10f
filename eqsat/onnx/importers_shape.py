"""Importers of layout ops: Flatten, Pad, Reshape, Split, Squeeze/Unsqueeze, Gather, Expand.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from eqsat.ir.graph import Node, node
from eqsat.onnx.common import Decline
from eqsat.onnx.importers_base import _Importer, _inputs


def _flatten(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    axis = int(a.get("axis", 1))
    axis += len(x.shape) if axis < 0 else 0  # ONNX: axis in [-rank, rank], a negative one counts from the end
    return [node("reshape", x, shape=(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))))]


def _pad(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    mode = a.get("mode", b"constant")
    inputs = _inputs(n)
    if mode not in (b"constant", "constant") or len(inputs) > 3:
        raise Decline(f"mode {mode!r} or axes")
    if len(inputs) > 2 and np.any(imp.const(n, n.input[2]) != 0):
        raise Decline("a non-zero constant value")
    return [node("pad", imp.value(n, n.input[0]), pads=tuple(int(v) for v in imp.const(n, n.input[1])))]


def _reshape(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    shape = [int(v) for v in imp.const(n, n.input[1])]
    shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    if -1 in shape:
        known = int(np.prod([v for v in shape if v != -1]))
        shape[shape.index(-1)] = int(np.prod(x.shape)) // known
    return [node("reshape", x, shape=tuple(shape))]


def _split(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Split with constant sizes (an input from opset 13), or into ``len(outputs)`` parts: equal ones,
    the last smaller when they do not divide (``num_outputs``, opset 18)."""
    x = imp.value(n, n.input[0])
    axis = int(a.get("axis", 0)) % len(x.shape)
    if len(n.input) > 1 and n.input[1]:
        sizes = tuple(int(v) for v in imp.const(n, n.input[1]))
    else:
        k, size = len(n.output), x.shape[axis]
        part = -(-size // k)
        sizes = (part,) * (k - 1) + (size - part * (k - 1),)
    sp = node("split", x, axis=axis, sizes=sizes)
    return [node("proj", sp, index=i) for i in range(len(sizes))]


def _raw_axes(imp: _Importer, n: Any, a: dict[str, Any]) -> list[int] | None:
    """Unsqueeze/Squeeze axes: a constant input from opset 13, an attribute before."""
    raw = imp.const(n, n.input[1]) if len(_inputs(n)) > 1 else a.get("axes")
    return None if raw is None else [int(v) for v in np.asarray(raw).reshape(-1)]


def _unsqueeze(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    raw = _raw_axes(imp, n, a) or []
    rank = len(x.shape) + len(raw)
    shape = list(x.shape)
    for ax in sorted(v % rank for v in raw):
        shape.insert(ax, 1)
    return [node("reshape", x, shape=tuple(shape))]


def _squeeze(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    raw = _raw_axes(imp, n, a)
    rank = max(len(x.shape), 1)
    drop = {v % rank for v in raw} if raw is not None else {k for k, d in enumerate(x.shape) if d == 1}
    if any(x.shape[k] != 1 for k in drop):
        raise Decline(f"squeezing an axis of size > 1 in {x.shape}")
    return [node("reshape", x, shape=tuple(d for k, d in enumerate(x.shape) if k not in drop))]


def _part(x: Node, axis: int, start: int, count: int) -> Node:
    """``x``'s ``count`` entries from ``start`` along ``axis``, as a split part (a view the rules know)."""
    size = x.shape[axis]
    sizes = tuple(s for s in (start, count, size - start - count) if s)
    return x if sizes == (size,) else node("proj", node("split", x, axis=axis, sizes=sizes), index=int(start > 0))


def _gather(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Gather of an activation at constant indices. One contiguous run (how exporters unpack a
    packed QKV projection, ``proj[0], proj[1], proj[2]``) is a split part, reshaped to drop the
    axis for a scalar index; other constant indices are a ``gather`` row. Indices computed at run
    time (token ids into an embedding table) decline: they are an integer tensor, and the IR's
    values are real numbers drawn at random by its checks."""
    x = imp.value(n, n.input[0])
    if not x.shape:
        raise Decline("gathering from a scalar")
    if n.input[1] not in imp.consts:
        raise Decline("indices computed at run time (an integer tensor; the IR holds real-valued tensors)")
    axis = int(a.get("axis", 0)) % len(x.shape)
    idx = np.asarray(imp.const(n, n.input[1]))
    size = x.shape[axis]
    if idx.size == 0 or np.any(idx < -size) or np.any(idx >= size):
        raise Decline(f"indices out of range [-{size}, {size}) or empty")
    flat = [int(v) % size for v in idx.reshape(-1)]
    if idx.ndim <= 1 and flat == list(range(flat[0], flat[0] + len(flat))):
        part = _part(x, axis, flat[0], len(flat))
        if idx.ndim == 0:
            part = node("reshape", part, shape=x.shape[:axis] + x.shape[axis + 1:])
        return [part]
    return [node("gather", x, axis=axis, indices=tuple(flat), index_shape=tuple(int(d) for d in idx.shape))]


def _slice(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Slice with constant starts, ends, axes and steps (inputs from opset 10): bounds resolved as
    numpy does (negative from the end, clamped). Cutting one axis with step 1 is a split part;
    anything else a ``slice`` row. Negative steps (a flip) and empty results decline."""
    x = imp.value(n, n.input[0])
    ins = list(n.input) + [""] * (5 - len(n.input))
    starts, ends = ([int(v) for v in np.asarray(imp.const(n, ins[k])).reshape(-1)] for k in (1, 2))
    axes = [int(v) % len(x.shape) for v in np.asarray(imp.const(n, ins[3])).reshape(-1)] if ins[3] else \
        list(range(len(starts)))
    steps = [int(v) for v in np.asarray(imp.const(n, ins[4])).reshape(-1)] if ins[4] else [1] * len(starts)
    lo, hi, st = [0] * len(x.shape), list(x.shape), [1] * len(x.shape)
    for ax, s, e, step in zip(axes, starts, ends, steps):
        if step < 1:
            raise Decline(f"step {step} (only positive steps are mapped)")
        lo[ax], hi[ax], st[ax] = slice(s, e, step).indices(x.shape[ax])
        if hi[ax] <= lo[ax]:
            raise Decline(f"an empty slice of axis {ax}")
    cut = [k for k in range(len(x.shape)) if (lo[k], hi[k], st[k]) != (0, x.shape[k], 1)]
    if not cut:
        return [x]
    if len(cut) == 1 and st[cut[0]] == 1:
        return [_part(x, cut[0], lo[cut[0]], hi[cut[0]] - lo[cut[0]])]
    return [node("slice", x, starts=tuple(lo), ends=tuple(hi), steps=tuple(st))]


def _expand(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Expand to a shape the input already has (exporters' broadcast guards): nothing."""
    x = imp.value(n, n.input[0])
    target = [int(v) for v in imp.const(n, n.input[1])]
    rank = max(len(x.shape), len(target))
    padded_x, padded_t = (1,) * (rank - len(x.shape)) + x.shape, [1] * (rank - len(target)) + target
    out = tuple(max(d, t) if d == 1 or t == 1 else d for d, t in zip(padded_x, padded_t))
    if out != x.shape:
        raise Decline(f"a real broadcast of {x.shape} to {tuple(target)}")
    return [x]
