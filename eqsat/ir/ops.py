"""The op table: every tensor op as one row of data.

Each :class:`OpSpec` gives an op's arity, attributes, shape rule, FLOP count,
elements moved, NumPy reference implementation, numeric domains and algebraic
properties. Everything else (graphs, evaluation, the cost model, the rule
reader, the rule generator, the e-graph sort) reads this table, so adding an op
is adding one :func:`register` call.

Layouts: activations are NCHW, conv kernels OIHW, matmul operands ``(..., m, k)``
and ``(..., k, n)``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eqsat.errors import UnknownOpError
from eqsat.ir import ops_conv, ops_convt, ops_index, ops_math, ops_norm, ops_tensor  # noqa: F401  (the rows register themselves)
from eqsat.ir.domains import Domain
from eqsat.ir.opspec import (
    ACT_NAMES,
    ACTIVATIONS,
    ALL_DOMAINS,
    FLOAT_ONLY,
    NO_MOD,
    OP_TABLE,
    Activation,
    Attrs,
    AttrSpec,
    OpSpec,
    Shape,
    conv_pads,
    get_op,
    numel,
    pad_array,
    register,
    unregister,
)

__all__ = ["ACT_NAMES", "ACTIVATIONS", "ALL_DOMAINS", "FLOAT_ONLY", "NO_MOD", "OP_TABLE", "Activation", "AttrSpec",
           "Attrs", "OpSpec", "Shape", "conv_pads", "get_op", "numel", "pad_array", "register", "set_opaque_runner",
           "unregister"]


# --------------------------------------------------------------------------- opaque
OpaqueRunner = Callable[[str, list, int, int], Any]
_OPAQUE_RUNNER: list[OpaqueRunner] = []


def set_opaque_runner(run: OpaqueRunner) -> None:
    """Inject what evaluates an opaque node (``run(node, inputs, index, opset)``): the ONNX package
    sets onnxruntime when it is imported, which it is before any opaque node can exist. The op
    table itself imports no runtime."""
    _OPAQUE_RUNNER[:] = [run]


def _opaque_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    """Run the stored node with the injected runner, the op's only reference."""
    if not _OPAQUE_RUNNER:
        raise UnknownOpError(f"opaque {attrs['op_type']} node: nothing can evaluate it (import eqsat.onnx)")
    out = _OPAQUE_RUNNER[0](attrs["node"], [np.asarray(x, dtype=np.float64) for x in xs], attrs["index"],
                            attrs["opset"])
    return np.asarray(out).astype(np.float64)


register(OpSpec(
    name="opaque", arity=None, min_arity=0,
    attrs=(AttrSpec("op_type", "name"), AttrSpec("node", "name"), AttrSpec("shape", "shape"),
           AttrSpec("index", "int", 0), AttrSpec("opset", "int")),  # the importer always sets the opset
    shape=lambda attrs, ins: (attrs["shape"],), evaluate=_opaque_eval, domains=FLOAT_ONLY,
    doc="Output `index` of an imported op the table does not know (the ONNX node, hex-encoded); a "
        "boundary for every rewrite, kept exactly; evaluated by onnxruntime. Outputs of one ONNX node "
        "are one opaque node each and are written back as that one node.",
))
