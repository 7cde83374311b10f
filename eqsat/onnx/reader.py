"""ONNX in: :func:`load` maps each node through :data:`IMPORTERS` (one entry per ONNX op) or
makes it opaque, with its reason."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from eqsat.errors import EqsatError
from eqsat.ir.evaluate import attribute_weights
from eqsat.ir.graph import Graph, Node, node, weight
from eqsat.onnx.common import MIN_OPSET, Decline, Imported, OnnxError, _first_line, _onnx, skeleton
from eqsat.onnx.importers import IMPORTERS, _attrs, _Importer
from eqsat.onnx.runtime import run_node


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


READABLE_ELEM_TYPES = frozenset({1, 10, 11, 2, 3, 4, 5, 6, 7, 12, 13, 9})
"""ONNX element types a graph input or output may have: float32, float16, float64 (computed on),
the integer types and bool (carried through). bfloat16, float8, int4, strings and complex numbers
have no numpy type the checks and the writer can use. (An initializer of another type is fine
while only folded constants read it, e.g. through a Cast: see :meth:`_Importer.value`.)"""


def elem_type_name(elem: int) -> str:
    """``16`` -> ``"bfloat16"``: an ONNX element type as a message names it."""
    names = _onnx().TensorProto.DataType
    return names.Name(elem).lower() if elem in names.values() else f"element type {elem}"


def check_interface(path: str, model: Any) -> None:
    """Refuse, naming the tensor, a graph input or output whose element type this tool cannot
    compute in (:data:`READABLE_ELEM_TYPES`), and a graph input with an axis of size 0 or less:
    each surfaced later as a misleading "symbolic dimension" or missing-input message, or as
    onnxruntime's own error after the whole search."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in inits]
    for what, values in (("graph input", inputs), ("graph output", model.graph.output)):
        for v in values:
            elem = v.type.tensor_type.elem_type
            if elem == 0:  # ONNX's checker allows it; onnxruntime refuses the file (after the whole search)
                raise OnnxError(f"{path}: {what} {v.name!r} has no element type; declare one in the file")
            if elem not in READABLE_ELEM_TYPES:
                raise OnnxError(f"{path}: {what} {v.name!r} is {elem_type_name(elem)}, which this tool cannot "
                                f"compute in (it reads float32, float16, float64, integer and bool tensors); "
                                f"cast it in the file")
    for v in inputs:
        for axis, d in enumerate(v.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value <= 0:
                why = "an empty tensor has nothing to optimize" if d.dim_value == 0 else "which is not a size"
                raise OnnxError(f"{path}: graph input {v.name!r} axis {axis} has size {d.dim_value}, {why}; "
                                f"give the axis a size of at least 1, or a name to size it with --batch or --dim")


def fix_input_dims(path: str, model: Any, batch: int, dims: Mapping[str, int]) -> None:
    """Give every symbolic dimension of the graph inputs a size, in place: a name in ``dims``
    takes that size; the first axis, and any dimension sharing its name, is the batch; any other
    symbolic dimension is an error naming the input, the axis and the flag that sizes it. Shape
    inference then sees concrete inputs, so every inner shape follows from them."""
    inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    batch_names: set[str] = set()
    for inp in inputs:
        first = list(inp.type.tensor_type.shape.dim)[:1]
        for d in first:
            if not (d.HasField("dim_value") and d.dim_value > 0) and d.dim_param and d.dim_param not in dims:
                batch_names.add(d.dim_param)
    used: set[str] = set()
    for inp in inputs:
        for axis, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            name = d.dim_param
            if name in dims:
                size = dims[name]
                used.add(name)
            elif axis == 0 or name in batch_names:
                size = batch
            else:
                label = f"named {name!r}" if name else "without a name"
                flag = f"--dim {name}=N" if name else "a fixed size in the file"
                raise OnnxError(f"{path}: input {inp.name!r} axis {axis} is a symbolic dimension {label}; "
                                f"only the first axis is the batch (--batch), so give it {flag}")
            d.dim_value = size
    unused = sorted(set(dims) - used)
    if unused:
        raise OnnxError(f"{path}: --dim {unused[0]}: no graph input has a symbolic dimension of that name")


def load(path: str | Path, batch: int = 1, dims: Mapping[str, int] | None = None) -> Imported:
    """Read an ONNX model into the IR (see the module docstring); symbolic input dimensions are
    sized by :func:`fix_input_dims`."""
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
        onnx.checker.check_model(skeleton(model))
    except Exception as exc:
        raise OnnxError(f"{path}: not a valid ONNX model: {_first_line(exc)}") from None
    opset = _opset(path, model)
    check_interface(path, model)
    fix_input_dims(path, model, batch, dims or {})
    imp = _Importer(path, model, batch, opset)
    ops: dict[str, int] = {}
    shapes, types = _inferred_shapes(model, batch)
    for init in model.graph.initializer:  # initializers are not graph inputs: their types are their own
        types.setdefault(init.name, init.data_type)
    opaque: list[str] = []
    for n in model.graph.node:
        if _fold(imp, n):  # constants, shapes of static tensors and what only reads them
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
            continue
        importer = IMPORTERS.get(n.op_type)
        try:
            reason = "no mapping"
            outs = None
            if importer is not None:
                try:
                    outs = importer(imp, n, _attrs(n))
                except Decline as exc:
                    reason = str(exc)
                except EqsatError as exc:  # the op table rejects this use: keep the node exactly
                    if isinstance(exc, OnnxError):
                        raise
                    reason = f"not expressible in the op table: {exc}"
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
    graph = graph.with_fixed({w: imp.weights[w] for w in attribute_weights(graph)})  # checks keep these values
    elem_types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)}
    return Imported(graph, imp.weights, imp.input_names, outputs, ops, opaque, opset, elem_types)


