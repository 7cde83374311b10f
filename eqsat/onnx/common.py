"""Shared pieces of ONNX in and out: the opset range, the error type, the lazy import and
:class:`Imported` (a model read into the IR)."""
from __future__ import annotations

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


def _subgraphs(n: Any) -> list[Any]:
    """The bodies of an If, Loop or Scan node (any graph-valued attribute)."""
    return [g for a in n.attribute for g in ([a.g] if a.HasField("g") else []) + list(a.graphs)]


def outer_names(n: Any) -> list[str]:
    """The outer-scope tensors ``n``'s bodies read (If branches, Loop and Scan bodies): inputs of
    the node in all but name, which an importer must count as its dependencies."""
    defined: set[str] = set()
    used: list[str] = []
    bodies = _subgraphs(n)
    while bodies:  # iterative: bodies nest
        g = bodies.pop()
        defined.update(v.name for v in g.input)
        defined.update(t.name for t in g.initializer)
        for inner in g.node:
            defined.update(inner.output)
            used.extend(i for i in inner.input if i)
            bodies.extend(_subgraphs(inner))
        used.extend(o.name for o in g.output)
    return list(dict.fromkeys(u for u in used if u not in defined))


def rename_outer(n: Any, names: dict[str, str]) -> None:
    """Rename, in place, the outer-scope tensors ``n``'s bodies read (ONNX names never shadow an
    outer scope's, so every use of such a name is that tensor)."""
    bodies = _subgraphs(n)
    while bodies:
        g = bodies.pop()
        for inner in g.node:
            for k, i in enumerate(inner.input):
                if i in names:
                    inner.input[k] = names[i]
            bodies.extend(_subgraphs(inner))
        for o in g.output:
            if o.name in names:
                o.name = names[o.name]
