"""ONNX out: :func:`save` writes a graph back through :data:`EXPORTERS` (one small writer per IR
op), folding weight-only subgraphs into initializers; :func:`export_graph` writes a builder graph."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.files import replace_atomic
from eqsat.heap import release_mapped
from eqsat.ir.evaluate import evaluate_nodes
from eqsat.ir.graph import Graph, Node
from eqsat.ir.ops import conv_pads
from eqsat.onnx.common import (
    ACTIVATIONS,
    FUSED_DOMAIN,
    OPSET,
    SKELETON_MAX_ELEMENTS,
    Imported,
    OnnxError,
    _field,
    _onnx,
    rename_subgraph_reads,
    skeleton,
)
from eqsat.onnx.writer_ops import EXPORTERS as _DYNAMO_OP_EXPORTERS
from eqsat.onnx.writer_patterns import batched_products, gemm_pairs, parts_read


def _explicit_pads(pad: Any, x: tuple[int, ...], kernel: Any, stride: Any, dilation: Any) -> list[int]:
    """ONNX's (top, left, bottom, right) for the IR's ``same``/``valid``/explicit pad (SAME with a
    stride may pad one more after than before)."""
    per_axis = pad if not isinstance(pad, str) else (pad, pad)
    both = [conv_pads(p, size, k, st, d)[:2] for p, size, k, st, d in zip(per_axis, x[2:], kernel, stride, dilation)]
    return [both[0][0], both[1][0], both[0][1], both[1][1]]


WRITER_VERSION = 3  # bump when the same graph is written as other ONNX nodes: timings recorded by graph digest go stale
EXPORT_TAG = f"writer{WRITER_VERSION}:"  # in the keys of timings of files this writer wrote
_FLOAT_TYPES = {"float32": (np.float32, 1), "float64": (np.float64, 11), "float16": (np.float16, 10)}
"""dtype name -> (numpy type, TensorProto type) of the float tensors a saved model uses."""
_DTYPE_OF_ELEM = {elem: name for name, (_, elem) in _FLOAT_TYPES.items()}


def interface_dtype(imported: Imported) -> str:
    """The float type of the model's inputs and outputs when they share one (else float32), so the
    optimized file takes and returns what the original did."""
    kinds = {_DTYPE_OF_ELEM.get(t, "float32") for t in imported.elem_types.values() if t in _FLOAT_ELEM_TYPES}
    return kinds.pop() if len(kinds) == 1 else "float32"


class _Writer:
    """The ONNX graph being written: nodes, initializers and fresh tensor names."""

    def __init__(self, onnx: Any, taken: set[str], np_float: Any, opset: int, contrib: bool = False):
        self.onnx, self.h, self.np_float, self.opset = onnx, onnx.helper, np_float, opset
        self.contrib = contrib and np_float is np.float32  # onnxruntime's fused CPU kernels are float32 only
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.large: list[tuple[str, np.ndarray]] = []  # initializers written by write_model, not held in the proto
        self.taken = taken
        self.counter = iter(range(1 << 30))
        self.opaque_outputs: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        self.domains: set[str] = set()  # operator domains besides ONNX's own that the model uses

    def fresh(self) -> str:
        """A new tensor name, never one of the model's own (an import may hold "t5")."""
        while (name := f"t{next(self.counter)}") in self.taken:
            pass
        return name

    def init(self, values: Any, dtype: Any = None, name: str | None = None) -> str:
        name = name or self.fresh()
        array = np.asarray(values, dtype=dtype or self.np_float)  # a read-only broadcast stays one
        if array.size > SKELETON_MAX_ELEMENTS and array.dtype.kind in "fiu":
            self.large.append((name, array))  # copied only as it is written (write_model)
        else:
            self.inits.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def ints(self, values: Any) -> str:
        return self.init(values, np.int64)

    def node(self, op_type: str, ins: list[str], n_out: int = 1, domain: str = "", **attrs: Any) -> list[str]:
        outs = [self.fresh() for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, ins, outs, domain=domain or None, **attrs))
        if domain:
            self.domains.add(domain)
        return outs

    def activation(self, outs: list[str], act: str) -> list[str]:
        """A fused activation written after its kernel (plain ONNX has no fused form)."""
        if act == "none":
            return outs
        form = ACTIVATIONS[act]
        return self.node(form.op_type, outs + [self.init(p) for p in form.params])

    def fused(self, op_type: str, ins: list[str], act: str, **attrs: Any) -> list[str]:
        """onnxruntime's kernel ``op_type`` (FusedConv, FusedGemm) with activation ``act``."""
        form = ACTIVATIONS[act]
        params = {"activation_params": list(form.params)} if form.params else {}
        return self.node(op_type, ins, domain=FUSED_DOMAIN, activation=form.op_type, **params, **attrs)


