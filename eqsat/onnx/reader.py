"""ONNX in: :func:`load` maps each node through :data:`IMPORTERS` (one entry per ONNX op) or
makes it opaque, with its reason."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.errors import EqsatError
from eqsat.ir.evaluate import attribute_weights
from eqsat.ir.graph import Graph, Node, node, weight
from eqsat.onnx.common import (
    MIN_OPSET,
    Decline,
    Imported,
    OnnxError,
    _first_line,
    _onnx,
    fold_elements,
    rename_subgraph_reads,
    skeleton,
)
from eqsat.onnx.importers import IMPORTERS, _attrs, _Importer
from eqsat.onnx.mapped import ModelFile, read_model
from eqsat.onnx.runtime import run_node


def _topological_order(path: str, model: Any) -> list[int]:
    import networkx as nx  # here, not at start-up: 0.15-0.2 s of every command's import of the pipeline

    producers = {o: i for i, n in enumerate(model.graph.node) for o in n.output}
    deps = nx.DiGraph()
    deps.add_nodes_from(range(len(model.graph.node)))
    for i, n in enumerate(model.graph.node):
        for name in [*n.input, *_outer_scope_reads(n)]:  # what an If/Loop/Scan body reads is an input too
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
            kind = v.type.WhichOneof("value")
            if kind not in (None, "tensor_type"):  # a sequence, map, optional or sparse tensor
                name = kind.removesuffix("_type").replace("_", " ")
                raise OnnxError(f"{path}: {what} {v.name!r} is {'an' if name[0] in 'aeiou' else 'a'} {name}, not a "
                                f"tensor; this tool reads tensor inputs and outputs only")
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


def load(path: str | Path | Any, batch: int = 1, dims: Mapping[str, int] | None = None) -> Imported:
    """Read an ONNX model into the IR (see the module docstring); symbolic input dimensions are
    sized by :func:`fix_input_dims`. ``path`` may also be an in-memory ``onnx.ModelProto`` (a
    model PyTorch's exporter returns; it is copied, not changed), named by its graph's name."""
    onnx = _onnx()
    external = False
    if isinstance(path, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(path)
        path = model.graph.name or "model"
        read = ModelFile(model)
    else:
        path = str(path)
        try:
            read = read_model(path)  # its large weights mapped, not copied (eqsat.onnx.mapped)
            model = read.proto
            external = uses_external_data(model)
            if external:  # what onnx.load does, with the answer kept: writing the input back needs it
                onnx.load_external_data_for_model(model, str(Path(path).parent))
        except Exception as exc:  # onnx raises several types for unreadable files
            raise OnnxError(f"{path}: not an ONNX file: {_first_line(exc)}") from None
    model = upgrade(path, model, read)
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
    imp = _Importer(path, model, batch, opset, read.array)
    ops: dict[str, int] = {}
    shapes, types = _inferred_shapes(model)
    runtime = _RuntimeShapes(model, shapes, read.restore)
    for init in model.graph.initializer:  # initializers are not graph inputs: their types are their own
        types.setdefault(init.name, init.data_type)
    compute = _compute_type(model)
    returned = {o.name for o in model.graph.output}
    opaque: list[str] = []
    for n in model.graph.node:
        if _fold(imp, n, shapes) and not any(o in returned and o not in imp.values for o in n.output):
            ops[n.op_type] = ops.get(n.op_type, 0) + 1  # constants, shapes of static tensors, what only reads them
            continue  # (a non-float one the graph returns stays a node: the IR holds no integer constants)
        importer = IMPORTERS.get(n.op_type)
        try:
            reason = "no mapping"
            other = _other_type(n, types, compute)
            if importer is not None and other is not None and n.op_type not in TYPE_KEEPING:
                importer, reason = None, f"{elem_type_name(other)} arithmetic (the graph is written in " \
                                         f"{elem_type_name(compute)})"
            outs = None
            if importer is not None:
                try:
                    outs = importer(imp, n, _attrs(n))
                except Decline as exc:
                    reason = str(exc)
                except EqsatError as exc:  # the op table rejects this use: keep the node exactly
                    if isinstance(exc, OnnxError) and other is None:
                        raise
                    # a layout op on integers that reads an integer constant (Concat of a shape and a
                    # constant tail): the IR holds no integer constants, the node kept as is does
                    reason = f"not expressible in the op table: {exc}"
            if outs is None:
                outs = _opaque(imp, n, shapes, types, runtime)
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
    return Imported(graph, imp.weights, imp.input_names, outputs, ops, opaque, opset, elem_types, external)


def uses_external_data(model: Any) -> bool:
    """Whether any tensor of ``model`` (initializers, node attributes) keeps its data in a file
    of its own."""
    helper = _onnx().external_data_helper
    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node for a in n.attribute if a.HasField("t")]
    return any(helper.uses_external_data(t) for t in tensors)


def upgrade(path: str, model: Any, read: ModelFile | None = None) -> Any:
    """An older model as this tool reads it, in memory: IR version 3 lists every initializer among
    the graph inputs (later versions make them constants unless fed, which is how onnxruntime runs
    them too), so those entries go; a default-domain opset below :data:`MIN_OPSET` is converted to
    it with ``onnx.version_converter`` (Split, Reshape and the reductions took attributes before),
    given the weights ``read`` mapped (it rewrites the whole model). The file itself is untouched;
    what is written is the converted model's opset."""
    onnx = _onnx()
    if model.ir_version < 4:
        inits = {t.name for t in model.graph.initializer}
        kept = [v for v in model.graph.input if v.name not in inits]
        del model.graph.input[:]
        model.graph.input.extend(kept)
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if versions and versions[0] < MIN_OPSET:
        model.ir_version = max(model.ir_version, 4)
        if read is not None:
            read.restore(model)
            read.spans.clear()  # the converted model holds the data
        try:
            from onnx import version_converter

            converted = version_converter.convert_version(model, MIN_OPSET)
        except Exception as exc:  # the converter raises several types
            raise OnnxError(f"{path}: opset {versions[0]} is older than this tool reads ({MIN_OPSET} and newer) "
                            f"and onnx.version_converter cannot convert it: {_first_line(exc)}") from None
        if [v.SerializeToString() for v in converted.graph.input] != [v.SerializeToString() for v in model.graph.input]:
            raise OnnxError(f"{path}: opset {versions[0]} is older than this tool reads ({MIN_OPSET} and newer) and "
                            f"onnx.version_converter changes the graph inputs (opset 8's batched Scan, say)")
        model = converted
    model.ir_version = max(model.ir_version, onnx.helper.find_min_ir_version_for(list(model.opset_import), True))
    return model


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


Shape = tuple[int | None, ...]  # None: a dimension shape inference leaves unknown (each its own unknown)


def _inferred_shapes(model: Any) -> tuple[dict[str, Shape], dict[str, int]]:
    """Shapes and element types of every value ONNX shape inference knows; a dimension it does not
    know (a data-dependent size, a ``dim_param`` it made up) is None, never a guess: such a value's
    shape comes from onnxruntime (:class:`_RuntimeShapes`)."""
    onnx = _onnx()
    inferred = onnx.shape_inference.infer_shapes(skeleton(model))
    shapes, types = {}, {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        t = vi.type.tensor_type
        types[vi.name] = t.elem_type
        if t.HasField("shape"):
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return shapes, types


def _known(shape: Shape | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


class _RuntimeShapes:
    """The shapes onnxruntime computes for the values shape inference leaves (partly) unknown: the
    model (inputs sized) runs on the random inputs the final check feeds (seed 0), with every such
    value as an extra output, and once more on other inputs (seed 1, integers 1, not 0): a shape that
    differs follows the input values, which no static graph can hold (:attr:`varying`)."""

    def __init__(self, model: Any, shapes: dict[str, Shape], restore: Callable[[Any], None] = lambda model: None):
        self.model, self.shapes, self.restore = model, shapes, restore
        self.found: dict[str, tuple[int, ...]] | None = None
        self.varying: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def get(self, name: str) -> tuple[int, ...] | None:
        if self.found is None:
            self.found = self._run()
        return self.found.get(name)

    def _run(self) -> dict[str, tuple[int, ...]]:
        onnx = _onnx()
        import onnxruntime as ort

        from eqsat.onnx.runtime import random_feeds

        model = type(self.model)()
        model.CopyFrom(self.model)
        self.restore(model)  # onnxruntime runs it from memory: with the mapped weights' data
        outputs = {o.name for o in model.graph.output}
        unknown = [n for node_ in model.graph.node for n in node_.output
                   if n and n not in outputs and not _known(self.shapes.get(n))]
        model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in unknown)
        so = ort.SessionOptions()
        so.log_severity_level = 4
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # every value stays computed
        try:
            session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            found = {o: tuple(np.shape(v)) for o, v in zip(names, session.run(None, random_feeds(session)))}
        except Exception:  # onnxruntime's errors have no common base class; the node alone is tried next
            return {}
        other = {k: (v + 1 if v.dtype.kind in "iu" else v) for k, v in random_feeds(session, seed=1).items()}
        try:
            again = {o: tuple(np.shape(v)) for o, v in zip(names, session.run(None, other))}
        except Exception:  # inputs of 1 may be out of range (an index): the first run's shapes stand
            again = found
        self.varying = {o: (found[o], again[o]) for o in found if found[o] != again[o]}
        return found


TYPE_KEEPING = frozenset({"Flatten", "Unsqueeze", "Squeeze", "Gather", "Expand", "Concat", "Split", "Reshape",
                          "Transpose", "Identity", "Slice"})
"""ONNX ops whose importers only move elements: they map on any element type. Every other importer
maps the graph's float type only (:func:`_compute_type`); on integers, bools or another float type
the node stays opaque, so it is written with the types it had
(an integer Sub written as a product with a float -1, or an integer Div as a float reciprocal, is
not the same op: onnxruntime refuses the first, the second truncates differently)."""


def _compute_type(model: Any) -> int:
    """The float type the IR's nodes are written in: the one float type of the graph's inputs and
    outputs, else float32 (as :func:`eqsat.onnx.writer.interface_dtype` picks)."""
    inits = {t.name for t in model.graph.initializer}
    found = {v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output] if v.name not in inits}
    floats = found & _FLOAT_ELEMS
    return floats.pop() if len(floats) == 1 else 1


def _other_type(n: Any, types: dict[str, int], compute: int) -> int | None:
    """The first of ``n``'s output types (as shape inference knows them; the arithmetic ops compute
    in their inputs' type) that is not ``compute``: an integer, a bool, or another float (float32
    softmax inside a float16 graph), or None."""
    for name in n.output:
        t = types.get(name, 0) if name else 0
        if t and t != compute:
            return t
    return None


_FLOAT_ELEMS = frozenset({1, 10, 11})  # float32, float16, float64


_RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                         "Bernoulli"})
FOLD_MAX_ELEMENTS = 1 << 26  # a folded tensor larger than this stays a computation


