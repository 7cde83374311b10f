"""Shared pieces of ONNX in and out: the opset range, the error type, the lazy import and
:class:`Imported` (a model read into the IR)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eqsat.errors import EqsatError
from eqsat.ir.graph import Graph

OPSET = 17  # written by export_graph; an imported model is written back at its own opset
MIN_OPSET = 13  # the importers follow opset 13+ (Split and Reshape take their sizes as inputs)


class OnnxError(EqsatError):
    """A model this tool cannot read or write, with the file and node named."""


class Decline(Exception):
    """An importer cannot express this node's attributes or operands; it becomes opaque (the
    reason is listed with the opaque ops)."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise OnnxError("ONNX support needs the optional extra: pip install 'eqsat-lab[onnx]'") from exc
    return onnx


@dataclass
class Imported:
    """A model read into the IR: the graph, initializer data, and the names to write it back with."""

    graph: Graph
    weights: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]
    ops: dict[str, int] = field(default_factory=dict)
    opaque: list[str] = field(default_factory=list)  # "op_type (node name: reason)" of every opaque node
    opset: int = OPSET
    elem_types: dict[str, int] = field(default_factory=dict)  # ONNX element type of each graph input and output
    external_data: bool = False  # its file keeps weights in data files of their own (a copy must carry them)



SKELETON_MAX_ELEMENTS = 4096  # initializers larger than this become typed graph inputs in a skeleton


def skeleton(model: Any) -> Any:
    """The model without its large initializers' data: each becomes a graph input of the same type
    and shape. ONNX's checker and shape inference serialize the whole model (for a model of
    hundreds of MB, seconds per call); on the skeleton they see every node, type and shape, and the small constants
    (reshape targets, axes) they read, without copying the weights."""
    onnx = _onnx()
    h = onnx.helper
    g = model.graph
    small, typed = [], []
    for init in g.initializer:
        if int(np.prod(init.dims)) <= SKELETON_MAX_ELEMENTS:
            small.append(init)
        else:
            typed.append(h.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    inits = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in inits] + typed
    graph = h.make_graph(list(g.node), g.name, inputs, list(g.output), small, value_info=list(g.value_info))
    out = h.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    del out.functions[:]
    out.functions.extend(model.functions)
    return out


def rename_subgraph_reads(n: Any, names: dict[str, str]) -> None:
    """Rename, in place, the values ``n``'s subgraphs (If, Loop, Scan bodies, at any depth) read
    from enclosing graphs: a node kept as is carries them as inputs of its own one-node graph."""
    for a in n.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            for m in g.node:
                renamed = [names.get(i, i) for i in m.input]
                del m.input[:]
                m.input.extend(renamed)
                rename_subgraph_reads(m, names)
            for o in g.output:
                o.name = names.get(o.name, o.name)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, length: int) -> bytes:
    """A length-delimited protobuf field's key and length."""
    return _varint(number << 3 | 2) + _varint(length)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class OnnxActivation:
    """How an op-table activation is written in ONNX: the op, and the constant operands it takes
    (which onnxruntime's fused kernels take as ``activation_params``)."""

    op_type: str
    params: tuple[float, ...] = ()


ACTIVATIONS: dict[str, OnnxActivation] = {
    "relu": OnnxActivation("Relu"),
    "sigmoid": OnnxActivation("Sigmoid"),
    "tanh": OnnxActivation("Tanh"),
    "relu6": OnnxActivation("Clip", (0.0, 6.0)),
}
"""Op-table activation -> its ONNX form; the writer and the importers of fused kernels read it."""
FUSED_DOMAIN = "com.microsoft"  # onnxruntime's contrib operators (FusedConv, FusedGemm, FusedMatMul)


def fused_activation(attrs: dict[str, Any]) -> str | None:
    """The op-table activation of an onnxruntime fused kernel's ``activation``/``activation_params``
    attributes ("none" without one), or None when the table has no such activation."""
    name = attrs.get("activation", b"")
    name = name.decode() if isinstance(name, bytes) else str(name)
    if not name:
        return "none"
    params = tuple(float(v) for v in attrs.get("activation_params", ()))
    return next((act for act, form in ACTIVATIONS.items() if (form.op_type, form.params) == (name, params)), None)


def fold_elements(consts: Mapping[str, Any], n: Any, shapes: Mapping[str, Any], cap: int) -> int:
    """An upper estimate of the elements folding ``n`` makes, from its constant inputs' values for
    the ops whose size they set (ConstantOfShape, Expand, Tile, Range), else from shape inference,
    else the largest input."""
    ins = [np.asarray(consts[i]) if i else np.zeros(0) for i in n.input]
    try:
        if n.op_type == "ConstantOfShape" and ins:
            return math.prod(int(d) for d in ins[0].reshape(-1))
        if n.op_type == "Expand" and len(ins) == 2:
            dims = [int(d) for d in ins[1].reshape(-1)]
            rank = max(len(dims), ins[0].ndim)
            a = (1,) * (rank - ins[0].ndim) + ins[0].shape
            b = (1,) * (rank - len(dims)) + tuple(dims)
            return math.prod(max(x, y) for x, y in zip(a, b))
        if n.op_type == "Tile" and len(ins) == 2:
            return ins[0].size * math.prod(int(r) for r in ins[1].reshape(-1))
        if n.op_type == "Range" and len(ins) == 3:
            start, limit, delta = (float(x.reshape(-1)[0]) for x in ins)
            return max(0, math.ceil((limit - start) / delta)) if delta else 0
    except (ValueError, OverflowError, IndexError):
        return cap + 1  # sizes that do not even convert: never fold them
    known = [shapes.get(o) for o in n.output if o]
    if known and all(k is not None and all(isinstance(d, int) for d in k) for k in known):  # None: an unknown dim
        return max(math.prod(k) for k in known)  # type: ignore[arg-type]
    return max((x.size for x in ins), default=0)