Exporter = Callable[[_Writer, Node, list[str], dict[str, Any]], list[str]]


def _conv_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """A conv; with a fused activation, Conv then the activation (standard ONNX: every runtime
    fuses the pair), or onnxruntime's FusedConv (one kernel, as the cost model priced it) when
    the writer targets onnxruntime."""
    pads = _explicit_pads(a["pad"], n.inputs[0].shape, n.inputs[1].shape[2:], a["stride"], a["dilation"])
    conv = {"strides": list(a["stride"]), "pads": pads, "dilations": list(a["dilation"]), "group": a["groups"]}
    if a["act"] != "none" and w.contrib:
        return w.fused("FusedConv", ins, a["act"], **conv)
    return w.activation(w.node("Conv", ins, **conv), a["act"])


def _matmul_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """A product then its activation; for onnxruntime, a 2-D one with a fused activation is its
    FusedGemm (one kernel)."""
    if a["act"] != "none" and len(n.shape) == 2 and w.contrib and not ACTIVATIONS[a["act"]].params:
        return w.fused("FusedGemm", ins, a["act"])  # (its CPU kernel takes no Clip bounds)
    return w.activation(w.node("MatMul", ins), a["act"])


def _channel_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """chadd/chmul/affine: one BatchNormalization (mean 0, variance 1) for an affine along axis 1,
    else Mul/Add with each vector reshaped to broadcast along its axis."""
    axis, rank = a["axis"], len(n.shape)
    if n.op == "affine" and axis == 1:
        c = n.shape[1]
        return w.node("BatchNormalization", ins + [w.init(np.zeros(c)), w.init(np.ones(c))], epsilon=0.0)
    trailing = rank - axis - 1  # along the last axis a vector broadcasts as it is: no Reshape
    shaped = [w.node("Reshape", [vec, w.ints([-1] + [1] * trailing)])[0] if trailing else vec for vec in ins[1:]]
    if n.op == "affine":
        return w.node("Add", [w.node("Mul", [ins[0], shaped[0]])[0], shaped[1]])
    return w.node("Add" if n.op == "chadd" else "Mul", [ins[0], shaped[0]])


def _pool_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    pads = _explicit_pads(a["pad"], n.inputs[0].shape, a["kernel"], a["stride"], (1, 1))
    extra = {"count_include_pad": 1} if n.op == "pool_avg" else {}
    return w.node("AveragePool" if n.op == "pool_avg" else "MaxPool", ins, kernel_shape=list(a["kernel"]),
                  strides=list(a["stride"]), pads=pads, **extra)


def _gelu_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """One kernel: ONNX's Gelu from opset 20, onnxruntime's contrib Gelu before when the writer
    targets onnxruntime; otherwise the exporters' erf form, which onnxruntime fuses into that kernel."""
    if w.opset >= 20:
        return w.node("Gelu", ins)
    if w.contrib:
        return w.node("Gelu", ins, domain=FUSED_DOMAIN)
    inner = w.node("Erf", w.node("Mul", ins + [w.init(1.0 / np.sqrt(2.0))]))
    half = w.node("Mul", ins + [w.init(0.5)])
    return w.node("Mul", half + w.node("Add", inner + [w.init(1.0)]))