def _fold(imp: _Importer, n: Any, shapes: Mapping[str, tuple[int, ...]] | None = None) -> bool:
    """Evaluate ``n`` now when its value does not depend on the inputs' data: ``Constant`` nodes,
    ``Shape`` of a tensor whose shape is static, and any deterministic ONNX op all of whose inputs
    are constants (the ``Shape -> Gather -> Concat -> Reshape`` chains exporters emit). Float
    results become weights (so they are written back as initializers), others stay constants."""
    onnx = _onnx()
    if n.domain not in ("", "ai.onnx") or n.op_type in _RANDOM_OPS or not n.output:
        return False
    names = [i for i in n.input if i]
    outer = _outer_scope_reads(n)
    if n.op_type == "Shape" and names and names[0] in imp.values and names[0] not in imp.consts:
        a = _attrs(n)
        shape = np.array(imp.values[names[0]].shape, dtype=np.int64)
        outs = [shape[a.get("start", 0): a["end"] if "end" in a else None]]
    elif all(i in imp.consts for i in names + outer) and (names or n.op_type == "Constant"):
        from onnx.reference import ReferenceEvaluator

        # estimated before evaluating: a 164-byte ConstantOfShape of 16384x32768 was built (2 GB) first
        if fold_elements(imp.consts, n, shapes or {}, FOLD_MAX_ELEMENTS) > FOLD_MAX_ELEMENTS:
            return False
        h = onnx.helper
        inits = [onnx.numpy_helper.from_array(np.asarray(imp.consts[i]), i) for i in dict.fromkeys(names + outer)]
        graph = h.make_graph([n], "fold", [], [h.make_empty_tensor_value_info(o) for o in n.output if o], inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", imp.opset)])
        try:
            outs = ReferenceEvaluator(model).run(None, {})
        except Exception:  # an op the reference evaluator lacks: map or keep it as usual
            return False
    else:
        return False
    if any(np.asarray(o).size > FOLD_MAX_ELEMENTS for o in outs):
        return False
    for name, value in zip((o for o in n.output if o), outs):
        arr = np.asarray(value)
        imp.consts[name] = arr
        if arr.dtype.kind == "f":
            imp.weights[name] = arr.astype(np.float64)
            imp.values[name] = weight(name, arr.shape)
    return True


STORED_CONST_ELEMENTS = 4096  # a float constant an opaque node reads up to this size is stored in the node


def _outer_scope_reads(n: Any) -> list[str]:
    """Names ``n``'s subgraphs (If, Loop, Scan bodies) read from the enclosing graph, in order."""
    found: list[str] = []

    def walk(g: Any, known: set[str]) -> None:
        known = known | {i.name for i in g.input} | {t.name for t in g.initializer}
        for m in g.node:
            for name in m.input:
                if name and name not in known and name not in found:
                    found.append(name)
            for a in m.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(sub, known)
            known |= set(m.output)
        found.extend(o.name for o in g.output if o.name not in known and o.name not in found)

    for a in n.attribute:
        for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            walk(sub, set())
    return found


def _opaque(imp: _Importer, n: Any, shapes: dict[str, Shape], types: dict[str, int],
            runtime: _RuntimeShapes) -> list[Node]:
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
    outer: dict[str, str] = {}  # what its subgraphs read from the enclosing graph: inputs of the one-node graph
    for k, name in enumerate(_outer_scope_reads(n)):
        outer[name] = f"outer{k}"
        if name in imp.consts and (name not in imp.values or imp.consts[name].size <= STORED_CONST_ELEMENTS):
            consts.append(onnx.numpy_helper.from_array(imp.consts[name], outer[name]))
        elif name in imp.values:
            values.append(h.make_tensor_value_info(outer[name], types.get(name, onnx.TensorProto.FLOAT),
                                                   list(imp.values[name].shape)))
            inputs.append(imp.values[name])
        else:
            imp.value(n, name)  # raises: names the missing value
    rename_subgraph_reads(proto, outer)
    del proto.output[:]
    proto.output.extend(f"out{k}" for k in range(len(n.output)))
    graph = h.make_graph([proto], n.op_type, values, [onnx.ValueInfoProto(name=o) for o in proto.output], consts)
    graph_hex = graph.SerializeToString().hex()
    out_shapes = [shapes.get(o) if _known(shapes.get(o)) else runtime.get(o) for o in n.output]
    varying = [o for o in n.output if o in runtime.varying]
    if varying:
        a, b = runtime.varying[varying[0]]
        raise OnnxError(f"{imp.where(n)}: the shape of {varying[0]!r} follows the input values ({a} on one random "
                        f"input, {b} on another), and an optimized graph has static shapes")
    if any(s is None for s in out_shapes):  # onnxruntime cannot run the model: run the node alone
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
