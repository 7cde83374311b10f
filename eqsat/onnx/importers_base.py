"""What every ONNX importer shares: the importer state (:class:`_Importer`: values, constants, weights),
attribute reading, new weights and the broadcasting helpers.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from eqsat.ir.graph import Node, input_, node, weight
from eqsat.onnx.common import Decline, OnnxError, _onnx


def _attrs(n: Any) -> dict[str, Any]:
    onnx = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}


def _in_proto(index: int, tensor: Any) -> None:
    """No initializer is mapped: every one's data is in the model."""
    return None


class _Importer:
    """``mapped(index, tensor)``: initializer ``index``'s data as an array over the mapped file
    (:meth:`eqsat.onnx.mapped.ModelFile.array`), or None when it is in the model."""

    def __init__(self, path: str, model: Any, batch: int, opset: int,
                 mapped: Callable[[int, Any], np.ndarray | None] = _in_proto):
        onnx = _onnx()
        self.path = path
        self.opset = opset
        self.values: dict[str, Node] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.weights: dict[str, np.ndarray] = {}
        g = model.graph
        for index, init in enumerate(g.initializer):
            try:
                arr = mapped(index, init)
                if arr is None:
                    arr = onnx.numpy_helper.to_array(init)
            except (ValueError, TypeError) as exc:  # data of another size than its dims (numpy names neither)
                raise OnnxError(f"{path}: initializer {init.name!r} holds data that does not fit its declared shape "
                                f"{tuple(init.dims)} ({' '.join(str(exc).split())})") from None
            self.consts[init.name] = arr
            if arr.dtype.kind == "f":  # kept in its own type: a 500 MB model is not copied to float64
                self.weights[init.name] = arr
                self.values[init.name] = weight(init.name, arr.shape)
        self.input_names = []
        for inp in g.input:
            if inp.name in self.consts:
                continue
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else batch
                    for d in inp.type.tensor_type.shape.dim]
            self.values[inp.name] = input_(inp.name, tuple(dims))
            self.input_names.append(inp.name)

    def where(self, n: Any) -> str:
        return f"{self.path}: node {n.name or '?'} ({n.op_type})"

    def value(self, n: Any, name: str) -> Node:
        if name not in self.values and name in self.consts:  # a constant the IR holds no data tensor for
            raise OnnxError(f"{self.where(n)}: input {name!r} is a {self.consts[name].dtype.name} constant this "
                            f"node reads as data, and the IR computes on float32, float16 and float64 data only; "
                            f"cast it in the file")
        if name not in self.values:
            raise OnnxError(f"{self.where(n)}: input {name!r} is neither a graph input, an initializer "
                            f"nor the output of another node")
        return self.values[name]

    def const(self, n: Any, name: str) -> np.ndarray:
        if name not in self.consts:
            raise Decline(f"input {name!r} is computed, not an initializer")
        return self.consts[name]


def _inputs(n: Any) -> list[str]:
    return [i for i in n.input if i]


def _new_weight(imp: _Importer, name: str, data: Any) -> Node:
    """A constant the import introduces (a reciprocal, an alpha, BN's scale and shift, a zero
    bias), as a weight with data (written back as an initializer)."""
    imp.weights[name] = data = np.asarray(data)
    return weight(name, data.shape)


def _vector_axis(x: tuple[int, ...], y: tuple[int, ...]) -> int | None:
    """The axis of ``x`` along which ``y`` broadcasts as a vector (ONNX's right-aligned
    broadcasting with exactly one size above 1, equal to ``x``'s), or None."""
    if len(y) > len(x) or not y:
        return None
    big = [k for k, d in enumerate(y) if d != 1]
    if len(big) != 1:
        return None
    axis = len(x) - len(y) + big[0]
    return axis if x[axis] == y[big[0]] else None


def _broadcast(imp: _Importer, n: Any, op: str, x: Node, y: Node) -> Node:
    """``x op y`` where ``y`` is a per-channel vector in broadcasting form: the vector op
    (``chadd``/``chmul``) on ``y`` reshaped to 1-D (a view)."""
    axis = _vector_axis(x.shape, y.shape)
    if axis is None:
        raise Decline(f"broadcasting {x.shape} with {y.shape}")
    vector = y if len(y.shape) == 1 else node("reshape", y, shape=(x.shape[axis],))
    return node(op, x, vector, axis=axis)


def _scalar(x: Node) -> Node:
    """A one-element operand as a 0-d tensor (a view; weight-only reshapes fold)."""
    return x if x.shape == () else node("reshape", x, shape=())


def _unary(op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    return lambda imp, n, a: [node(op, imp.value(n, n.input[0]))]


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's (and ONNX's) broadcast of ``shapes``, or a Decline naming them."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise Decline(f"shapes {', '.join(map(str, shapes))} do not broadcast") from None


def _expand_to(x: Node, shape: tuple[int, ...]) -> Node:
    """``x`` broadcast to ``shape`` as an ``expand`` node (``x`` itself when it has that shape): a
    constant folds, so rotary cos/sin become full-size weights."""
    return x if x.shape == shape else node("expand", x, shape=shape)