def _opaque_out(w: _Writer, n: Node, ins: list[str], a: dict[str, Any]) -> list[str]:
    """The stored ONNX node again; the outputs of one node (same node, same inputs) share it."""
    key = (a["node"], tuple(ins))
    if key not in w.opaque_outputs:
        stored = w.onnx.GraphProto()
        stored.ParseFromString(bytes.fromhex(a["node"]))
        proto = stored.node[0]
        if proto.domain not in ("", "ai.onnx"):  # an imported contrib op is written back in its domain
            w.domains.add(proto.domain)
        rename = {vi.name: x for vi, x in zip(stored.input, ins)}
        for c in stored.initializer:
            rename[c.name] = c.name = w.fresh()
            w.inits.append(c)
        renamed = [rename.get(i, i) for i in proto.input]
        del proto.input[:]
        proto.input.extend(renamed)
        rename_subgraph_reads(proto, rename)  # what its subgraphs read from the enclosing graph
        outs = [w.fresh() for _ in proto.output]
        del proto.output[:]
        proto.output.extend(outs)
        w.nodes.append(proto)
        w.opaque_outputs[key] = outs
    return [w.opaque_outputs[key][a["index"]]]


EXPORTERS: dict[str, Exporter] = {
    "conv2d": _conv_out,
    "matmul": _matmul_out,
    "ewadd": lambda w, n, ins, a: w.node("Add", ins),
    "ewmul": lambda w, n, ins, a: w.node("Mul", ins),
    "smul": lambda w, n, ins, a: w.node("Mul", ins),
    "sadd": lambda w, n, ins, a: w.node("Add", ins),
    "softmax": lambda w, n, ins, a: w.node("Softmax", ins, axis=a["axis"]),
    "layernorm": lambda w, n, ins, a: w.node("LayerNormalization", ins, axis=a["axis"], epsilon=a["epsilon"]),
    "erf": lambda w, n, ins, a: w.node("Erf", ins),
    "gelu": _gelu_out,
    **{act: (lambda w, n, ins, a, _act=act: w.activation(ins, _act)) for act in ACTIVATIONS},
    "chadd": _channel_out, "chmul": _channel_out, "affine": _channel_out,
    "transpose": lambda w, n, ins, a: w.node("Transpose", ins, perm=list(a["perm"])),
    "pad": lambda w, n, ins, a: w.node("Pad", ins + [w.ints(a["pads"])]),
    "reshape": lambda w, n, ins, a: w.node("Reshape", ins + [w.ints(a["shape"])]),
    "concat": lambda w, n, ins, a: w.node("Concat", ins, axis=a["axis"]),
    "split": lambda w, n, ins, a: w.node("Split", ins + [w.ints(a["sizes"])], len(a["sizes"]), axis=a["axis"]),
    "pool_avg": _pool_out, "pool_max": _pool_out,
    "opaque": _opaque_out,
    **_DYNAMO_OP_EXPORTERS,
}
"""IR op -> writer of its ONNX nodes (returns the names of the op's outputs). ``proj`` and ``noop``
only rename, and leaves are graph inputs or initializers."""