def _opset(path: str, model: Any) -> int:
    """The model's default-domain opset, if this tool reads it."""
    onnx = _onnx()
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        raise OnnxError(f"{path}: no default-domain opset import")
    if not MIN_OPSET <= versions[0] <= newest:
        raise OnnxError(
            f"{path}: opset {versions[0]} is not supported (this tool reads opsets {MIN_OPSET} to "
            f"{newest}); convert it with onnx.version_converter"
        )
    return versions[0]


def _inferred_shapes(model: Any, batch: int) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Shapes and element types of every value ONNX shape inference knows."""
    onnx = _onnx()
    inferred = onnx.shape_inference.infer_shapes(skeleton(model))
    shapes, types = {}, {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        t = vi.type.tensor_type
        types[vi.name] = t.elem_type
        if t.HasField("shape"):
            shapes[vi.name] = tuple(
                d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else batch for d in t.shape.dim
            )
    return shapes, types


_RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                         "Bernoulli"})
FOLD_MAX_ELEMENTS = 1 << 26  # a folded tensor larger than this stays a computation
FOLD_MAX_BYTES = 16 << 20
"""A fold that reads a value the IR computed from weights, or that only onnxruntime can evaluate,
writes at most this many bytes (a larger result stays a computation; the writer still folds it)."""


def _fold(imp: _Importer, n: Any) -> bool:
    """Evaluate ``n`` now when its value does not depend on the inputs' data: ``Constant`` nodes,
    ``Shape`` of a tensor whose shape is static, and any deterministic op all of whose inputs
    are constants (the ``Shape -> Gather -> Concat -> Reshape`` chains exporters emit) or values
    the IR computed from weights alone (an op mapped before, e.g. a contrib op on a weight):
    evaluated by ONNX's reference evaluator, else by onnxruntime (contrib ops, ops the reference
    lacks). Float results become weights (so they are written back as initializers), others stay
    constants; a fold through a computed value or onnxruntime is capped at :data:`FOLD_MAX_BYTES`."""
    if n.op_type in _RANDOM_OPS or not n.output:
        return False
    names = [i for i in n.input if i]
    if n.op_type == "Shape" and names and names[0] in imp.values and names[0] not in imp.consts:
        if n.domain not in ("", "ai.onnx"):
            return False
        a = _attrs(n)
        shape = np.array(imp.values[names[0]].shape, dtype=np.int64)
        outs, capped = [shape[a.get("start", 0): a["end"] if "end" in a else None]], False
    elif names or n.op_type == "Constant":
        known = _constant_inputs(imp, names)
        if known is None:
            return False
        outs, by_runtime = _evaluate_node(imp, n, known)
        if outs is None:
            return False
        capped = by_runtime or any(i not in imp.consts for i in names)
    else:
        return False
    if any(np.asarray(o).size > FOLD_MAX_ELEMENTS for o in outs):
        return False
    if capped and sum(np.asarray(o).nbytes for o in outs) > FOLD_MAX_BYTES:
        return False
    for name, value in zip((o for o in n.output if o), outs):
        arr = np.asarray(value)
        imp.consts[name] = arr
        if arr.dtype.kind == "f":
            imp.weights[name] = arr.astype(np.float64)
            imp.values[name] = weight(name, arr.shape)
    return True


def _constant_inputs(imp: _Importer, names: list[str]) -> dict[str, np.ndarray] | None:
    """Every input's value when each is a constant or a value the IR computed from weights alone
    (evaluated now, in float32, up to :data:`FOLD_MAX_BYTES`), else None."""
    from eqsat.ir.evaluate import evaluate
    from eqsat.ir.ops import numel

    known = {}
    for i in names:
        if i in imp.consts:
            known[i] = np.asarray(imp.consts[i])
            continue
        v = imp.values.get(i)
        if v is None or not v.is_const or len(v.shapes) != 1 or numel(v.shape) * 8 > FOLD_MAX_BYTES:
            return None
        leaves = {leaf.attr("name"): imp.weights[leaf.attr("name")] for leaf in Graph((v,)).leaves()}
        known[i] = evaluate(Graph((v,)), leaves)[0].astype(np.float32)
    return known


def _evaluate_node(imp: _Importer, n: Any, known: dict[str, np.ndarray]) -> tuple[list[Any] | None, bool]:
    """``n``'s outputs on ``known`` inputs by ONNX's reference evaluator (standard ops), else by
    onnxruntime; (None, False) when neither runs it. The flag says onnxruntime computed them."""
    onnx = _onnx()
    h = onnx.helper
    inits = [onnx.numpy_helper.from_array(arr, i) for i, arr in known.items()]
    graph = h.make_graph([n], "fold", [], [h.make_empty_tensor_value_info(o) for o in n.output if o], inits)
    opsets = [h.make_opsetid("", imp.opset)] + ([h.make_opsetid(n.domain, 1)] if n.domain not in ("", "ai.onnx")
                                                 else [])
    model = h.make_model(graph, opset_imports=opsets)
    if n.domain in ("", "ai.onnx"):
        from onnx.reference import ReferenceEvaluator

        try:
            return list(ReferenceEvaluator(model).run(None, {})), False
        except Exception:  # an op the reference evaluator lacks: onnxruntime may have it
            pass
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return list(session.run(None, {})), True
    except Exception:  # neither evaluates it: map or keep it as usual
        return None, False


STORED_CONST_ELEMENTS = 4096  # a float constant an opaque node reads up to this size is stored in the node


def _opaque(imp: _Importer, n: Any, shapes: dict[str, tuple[int, ...]], types: dict[str, int]) -> list[Node]:
    """An op without an importer: one ``opaque`` node per output, holding the ONNX node itself as a
    one-node graph (inputs ``in0..`` with their element types; the non-float constants it reads,
    and float ones of at most :data:`STORED_CONST_ELEMENTS`, as initializers ``c0..`` with their
    values, so the node is evaluated and timed as in its file; outputs ``out0..``)."""
    onnx = _onnx()
    h = onnx.helper
    proto = type(n)()
    proto.CopyFrom(n)
    del proto.input[:]
    inputs, values, consts = [], [], []
    for name in n.input:
        if not name:
            proto.input.append("")
        elif name in imp.consts and (name not in imp.values or imp.consts[name].size <= STORED_CONST_ELEMENTS):
            proto.input.append(f"c{len(consts)}")  # kept in the node with its value (Pow's exponent, Where's fill)
            consts.append(onnx.numpy_helper.from_array(imp.consts[name], proto.input[-1]))
        elif name in imp.values:
            proto.input.append(f"in{len(inputs)}")
            values.append(
                h.make_tensor_value_info(
                    proto.input[-1], types.get(name, onnx.TensorProto.FLOAT), list(imp.values[name].shape)
                )
            )
            inputs.append(imp.values[name])
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
            raise OnnxError(
                f"{imp.where(n)}: no output shapes: shape inference gives none and onnxruntime "
                f"cannot run the node ({_first_line(exc)})"
            ) from None
    return [
        node("opaque", *inputs, op_type=n.op_type, node=graph_hex, shape=shape, index=k, opset=imp.opset)
        for k, shape in enumerate(out_shapes)
    ]
