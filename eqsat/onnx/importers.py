"""ONNX ops to op-table nodes, one importer per ONNX op type (the :data:`IMPORTERS` table; the
importers live in one module per op family).

An importer returns the IR nodes of its ONNX node's outputs, or raises :class:`Decline` with the
reason the node stays an opaque node (kept exactly, not optimized).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eqsat.ir.graph import Node, node
from eqsat.onnx.common import ACTIVATIONS
from eqsat.onnx.importers_base import _attrs, _Importer, _unary
from eqsat.onnx.importers_math import (
    _binary,
    _div,
    _fused_matmul,
    _gelu,
    _gemm,
    _hardsigmoid,
    _layernorm,
    _matmul,
    _negated,
    _pow,
    _power,
    _reduce_mean,
    _softmax,
    _sub,
    _where,
)
from eqsat.onnx.importers_nn import _batchnorm, _clip, _conv, _conv_transpose, _global_avg, _pool
from eqsat.onnx.importers_shape import (
    _expand,
    _flatten,
    _gather,
    _pad,
    _reshape,
    _slice,
    _split,
    _squeeze,
    _unsqueeze,
)

__all__ = ["IMPORTERS", "_Importer", "_attrs"]


IMPORTERS: dict[str, Callable[[_Importer, Any, dict[str, Any]], list[Node]]] = {
    "Conv": _conv,
    "FusedConv": _conv,
    "MatMul": _matmul,
    "Flatten": _flatten,
    "Gemm": _gemm,
    "FusedGemm": _gemm,
    "FusedMatMul": _fused_matmul,
    "Add": _binary("ewadd"),
    "Mul": _binary("ewmul"),
    "Sub": _sub,
    "Neg": lambda imp, n, a: [_negated(imp, n, imp.value(n, n.input[0]))],
    "Pow": _pow,
    "Sqrt": _power(0.5),
    "Reciprocal": _power(-1.0),
    "HardSigmoid": _hardsigmoid,
    "HardSwish": _unary("hardswish"),
    "Where": _where,
    "ReduceMean": _reduce_mean,
    "Slice": _slice,
    "ConvTranspose": _conv_transpose,
    **{form.op_type: _unary(act) for act, form in ACTIVATIONS.items() if not form.params},
    "Clip": _clip,
    "Softmax": _softmax,
    "LayerNormalization": _layernorm,
    "Erf": _unary("erf"),
    "Gelu": _gelu,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Gather": _gather,
    "Expand": _expand,
    "Div": _div,
    "Concat": lambda imp, n, a: [node("concat", *(imp.value(n, i) for i in n.input), axis=int(a["axis"]))],
    "Split": _split,
    "Reshape": _reshape,
    "Transpose": lambda imp, n, a: [
        node("transpose", imp.value(n, n.input[0]), perm=tuple(a["perm"]) if "perm" in a else None)
    ],
    "MaxPool": _pool("pool_max"),
    "AveragePool": _pool("pool_avg"),
    "GlobalAveragePool": _global_avg,
    "Identity": lambda imp, n, a: [imp.value(n, n.input[0])],
    "BatchNormalization": _batchnorm,
    "Pad": _pad,
}