def save(imported: Imported, graph: Graph, path: str | Path, dtype: str = "float32", contrib: bool = False,
         external_data: bool = False) -> None:
    """Write ``graph`` (the import's structure, or an optimized one) as an ONNX model whose float
    tensors are ``dtype`` (float64 checks models whose float32 outputs overflow; opaque nodes
    keep the types they were imported with). Standard ONNX only, unless ``contrib``: then a fused
    IR op is onnxruntime's contrib kernel (FusedConv, FusedGemm, Gelu), for files that target
    onnxruntime alone. ``external_data``: the large tensors' data go to ``<path>.data`` beside
    it (:func:`write_model`), for files that are timed, not handed to a user."""
    if dtype not in _FLOAT_TYPES:
        raise OnnxError(f"{path}: dtype must be one of {', '.join(_FLOAT_TYPES)}, got {dtype!r}")
    np_float, onnx_float = _FLOAT_TYPES[dtype]
    onnx = _onnx()
    h = onnx.helper
    w = _Writer(onnx, {x.attr("name") for x in graph.leaves()} | set(imported.output_names), np_float,
                imported.opset, contrib)
    names: dict[Node, list[str]] = {}
    # weight-only subgraphs fold: only the constants a kernel (or an output) reads become
    # initializers, each computed from the imported data as it is written (folded_constant)
    needed = {x for n in graph.nodes() if not n.is_const for x in n.inputs if x.is_const}
    needed |= {o for o in graph.outputs if o.is_const}
    gemms = gemm_pairs(graph)
    in_gemm = set(gemms.values())
    read_parts = parts_read(graph)
    products, folded = batched_products(graph)
    for n in graph.nodes():
        if n in in_gemm or n in folded:
            continue  # written as part of its Gemm, or of its N-D MatMul
        if n in gemms:
            mm = gemms[n]
            names[n] = w.node("Gemm", [names[x][0] for x in mm.inputs] + [names[n.inputs[1]][0]])
        elif n.op == "input":
            names[n] = [n.attr("name")]
        elif n.is_const:
            if n in needed:
                # a weight read as is: no copy
                data = imported.weights[n.attr("name")] if n.op == "weight" else folded_constant(imported, n)
                names[n] = [w.init(data, name=n.attr("name") if n.op == "weight" else None)]
        elif n.op == "proj":
            names[n] = [names[n.inputs[0]][n.attr("index")]]
        elif n.op == "noop":
            names[n] = [names[x][0] for x in n.inputs]
        elif n in products:
            mm = products[n]
            names[n] = _matmul_out(w, mm, [names[mm.inputs[0].inputs[0]][0], names[mm.inputs[1]][0]], mm.attr_dict)
        elif n.op == "split" and len(read_parts.get(n, ())) < len(n.attr("sizes")):
            names[n] = _split_as_slices(w, names[n.inputs[0]][0], n.attr_dict, read_parts.get(n, set()))
        elif n.op in EXPORTERS:
            names[n] = EXPORTERS[n.op](w, n, [names[x][0] for x in n.inputs], n.attr_dict)
        else:
            raise OnnxError(f"{path}: cannot export op {n.op} (node {n}); EXPORTERS has no entry for it")
    declared = _stored_input_types(onnx, graph)
    own = {t for t in imported.elem_types.values() if t in _FLOAT_ELEM_TYPES}
    mixed = len(own) > 1  # float32 in, float64 out (an opaque Cast): each keeps the type it had

    def elem_type(name: str) -> int:
        """The imported element type (else the one a stored node reading it declares: a graph
        built from an import, e.g. a kernel timed alone, keeps int64 token ids), a float one in
        the export's float width (ints, bools stay)."""
        t = imported.elem_types.get(name, declared.get(name, 1))
        if mixed and name in imported.elem_types:
            return t
        return onnx_float if t in _FLOAT_ELEM_TYPES else t

    _name_outputs(w, [names[o][0] for o in graph.outputs], list(imported.output_names))
    outputs = [h.make_tensor_value_info(name, elem_type(name), list(o.shape))
               for name, o in zip(imported.output_names, graph.outputs)]
    inputs = [h.make_tensor_value_info(n.attr("name"), elem_type(n.attr("name")), list(n.shape))
              for n in graph.leaves("input")]
    opsets = [h.make_opsetid("", imported.opset)] + [h.make_opsetid(d, 1) for d in sorted(w.domains)]
    model = h.make_model(h.make_graph(w.nodes, graph.name or "eqsat", inputs, outputs, w.inits),
                         opset_imports=opsets)
    checked = onnx.ModelProto()
    checked.CopyFrom(model)  # no large tensor: they are not in the proto yet
    checked.graph.input.extend(h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
                               for name, a in w.large)
    onnx.checker.check_model(skeleton(checked))
    replace_atomic(path, lambda tmp: write_model(model, w.large, tmp, external=Path(path).name + ".data"
                                                 if external_data else None))


