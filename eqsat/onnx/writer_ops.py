"""Writers of the op-table rows added for PyTorch's dynamo exporter (powers, HardSigmoid/HardSwish,
the tanh GELU, where, expand, reduce_mean, slice, gather, conv_transpose): rows the writer's
:data:`~eqsat.onnx.writer.EXPORTERS` table takes in. Each writes standard ONNX at the model's opset."""
from __future__ import annotations

from typing import Any

import numpy as np

from eqsat.ir.graph import Node

_POW_OPS = {0.5: "Sqrt", -1.0: "Reciprocal"}  # exponents with an ONNX op of their own


def _pow_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    if a["exponent"] in _POW_OPS:
        return w.node(_POW_OPS[a["exponent"]], ins)
    return w.node("Pow", ins + [w.init(a["exponent"])])


def _hardswish_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """HardSwish from opset 14; x * HardSigmoid(x) at opset 13."""
    if w.opset >= 14:
        return w.node("HardSwish", ins)
    return w.node("Mul", ins + w.node("HardSigmoid", ins, alpha=1.0 / 6.0, beta=0.5))


def _gelu_tanh_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """ONNX Gelu(approximate='tanh') from opset 20; before, its formula in standard ops."""
    if w.opset >= 20:
        return w.node("Gelu", ins, approximate="tanh")
    cube = w.node("Mul", w.node("Mul", ins + ins) + ins)
    inner = w.node("Add", ins + w.node("Mul", cube + [w.init(0.044715)]))
    t = w.node("Tanh", w.node("Mul", inner + [w.init(np.sqrt(2.0 / np.pi))]))
    return w.node("Mul", w.node("Mul", ins + [w.init(0.5)]) + w.node("Add", t + [w.init(1.0)]))


def _where_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """Where on the mask as booleans (onnxruntime folds the Cast of a constant mask once)."""
    mask = w.node("Cast", ins[:1], to=w.onnx.TensorProto.BOOL)
    return w.node("Where", mask + ins[1:])


def _reduce_mean_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """ReduceMean: axes as an input from opset 18, an attribute before."""
    if w.opset >= 18:
        return w.node("ReduceMean", ins + [w.ints(a["axes"])], keepdims=a["keepdims"])
    return w.node("ReduceMean", ins, axes=list(a["axes"]), keepdims=a["keepdims"])


def _slice_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    axes = list(range(len(a["starts"])))
    return w.node("Slice", ins + [w.ints(a["starts"]), w.ints(a["ends"]), w.ints(axes), w.ints(a["steps"])])


def _gather_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    idx = w.init(np.asarray(a["indices"], dtype=np.int64).reshape(a["index_shape"]), np.int64)
    return w.node("Gather", ins + [idx], axis=a["axis"])


def _conv_transpose_out(w: Any, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    return w.node("ConvTranspose", ins, strides=list(a["stride"]), pads=list(a["pads"]),
                  output_padding=list(a["output_padding"]), dilations=list(a["dilation"]), group=a["groups"])


EXPORTERS: dict[str, Any] = {
    "pow": _pow_out,
    "hardsigmoid": lambda w, n, ins, a: w.node("HardSigmoid", ins, alpha=a["alpha"], beta=a["beta"]),
    "hardswish": _hardswish_out,
    "gelu_tanh": _gelu_tanh_out,
    "where": _where_out,
    "expand": lambda w, n, ins, a: w.node("Expand", ins + [w.ints(a["shape"])]),
    "reduce_mean": _reduce_mean_out,
    "slice": _slice_out,
    "gather": _gather_out,
    "conv_transpose": _conv_transpose_out,
}
"""IR op -> writer of its ONNX nodes, for the rows above (same signature as the writer's own rows)."""
