"""ONNX models in and out of the IR (the ``onnx`` extra; ``onnxruntime`` checks the results).

:func:`load` reads a model (opset 13 or newer) into a :class:`Graph` plus the initializer data:
inputs become ``input`` leaves (a dynamic batch dimension takes ``batch``), float initializers
become ``weight`` leaves, and nodes are mapped through :data:`IMPORTERS`, one entry per ONNX op.
Node order in the file does not matter (nodes are sorted by their data dependences). A Conv bias
is conv2d's optional third input; an Add or Mul of a per-channel vector (ONNX broadcasting, e.g.
``(1, C, 1, 1)``) is ``chadd``/``chmul``; inference BatchNormalization is one ``affine`` node
(scale and shift computed from its four statistics). Folding these into convolutions is done by
the rules in ``rules/epilogue.rules``, not here. An op without an importer, or a node its importer
declines (training-mode BatchNormalization, general broadcasting, ...), becomes ``opaque``
nodes, one per output: the ONNX node itself, shapes from ONNX shape inference (or from running
it), kept exactly and evaluated by onnxruntime; no rule matches it, so the optimizer works
around it, and the reason is listed. :func:`save` writes a graph back at the model's opset,
folding weight-only subgraphs into initializers computed from the imported data; the file is
written whole or not at all and passes ``onnx.checker``. :func:`export_graph` writes a graph
built in Python with given or random weights. :func:`max_difference` runs two models in
onnxruntime on the same random inputs.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import networkx as nx
import numpy as np

from .errors import EqsatError
from .evaluate import evaluate_nodes
from .graph import Graph, Node, input_, node, weight
from .ops import conv_pads

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


def _attrs(n: Any) -> dict[str, Any]:
    onnx = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}


class _Importer:
    def __init__(self, path: str, model: Any, batch: int, opset: int):
        onnx = _onnx()
        self.path = path
        self.opset = opset
        self.values: dict[str, Node] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.weights: dict[str, np.ndarray] = {}
        g = model.graph
        for init in g.initializer:
            arr = onnx.numpy_helper.to_array(init)
            self.consts[init.name] = arr
            if arr.dtype.kind == "f":
                self.weights[init.name] = arr.astype(np.float64)
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
        if name not in self.values:
            raise OnnxError(f"{self.where(n)}: input {name!r} is neither a graph input, an initializer "
                            f"nor the output of another node")
        return self.values[name]

    def const(self, n: Any, name: str) -> np.ndarray:
        if name not in self.consts:
            raise Decline(f"input {name!r} is computed, not an initializer")
        return self.consts[name]


def _pads(imp: _Importer, n: Any, a: dict[str, Any]) -> tuple[int, int, int, int]:
    """ONNX's 2-D pads: (top, left, bottom, right)."""
    pads = tuple(int(p) for p in a.get("pads", [0, 0, 0, 0]))
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise Decline("auto_pad")
    if len(pads) != 4:
        raise Decline(f"non-2-D pads {list(pads)}")
    return pads  # type: ignore[return-value]


def _canonical_pad(pads: tuple[int, int, int, int], x: tuple[int, ...], kernel: tuple[int, ...],
                   stride: tuple[int, ...], dilation: tuple[int, ...]) -> Any:
    """``"same"`` when the pads are exactly SAME padding (the rule files' form; with a stride it
    may put one more row or column after than before), the symmetric pads, or a Decline."""
    same = all(conv_pads("same", size, k, st, d)[:2] == (before, after)
               for before, after, size, k, st, d in zip(pads[:2], pads[2:], x[2:], kernel, stride, dilation))
    if same:
        return "same"
    if pads[:2] != pads[2:]:
        raise Decline(f"asymmetric pads {list(pads)} that are not SAME padding")
    return pads[:2]


def _inputs(n: Any) -> list[str]:
    return [i for i in n.input if i]