def _split_as_slices(w: _Writer, x: str, a: dict[str, Any], read: set[int]) -> list[str]:
    """A split the graph reads only some parts of, as one Slice per part read ("" for the rest).
    A Split writes every part: the importer reads each of three Slices of a packed QKV tensor as
    a split that keeps one part, and written as three Splits they copied the tensor three times
    (MobileViT-S's 27 Slices, written back as 27 Splits, ran 6.5% slower in onnxruntime)."""
    bounds = np.cumsum((0, *a["sizes"]))
    return [w.node("Slice", [x, w.ints([bounds[k]]), w.ints([bounds[k + 1]]), w.ints([a["axis"]])])[0]
            if k in read else "" for k in range(len(a["sizes"]))]


PROTO_LIMIT = 2**31 - 1  # bytes a protobuf message (an ONNX file with its weights inline) may hold


def folded_constant(imported: Imported, n: Node) -> Any:
    """The value (float64) of the weight-only node ``n``, evaluated alone from the imported data
    as the writer reaches it: its copy in the file's type is kept, this one goes, and so do the
    float64 copies of the weights it read. Evaluated all at once, a BERT whose Q/K/V weights are
    concatenated held every weight it read and every concatenation in float64 (0.25 GB). A
    subgraph two folded constants share is evaluated for each (to the same values)."""
    return evaluate_nodes(Graph((n,)), imported.weights, release=True)[n]


def write_model(model: Any, large: list[tuple[str, np.ndarray]], path: str | Path, external: str | None = None) -> None:
    """Write ``model`` with the initializers ``large`` (name, array) added to its graph, one
    tensor at a time: the serialized file is never held in memory (for a 440 MB BERT, building
    the whole proto and serializing it held three more copies of the weights and took seconds).
    Inline (``external`` None) the bytes are those of ``onnx.save`` of the model with the tensors
    as raw-data initializers at the end of its graph (protobuf reads fields in any order);
    with ``external`` (a file name beside ``path``) the tensors' data go to that file, which
    onnxruntime maps instead of copying (the files :func:`~eqsat.cost.measured.timer.export_for_timing`
    writes: a session's memory and load time then do not grow with the weights)."""
    onnx = _onnx()
    graph_number = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
    init_number = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
    raw_number = onnx.TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number
    heads = []
    data_file = None
    offset = 0
    try:
        if external is not None:
            data_file = open(Path(path).parent / external, "wb")  # noqa: SIM115 - closed below
        for name, array in large:
            tensor = onnx.TensorProto(name=name, dims=list(array.shape),
                                      data_type=onnx.helper.np_dtype_to_tensor_dtype(array.dtype))
            nbytes = array.size * array.dtype.itemsize
            if data_file is not None:
                _write_array(data_file, array)
                for key, value in (("location", external), ("offset", str(offset)), ("length", str(nbytes))):
                    tensor.external_data.add(key=key, value=value)
                tensor.data_location = onnx.TensorProto.EXTERNAL
                offset += nbytes
                heads.append((tensor.SerializeToString(), None))
            else:
                heads.append((tensor.SerializeToString(), array))
    finally:
        if data_file is not None:
            data_file.close()
    body = [(head + (_field(raw_number, a.size * a.dtype.itemsize) if a is not None else b""), a) for head, a in heads]
    entries = [(_field(init_number, len(head) + (a.size * a.dtype.itemsize if a is not None else 0)), head, a)
               for head, a in body]
    graph_bytes = model.graph.SerializeToString()
    graph_size = len(graph_bytes) + sum(len(key) + len(head) + (a.size * a.dtype.itemsize if a is not None else 0)
                                        for key, head, a in entries)
    rest = onnx.ModelProto()
    rest.CopyFrom(model)
    rest.ClearField("graph")
    head = rest.SerializeToString()
    total = len(head) + len(_field(graph_number, graph_size)) + graph_size
    if total > PROTO_LIMIT:
        raise OnnxError(f"{path}: {total} bytes exceed the 2 GB an ONNX file holds inline")
    with open(path, "wb") as f:
        f.write(head)
        f.write(_field(graph_number, graph_size))
        f.write(graph_bytes)
        for key, tensor_head, array in entries:
            f.write(key)
            f.write(tensor_head)
            if array is not None:
                _write_array(f, array)
                release_mapped()  # an imported weight is a mapped file: its pages read for this go back


