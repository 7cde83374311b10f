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
from eqsat.ir.opaque_torch import TORCH_OPAQUE
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
    TorchRule,
    conv_pads,
    device_constant,
    get_op,
    numel,
    pad_array,
    register,
    unregister,
)

__all__ = ["ACT_NAMES", "ACTIVATIONS", "ALL_DOMAINS", "FLOAT_ONLY", "NO_MOD", "OP_TABLE", "TORCH_OPAQUE_OPS",
           "Activation", "AttrSpec", "Attrs", "OpSpec", "Shape", "TorchRule", "conv_pads", "device_constant", "get_op",
           "numel", "opaque_in_torch", "pad_array", "register", "set_opaque_runner", "unregister"]


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


TORCH_OPAQUE_OPS = frozenset(TORCH_OPAQUE)
"""ONNX op types an opaque node may run in PyTorch itself (:mod:`eqsat.ir.opaque_torch`: GPT-2's
token ``Gather``, BERT's ``GatherElements``, MobileViT's bilinear ``Resize``); any other, or one of
these in a form PyTorch does not compute as onnxruntime does, runs through the opaque runner on the
host (onnxruntime, in numpy on the CPU): correct, but a host sync, so such a graph cannot be
captured in a CUDA graph."""

_PLANS: dict[str, tuple[str, dict[str, Any], tuple[Any, ...]]] = {}


def _opaque_plan(graph_hex: str) -> tuple[str, dict[str, Any], tuple[Any, ...]]:
    """The stored node's op type, attributes and inputs (``int`` k: the node's k-th tensor input;
    an array: a constant stored in the node), parsed once per node (a dict, not a cache decorator,
    so a tracer reads it as data)."""
    found = _PLANS.get(graph_hex)
    if found is None:
        import onnx  # only here: the op table imports no ONNX

        graph = onnx.GraphProto()
        graph.ParseFromString(bytes.fromhex(graph_hex))
        n = graph.node[0]
        consts = {c.name: onnx.numpy_helper.to_array(c) for c in graph.initializer}
        slots = tuple(int(name[2:]) if name.startswith("in") else consts.get(name) for name in n.input)
        found = _PLANS[graph_hex] = (n.op_type, {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute},
                                     slots)
    return found


def opaque_in_torch(attrs: Attrs) -> bool:
    """Whether an opaque node (its attributes) runs in PyTorch itself, not on the host."""
    op_type, node_attrs, slots = _opaque_plan(attrs["node"])
    found = TORCH_OPAQUE.get(op_type)
    return found is not None and attrs["index"] == 0 and found.accepts(node_attrs, slots, attrs["opset"])


def _opaque_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    """The stored node in PyTorch where :data:`TORCH_OPAQUE_OPS` computes it, else through the opaque runner."""
    op_type, node_attrs, slots = _opaque_plan(attrs["node"])
    if xs and opaque_in_torch(attrs):
        like = xs[0]
        values = [None if s is None else xs[s] if isinstance(s, int) else
                  device_constant(t, ("opaque", attrs["node"], k), like.device, lambda s=s: s)
                  for k, s in enumerate(slots)]
        out = TORCH_OPAQUE[op_type].run(t, node_attrs, values, slots, tuple(attrs["shape"]))
        return out if out.dtype == like.dtype else out.to(like.dtype)  # integer data read as the IR's reals
    like = xs[0] if xs else t.empty(0)
    out = _opaque_eval(attrs, [x.detach().to("cpu", t.float64).numpy() for x in xs], None)  # a host sync
    return t.as_tensor(out).to(device=like.device, dtype=like.dtype if like.is_floating_point() else t.float32)


register(OpSpec(
    name="opaque", arity=None, min_arity=0,
    attrs=(AttrSpec("op_type", "name"), AttrSpec("node", "name"), AttrSpec("shape", "shape"),
           AttrSpec("index", "int", 0), AttrSpec("opset", "int")),  # the importer always sets the opset
    shape=lambda attrs, ins: (attrs["shape"],), evaluate=_opaque_eval, torch=_opaque_torch, domains=FLOAT_ONLY,
    doc="Output `index` of an imported op the table does not know (the ONNX node, hex-encoded); a "
        "boundary for every rewrite, kept exactly; evaluated by onnxruntime (in PyTorch: those of "
        "eqsat.ir.opaque_torch itself, the rest through onnxruntime on the host). Outputs of one ONNX node "
        "are one opaque node each and are written back as that one node.",
))