def _conv(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    if len(imp.value(n, n.input[0]).shape) != 4:
        raise Decline("only 2-D convolutions are mapped")
    x, w = imp.value(n, n.input[0]), imp.value(n, n.input[1])
    bias = [imp.value(n, n.input[2])] if len(_inputs(n)) > 2 else []
    stride, dilation = tuple(a.get("strides", [1, 1])), tuple(a.get("dilations", [1, 1]))
    pad = _canonical_pad(_pads(imp, n, a), x.shape, w.shape[2:], stride, dilation)
    return [node("conv2d", x, w, *bias, stride=stride, pad=pad, dilation=dilation, groups=int(a.get("group", 1)))]


def _gemm(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    if a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0 or a.get("transA", 0):
        raise Decline("alpha, beta or transA")
    b = imp.value(n, n.input[1])
    if a.get("transB", 0):
        b = node("transpose", b, perm=(1, 0))
    y = node("matmul", imp.value(n, n.input[0]), b)
    if len(_inputs(n)) > 2:
        return [_broadcast(imp, n, "chadd", y, imp.value(n, n.input[2]))]
    return [y]


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


def _binary(op: str, vector_op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    def f(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
        x, y = imp.value(n, n.input[0]), imp.value(n, n.input[1])
        if x.shape == y.shape:
            return [node(op, x, y)]
        if _vector_axis(y.shape, x.shape) is not None and _vector_axis(x.shape, y.shape) is None:
            x, y = y, x  # both ops commute
        return [_broadcast(imp, n, vector_op, x, y)]
    return f


def _pad(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    mode = a.get("mode", b"constant")
    inputs = _inputs(n)
    if mode not in (b"constant", "constant") or len(inputs) > 3:
        raise Decline(f"mode {mode!r} or axes")
    if len(inputs) > 2 and np.any(imp.const(n, n.input[2]) != 0):
        raise Decline("a non-zero constant value")
    return [node("pad", imp.value(n, n.input[0]), pads=tuple(int(v) for v in imp.const(n, n.input[1])))]


def _batchnorm(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Inference BatchNormalization as one ``affine`` node: scale = gamma / sqrt(var + eps) and
    shift = beta - mean * scale become weights (the op's two-parameter form). Folding into a
    preceding conv is left to the rules. Training mode (batch statistics) is never mapped."""
    if a.get("training_mode", 0) or len(n.output) > 1:
        raise Decline("training mode")
    x = imp.value(n, n.input[0])
    try:
        gamma, beta, mean, var = (imp.consts[i].astype(np.float64) for i in n.input[1:5])
    except KeyError:
        raise Decline("statistics are not initializers") from None
    scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
    shift = beta - mean * scale
    base = n.name or n.output[0]
    leaves = []
    for suffix, data in (("scale", scale), ("shift", shift)):
        name = f"{base}.bn_{suffix}"
        imp.weights[name] = data
        leaves.append(weight(name, data.shape))
    return [node("affine", x, *leaves, axis=1)]


def _unary(op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    return lambda imp, n, a: [node(op, imp.value(n, n.input[0]))]


def _reshape(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    shape = [int(v) for v in imp.const(n, n.input[1])]
    shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    if -1 in shape:
        known = int(np.prod([v for v in shape if v != -1]))
        shape[shape.index(-1)] = int(np.prod(x.shape)) // known
    return [node("reshape", x, shape=tuple(shape))]


def _split(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    axis = int(a.get("axis", 0)) % len(x.shape)
    if len(n.input) > 1 and n.input[1]:
        sizes = tuple(int(v) for v in imp.const(n, n.input[1]))
    else:
        sizes = (x.shape[axis] // len(n.output),) * len(n.output)
    sp = node("split", x, axis=axis, sizes=sizes)
    return [node("proj", sp, index=i) for i in range(len(sizes))]


def _pool(op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    def f(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
        if op == "pool_avg" and not a.get("count_include_pad", 0) and any(a.get("pads", [0])):
            raise Decline("AveragePool without count_include_pad=1")
        if len(n.output) > 1 or a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1])):
            raise Decline("indices output, ceil_mode or dilations")
        x, kernel, stride = imp.value(n, n.input[0]), tuple(a["kernel_shape"]), tuple(a.get("strides", [1, 1]))
        pad = _canonical_pad(_pads(imp, n, a), x.shape, kernel, stride, (1, 1))
        return [node(op, x, kernel=kernel, stride=stride, pad=pad)]
    return f


def _global_avg(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    return [node("pool_avg", x, kernel=x.shape[2:], stride=(1, 1), pad=(0, 0))]


IMPORTERS: dict[str, Callable[[_Importer, Any, dict[str, Any]], list[Node]]] = {
    "Conv": _conv, "MatMul": lambda imp, n, a: [node("matmul", imp.value(n, n.input[0]), imp.value(n, n.input[1]))],
    "Gemm": _gemm, "Add": _binary("ewadd", "chadd"), "Mul": _binary("ewmul", "chmul"), "Relu": _unary("relu"),
    "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"),
    "Concat": lambda imp, n, a: [node("concat", *(imp.value(n, i) for i in n.input), axis=int(a["axis"]))],
    "Split": _split, "Reshape": _reshape,
    "Transpose": lambda imp, n, a: [node("transpose", imp.value(n, n.input[0]), perm=tuple(a["perm"]) if "perm" in a else None)],
    "MaxPool": _pool("pool_max"), "AveragePool": _pool("pool_avg"), "GlobalAveragePool": _global_avg,
    "Identity": lambda imp, n, a: [imp.value(n, n.input[0])], "BatchNormalization": _batchnorm, "Pad": _pad,
}


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _topological_order(path: str, model: Any) -> list[int]:
    producers = {o: i for i, n in enumerate(model.graph.node) for o in n.output}
    deps = nx.DiGraph()
    deps.add_nodes_from(range(len(model.graph.node)))
    for i, n in enumerate(model.graph.node):
        for name in n.input:
            if name in producers:
                deps.add_edge(producers[name], i)
    try:
        return list(nx.lexicographical_topological_sort(deps))
    except nx.NetworkXUnfeasible:
        raise OnnxError(f"{path}: the graph has a cycle") from None


def load(path: str | Path, batch: int = 1) -> Imported:
    """Read an ONNX model into the IR (see the module docstring)."""
    onnx = _onnx()
    path = str(path)
    try:
        model = onnx.load(path)
    except Exception as exc:  # onnx raises several types for unreadable files
        raise OnnxError(f"{path}: not an ONNX file: {_first_line(exc)}") from None
    order = _topological_order(path, model)
    sorted_nodes = [model.graph.node[i] for i in order]  # file order does not matter: sort, then check
    del model.graph.node[:]
    model.graph.node.extend(sorted_nodes)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise OnnxError(f"{path}: not a valid ONNX model: {_first_line(exc)}") from None
    opset = _opset(path, model)
    imp = _Importer(path, model, batch, opset)
    ops: dict[str, int] = {}
    shapes, types = _inferred_shapes(model, batch)
    opaque: list[str] = []
    for n in model.graph.node:
        importer = IMPORTERS.get(n.op_type)
        try:
            reason = "no mapping"
            outs = None
            if importer is not None:
                try:
                    outs = importer(imp, n, _attrs(n))
                except Decline as exc:
                    reason = str(exc)
            if outs is None:
                outs = _opaque(imp, n, shapes, types)
                opaque.append(f"{n.op_type} ({n.name or n.output[0]}: {reason})")
        except EqsatError as exc:
            if isinstance(exc, OnnxError):
                raise
            raise OnnxError(f"{imp.where(n)}: {exc}") from None
        for name, value in zip(n.output, outs):
            imp.values[name] = value
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    outputs = [o.name for o in model.graph.output]
    missing = [o for o in outputs if o not in imp.values]
    if missing:
        raise OnnxError(f"{path}: graph output(s) {', '.join(missing)} are never computed")
    graph = Graph([imp.values[o] for o in outputs], name=Path(path).stem)
    return Imported(graph, imp.weights, imp.input_names, outputs, ops, opaque, opset)


def _opset(path: str, model: Any) -> int:
    """The model's default-domain opset, if this tool reads it."""
    onnx = _onnx()
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        raise OnnxError(f"{path}: no default-domain opset import")
    if not MIN_OPSET <= versions[0] <= newest:
        raise OnnxError(f"{path}: opset {versions[0]} is not supported (this tool reads opsets {MIN_OPSET} to "
                        f"{newest}); convert it with onnx.version_converter")
    return versions[0]


def _inferred_shapes(model: Any, batch: int) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Shapes and element types of every value ONNX shape inference knows."""
    onnx = _onnx()
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes, types = {}, {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        t = vi.type.tensor_type
        types[vi.name] = t.elem_type
        if t.HasField("shape"):
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else batch
                                    for d in t.shape.dim)
    return shapes, types


def _opaque(imp: _Importer, n: Any, shapes: dict[str, tuple[int, ...]], types: dict[str, int]) -> list[Node]:
    """An op without an importer: one ``opaque`` node per output, holding the ONNX node itself as a
    one-node graph (inputs ``in0..`` with their element types, non-float initializers it reads
    as ``c0..``, outputs ``out0..``)."""
    onnx = _onnx()
    h = onnx.helper
    proto = type(n)()
    proto.CopyFrom(n)
    del proto.input[:]
    inputs, values, consts = [], [], []
    for name in n.input:
        if not name:
            proto.input.append("")
        elif name in imp.values:
            proto.input.append(f"in{len(inputs)}")
            values.append(h.make_tensor_value_info(proto.input[-1], types.get(name, onnx.TensorProto.FLOAT),
                                                   list(imp.values[name].shape)))
            inputs.append(imp.values[name])
        elif name in imp.consts:
            proto.input.append(f"c{len(consts)}")
            consts.append(onnx.numpy_helper.from_array(imp.consts[name], proto.input[-1]))
        else:
            imp.value(n, name)  # raises: names the missing input
    del proto.output[:]
    proto.output.extend(f"out{k}" for k in range(len(n.output)))
    graph = h.make_graph([proto], n.op_type, values, [onnx.ValueInfoProto(name=o) for o in proto.output], consts)
    graph_hex = graph.SerializeToString().hex()
    out_shapes = [shapes.get(o) for o in n.output]
    if any(s is None for s in out_shapes):  # shape inference knows none (training-mode BatchNormalization): run it
        try:
            zeros = [np.zeros(x.shape) for x in inputs]
            out_shapes = [tuple(run_node(graph_hex, zeros, k, imp.opset).shape) for k in range(len(n.output))]
        except Exception as exc:
            raise OnnxError(f"{imp.where(n)}: no output shapes: shape inference gives none and onnxruntime "
                            f"cannot run the node ({_first_line(exc)})") from None
    return [node("opaque", *inputs, op_type=n.op_type, node=graph_hex, shape=shape, index=k, opset=imp.opset)
            for k, shape in enumerate(out_shapes)]


def run_node(graph_hex: str, inputs: list[np.ndarray], index: int = 0, opset: int = OPSET) -> np.ndarray:
    """Output ``index`` of one stored opaque node (see :func:`_opaque`) in onnxruntime; inputs are
    cast to the element types the node reads."""
    onnx = _onnx()
    import onnxruntime as ort

    graph = onnx.GraphProto()
    graph.ParseFromString(bytes.fromhex(graph_hex))
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    session = ort.InferenceSession(model.SerializeToString())
    feeds = {vi.name: x.astype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
             for vi, x in zip(graph.input, inputs)}
    return np.asarray(session.run([f"out{index}"], feeds)[0])


# --------------------------------------------------------------------------- export
_ACT = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}


def _explicit_pads(pad: Any, x: tuple[int, ...], kernel: Any, stride: Any, dilation: Any) -> list[int]:
    """ONNX's (top, left, bottom, right) for the IR's ``same``/``valid``/explicit pad (SAME with a
    stride may pad one more after than before)."""
    per_axis = pad if not isinstance(pad, str) else (pad, pad)
    both = [conv_pads(p, size, k, st, d)[:2] for p, size, k, st, d in zip(per_axis, x[2:], kernel, stride, dilation)]
    return [both[0][0], both[1][0], both[0][1], both[1][1]]


_FLOAT_TYPES = {"float32": (np.float32, 1), "float64": (np.float64, 11)}  # numpy type, TensorProto type


class _Writer:
    """The ONNX graph being written: nodes, initializers and fresh tensor names."""

    def __init__(self, onnx: Any, taken: set[str], np_float: Any):
        self.onnx, self.h, self.np_float = onnx, onnx.helper, np_float
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.taken = taken
        self.counter = iter(range(1 << 30))
        self.opaque_outputs: dict[tuple[str, tuple[str, ...]], list[str]] = {}

    def fresh(self) -> str:
        """A new tensor name, never one of the model's own (an import may hold "t5")."""
        while (name := f"t{next(self.counter)}") in self.taken:
            pass
        return name

    def init(self, values: Any, dtype: Any = None, name: str | None = None) -> str:
        name = name or self.fresh()
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype or self.np_float), name))
        return name

    def ints(self, values: Any) -> str:
        return self.init(values, np.int64)

    def node(self, op_type: str, ins: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.fresh() for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, ins, outs, **attrs))
        return outs

    def activation(self, outs: list[str], act: str) -> list[str]:
        """A fused activation written after its kernel (ONNX has no fused form)."""
        return outs if act == "none" else self.node(_ACT[act], outs)


Exporter = Callable[[_Writer, Node, list[str], dict[str, Any]], list[str]]


def _conv_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    pads = _explicit_pads(a["pad"], n.inputs[0].shape, n.inputs[1].shape[2:], a["stride"], a["dilation"])
    return w.activation(w.node("Conv", ins, strides=list(a["stride"]), pads=pads, dilations=list(a["dilation"]),
                               group=a["groups"]), a["act"])


def _channel_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """chadd/chmul/affine: one BatchNormalization (mean 0, variance 1) for an affine along axis 1,
    else Mul/Add with each vector reshaped to broadcast along its axis."""
    axis, rank = a["axis"], len(n.shape)
    if n.op == "affine" and axis == 1:
        c = n.shape[1]
        return w.node("BatchNormalization", ins + [w.init(np.zeros(c)), w.init(np.ones(c))], epsilon=0.0)
    shaped = [w.node("Reshape", [vec, w.ints([-1] + [1] * (rank - axis - 1))])[0] for vec in ins[1:]]
    if n.op == "affine":
        return w.node("Add", [w.node("Mul", [ins[0], shaped[0]])[0], shaped[1]])
    return w.node("Add" if n.op == "chadd" else "Mul", [ins[0], shaped[0]])


def _pool_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    pads = _explicit_pads(a["pad"], n.inputs[0].shape, a["kernel"], a["stride"], (1, 1))
    extra = {"count_include_pad": 1} if n.op == "pool_avg" else {}
    return w.node("AveragePool" if n.op == "pool_avg" else "MaxPool", ins, kernel_shape=list(a["kernel"]),
                  strides=list(a["stride"]), pads=pads, **extra)


def _opaque_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """The stored ONNX node again; the outputs of one node (same node, same inputs) share it."""
    key = (a["node"], tuple(ins))
    if key not in w.opaque_outputs:
        stored = w.onnx.GraphProto()
        stored.ParseFromString(bytes.fromhex(a["node"]))
        proto = stored.node[0]
        rename = {vi.name: x for vi, x in zip(stored.input, ins)}
        for c in stored.initializer:
            rename[c.name] = c.name = w.fresh()
            w.inits.append(c)
        renamed = [rename.get(i, i) for i in proto.input]
        del proto.input[:]
        proto.input.extend(renamed)
        outs = [w.fresh() for _ in proto.output]
        del proto.output[:]
        proto.output.extend(outs)
        w.nodes.append(proto)
        w.opaque_outputs[key] = outs
    return [w.opaque_outputs[key][a["index"]]]


EXPORTERS: dict[str, Exporter] = {
    "conv2d": _conv_out,
    "matmul": lambda w, n, ins, a: w.activation(w.node("MatMul", ins), a["act"]),
    "ewadd": lambda w, n, ins, a: w.node("Add", ins),
    "ewmul": lambda w, n, ins, a: w.node("Mul", ins),
    "smul": lambda w, n, ins, a: w.node("Mul", ins),
    **{act: (lambda w, n, ins, a, _op=onnx_op: w.node(_op, ins)) for act, onnx_op in _ACT.items()},
    "chadd": _channel_out, "chmul": _channel_out, "affine": _channel_out,
    "transpose": lambda w, n, ins, a: w.node("Transpose", ins, perm=list(a["perm"])),
    "pad": lambda w, n, ins, a: w.node("Pad", ins + [w.ints(a["pads"])]),
    "reshape": lambda w, n, ins, a: w.node("Reshape", ins + [w.ints(a["shape"])]),
    "concat": lambda w, n, ins, a: w.node("Concat", ins, axis=a["axis"]),
    "split": lambda w, n, ins, a: w.node("Split", ins + [w.ints(a["sizes"])], len(a["sizes"]), axis=a["axis"]),
    "pool_avg": _pool_out, "pool_max": _pool_out,
    "opaque": _opaque_out,
}
"""IR op -> writer of its ONNX nodes (returns the names of the op's outputs). ``proj`` and ``noop``
only rename, and leaves are graph inputs or initializers."""


def save(imported: Imported, graph: Graph, path: str | Path, dtype: str = "float32") -> None:
    """Write ``graph`` (the import's structure, or an optimized one) as an ONNX model whose float
    tensors are ``dtype`` (float64 checks models whose float32 outputs overflow; opaque nodes
    keep the types they were imported with)."""
    if dtype not in _FLOAT_TYPES:
        raise OnnxError(f"{path}: dtype must be one of {', '.join(_FLOAT_TYPES)}, got {dtype!r}")
    np_float, onnx_float = _FLOAT_TYPES[dtype]
    onnx = _onnx()
    h = onnx.helper
    w = _Writer(onnx, {x.attr("name") for x in graph.leaves()} | set(imported.output_names), np_float)
    names: dict[Node, list[str]] = {}
    # weight-only subgraphs fold: only the constants a kernel (or an output) reads become
    # initializers, all computed in one evaluation of the imported data
    needed = {x for n in graph.nodes() if not n.is_const for x in n.inputs if x.is_const}
    needed |= {o for o in graph.outputs if o.is_const}
    values = evaluate_nodes(Graph([n for n in graph.nodes() if n in needed]), imported.weights) if needed else {}
    for n in graph.nodes():
        if n.op == "input":
            names[n] = [n.attr("name")]
        elif n.is_const:
            if n in needed:
                names[n] = [w.init(values[n], name=n.attr("name") if n.op == "weight" else None)]
        elif n.op == "proj":
            names[n] = [names[n.inputs[0]][n.attr("index")]]
        elif n.op == "noop":
            names[n] = [names[x][0] for x in n.inputs]
        elif n.op in EXPORTERS:
            names[n] = EXPORTERS[n.op](w, n, [names[x][0] for x in n.inputs], n.attr_dict)
        else:
            raise OnnxError(f"{path}: cannot export op {n.op} (node {n}); EXPORTERS has no entry for it")
    outputs = []
    for name, o in zip(imported.output_names, graph.outputs):
        w.nodes.append(h.make_node("Identity", [names[o][0]], [name]))
        outputs.append(h.make_tensor_value_info(name, onnx_float, list(o.shape)))
    inputs = [h.make_tensor_value_info(n.attr("name"), onnx_float, list(n.shape)) for n in graph.leaves("input")]
    model = h.make_model(h.make_graph(w.nodes, graph.name or "eqsat", inputs, outputs, w.inits),
                         opset_imports=[h.make_opsetid("", imported.opset)])
    onnx.checker.check_model(model)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", suffix=".onnx.tmp")
    os.close(fd)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def random_weights(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Data for every weight leaf: normal, scaled by 1/sqrt(fan-in) (all axes but the first), so
    deep random networks keep their activations in range."""
    rng = np.random.default_rng(seed)
    out = {}
    for leaf in graph.leaves("weight"):
        shape = leaf.shape
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        out[leaf.attr("name")] = rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))
    return out


def export_graph(graph: Graph, path: str | Path, weights: dict[str, np.ndarray] | None = None,
                 seed: int = 0, dtype: str = "float32") -> Imported:
    """Write a graph built in Python (e.g. a benchmark builder's) as an ONNX model, with
    ``weights`` or :func:`random_weights`; returns the :class:`Imported` it was written from."""
    data = weights if weights is not None else random_weights(graph, seed)
    missing = [w.attr("name") for w in graph.leaves("weight") if w.attr("name") not in data]
    if missing:
        raise OnnxError(f"{path}: no data for weight(s) {', '.join(missing)}")
    imported = Imported(graph, data, [x.attr("name") for x in graph.leaves("input")],
                        [f"output{i}" for i in range(len(graph.outputs))])
    save(imported, graph, path, dtype)
    return imported


def random_feeds(session: Any, seed: int = 0, input_scale: float = 1.0, like: Any = None) -> dict[str, np.ndarray]:
    """Standard normal inputs times ``input_scale`` for an onnxruntime session, in each input's
    float type; a dynamic dimension takes ``like``'s size (another session), else 1."""
    rng = np.random.default_rng(seed)
    fixed = {i.name: i.shape for i in (like or session).get_inputs()}
    feeds = {}
    for i in session.get_inputs():
        dims = [d if isinstance(d, int) else (e if isinstance(e, int) else 1) for d, e in zip(i.shape, fixed[i.name])]
        x = input_scale * rng.standard_normal(dims)
        feeds[i.name] = x.astype(np.float64 if i.type == "tensor(double)" else np.float32)
    return feeds


def max_difference(a: str | Path, b: str | Path, seed: int = 0, input_scale: float = 1.0) -> float:
    """Largest |difference| between two models' outputs in onnxruntime on the same random inputs
    (standard normal times ``input_scale``), relative to the largest output magnitude."""
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise OnnxError("checking with onnxruntime needs the optional extra: pip install 'eqsat-lab[onnx]'") from exc
    sa, sb = ort.InferenceSession(str(a)), ort.InferenceSession(str(b))
    feeds = random_feeds(sa, seed, input_scale, like=sb)
    xa, xb = sa.run(None, feeds), sb.run(None, feeds)
    if not all(np.isfinite(x).all() for x in xa):
        raise OnnxError(f"{a}: outputs overflow in onnxruntime ({', '.join(i.type for i in sa.get_inputs())}); "
                        f"compare float64 exports instead")
    scale = max(1.0, max(float(np.abs(x).max()) for x in xa))
    return max(float(np.abs(x - y).max()) for x, y in zip(xa, xb)) / scale