def _write_array(f: Any, array: np.ndarray) -> None:
    """An array's bytes, little-endian, in row-major order (a broadcast a block of rows at a time)."""
    array = array.astype(array.dtype.newbyteorder("<"), copy=False)
    if array.flags.c_contiguous:
        f.write(memoryview(array.reshape(-1)).cast("B"))
        return
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(1, -1)
    step = max(1, (16 << 20) // max(rows[0].nbytes, 1))
    for start in range(0, len(rows), step):
        f.write(np.ascontiguousarray(rows[start:start + step]).tobytes())


_LAYOUT_ONLY = ("reshape", "transpose")  # ops that move a tensor's elements and keep their type


def _source_input(x: Node) -> Node | None:
    """The graph input ``x`` is, through layout-only ops (GPT-2's token ids are reshaped before
    their Gather), else None."""
    while x.op in _LAYOUT_ONLY:
        x = x.inputs[0]
    return x if x.op == "input" else None


def _stored_input_types(onnx: Any, graph: Graph) -> dict[str, int]:
    """Graph input name -> the element type an opaque node reading it (directly or through
    layout-only ops) declares for that input."""
    out: dict[str, int] = {}
    for n in graph.nodes():
        sources = [_source_input(x) for x in n.inputs] if n.op == "opaque" else []
        if not any(sources):
            continue
        stored = onnx.GraphProto()
        stored.ParseFromString(bytes.fromhex(n.attr("node")))
        for source, vi in zip(sources, stored.input):
            if source is not None:
                out.setdefault(source.attr("name"), vi.type.tensor_type.elem_type)
    return out




def _name_outputs(w: _Writer, values: list[str], names: list[str]) -> None:
    """Give each output its model's name: the node that computes it writes it under that name
    (renamed where it is read), so no Identity is left per output for the runtime to run; an
    output that is an input, an initializer or another output's value gets its Identity."""
    produced = {out for n in w.nodes for out in n.output}
    rename: dict[str, str] = {}
    for value, name in zip(values, names):
        if value == name:
            continue
        if value in produced and value not in rename:
            rename[value] = name
        else:
            w.nodes.append(w.h.make_node("Identity", [rename.get(value, value)], [name]))
    if not rename:
        return
    for n in w.nodes:
        for field in (n.input, n.output):
            renamed = [rename.get(x, x) for x in field]
            del field[:]
            field.extend(renamed)
        rename_subgraph_reads(n, rename)




_FLOAT_ELEM_TYPES = {1, 10, 11, 16}  # float, float16, double, bfloat16


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
                 seed: int = 0, dtype: str = "float32", contrib: bool = False, external_data: bool = False) -> Imported:
    """Write a graph built in Python (e.g. a benchmark builder's) as an ONNX model, with
    ``weights`` or :func:`random_weights` (``contrib``, ``external_data``: see :func:`save`); returns the
    :class:`Imported` it was written from."""
    data = weights if weights is not None else random_weights(graph, seed)
    missing = [w.attr("name") for w in graph.leaves("weight") if w.attr("name") not in data]
    if missing:
        raise OnnxError(f"{path}: no data for weight(s) {', '.join(missing)}")
    opset = max([OPSET] + [n.attr("opset") for n in graph.nodes() if n.op == "opaque"])  # a stored node's own
    imported = Imported(graph, data, [x.attr("name") for x in graph.leaves("input")],
                        [f"output{i}" for i in range(len(graph.outputs))], opset=opset)
    save(imported, graph, path, dtype, contrib, external_data)
    return imported
