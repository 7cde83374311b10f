"""The PyTorch executor: every op-table row's torch column equals its NumPy reference, and whole
graphs run as modules equal to the NumPy evaluator (float32 against float64)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eqsat.errors import ShapeError, UnsupportedError  # noqa: E402
from eqsat.ir.domains import FLOAT  # noqa: E402
from eqsat.ir.evaluate import evaluate, evaluate_nodes, random_leaves  # noqa: E402
from eqsat.ir.graph import Graph, input_, node, weight  # noqa: E402
from eqsat.ir.ops import OP_TABLE, OpSpec, register, unregister  # noqa: E402
from eqsat.models import build as build_model  # noqa: E402
from eqsat.pytorch.module import example_inputs, to_module  # noqa: E402
from tests.conftest import resnet_steps  # noqa: E402
from tests.test_ops import EXAMPLES, _graph  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
"""float32 against float64: |torch - numpy| <= RTOL * |numpy| + ATOL * max(1, max |numpy|)."""


def close(got, want, op: str = "") -> float:
    """The largest error in units of the tolerance (<= 1 passes); NaN where both are NaN counts as equal."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(nan, np.isnan(got)), "NaN in one result only"
    if nan.all():
        return 0.0
    g, w = got[~nan], want[~nan]
    assert np.array_equal(np.isinf(g), np.isinf(w)) and np.array_equal(g[np.isinf(g)], w[np.isinf(w)])
    fin = np.isfinite(w)
    if not fin.any():
        return 0.0
    g, w = g[fin], w[fin]
    scale = max(1.0, float(np.abs(w).max()))
    if op:
        DIFF[op] = max(DIFF.get(op, 0.0), float(np.abs(g - w).max()) / scale)
    return float((np.abs(g - w) / (RTOL * np.abs(w) + ATOL * scale)).max())


def _structural(op: str):
    """A graph around the rows tests/test_ops.py leaves to structure: leaves, proj, noop."""
    if op in ("input", "weight"):
        leaf = node(op, name="x0", shape=(3, 4))
        return Graph((leaf,)), [(3, 4)], leaf.op == "weight"
    a, b = input_("x0", (3, 5)), input_("x1", (2, 2))
    if op == "proj":
        parts = node("split", a, axis=1, sizes=(2, 3))
        return Graph(tuple(node("proj", parts, index=i) for i in range(2))), [(3, 5), (2, 2)], False
    assert op == "noop", f"op {op!r} has no example in tests/test_ops.py's EXAMPLES"
    tied = node("noop", a, b)
    return Graph(tuple(node("proj", tied, index=i) for i in range(2))), [(3, 5), (2, 2)], False


def _leafy(op, shapes, attrs, kind):
    xs = [node(kind, name=f"x{i}", shape=tuple(s)) for i, s in enumerate(shapes)]
    return _graph(node(op, *xs, **attrs))


@pytest.fixture(scope="module", autouse=True)
def report_worst_errors(request):
    """After this file's tests, one line: the worst error per op (shown where pytest has a terminal)."""
    yield
    terminal = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if WORST and terminal is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            terminal.write_line("\nworst error per op: tolerance units, max |torch - numpy| / max(1, max |numpy|): "
                                + ", ".join(f"{k} {v:.2g} {DIFF.get(k, 0.0):.2g}" for k, v in sorted(WORST.items())))


WORST: dict[str, float] = {}
"""The worst error per op, in tolerance units."""
DIFF: dict[str, float] = {}
"""The largest |torch - numpy| / max(1, max |numpy|) per op."""


@pytest.mark.parametrize("op", sorted(set(OP_TABLE) - {"opaque"}))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_op_row_in_pytorch_equals_numpy(op, data):
    spec = OP_TABLE[op]
    assert spec.torch is not None, f"op {op!r} has no torch column"
    examples = [e for e in EXAMPLES if e[0] == op]
    if examples:
        _, shapes, attrs = data.draw(st.sampled_from(examples))
        as_weights = data.draw(st.booleans())  # weights: the node is folded at construction, in float64
        graph = _leafy(op, shapes, attrs, "weight" if as_weights else "input")
    else:
        graph, shapes, as_weights = _structural(op)
    seed = data.draw(st.integers(0, 2**16))
    scale = data.draw(st.sampled_from([0.1, 1.0, 5.0]))
    rng = np.random.default_rng(seed)
    values = {f"x{i}": rng.uniform(-scale, scale, s) for i, s in enumerate(shapes)}
    want = evaluate_nodes(graph, values, FLOAT)
    module = to_module(graph, values)
    inputs = [torch.as_tensor(values[n], dtype=torch.float32) for n in module.input_names]
    got = module(*inputs)
    worst = max(close(g.numpy(), want[o], op) for g, o in zip(got, graph.outputs))
    if torch.cuda.is_available():  # the same node on the GPU (cuDNN's TF32 off: float32 means float32 here)
        torch.backends.cudnn.allow_tf32 = False
        module = to_module(graph, values, device="cuda")
        got = module(*(x.cuda() for x in inputs))
        worst = max(worst, *(close(g.cpu().numpy(), want[o], op) for g, o in zip(got, graph.outputs)))
    WORST[op] = max(WORST.get(op, 0.0), worst)
    assert worst <= 1.0, f"{op}: error {worst:.3g} tolerances"


@pytest.fixture(scope="module")
def token_model(tmp_path_factory):
    """An ONNX model whose Gather of int64 ids stays opaque (GPT-2's token embedding) and whose Sin has
    no importer (run on the host)."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from eqsat.onnx import load

    table = np.random.default_rng(0).normal(size=(11, 6)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0), helper.make_node("Sin", ["e"], ["y"])],
        "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 6])], [numpy_helper.from_array(table, "table")])
    path = tmp_path_factory.mktemp("onnx") / "tokens.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return load(str(path))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.integers(-11, 10), min_size=6, max_size=6))
def test_opaque_gather_runs_in_torch_and_the_rest_on_the_host(token_model, ids):
    graph = token_model.graph
    assert sorted(n.attr("op_type") for n in graph.nodes() if n.op == "opaque") == ["Gather", "Sin"]
    values = dict(token_model.weights, ids=np.asarray(ids, dtype=np.float64).reshape(2, 3))
    module = to_module(graph, values)
    assert module.host_ops == ("Sin",)
    got = module(torch.as_tensor(values["ids"], dtype=torch.float32))
    err = close(got[0].numpy(), evaluate(graph, values)[0], "opaque")
    WORST["opaque"] = max(WORST.get("opaque", 0.0), err)
    assert err <= 1.0


@pytest.mark.parametrize("name,params", [("bert", dict(seq=8, hidden=32, heads=2, layers=2)),
                                         ("resnet_block", dict(n=2, c=8, hw=8)),
                                         ("squeezenet", dict(image=64, classes=10)),
                                         ("nasrnn", dict(hidden=16))])
def test_a_benchmark_graph_runs_as_a_module_equal_to_numpy(name, params):
    graph = build_model(name, **params)
    module = to_module(graph, seed=3)
    got = module(*example_inputs(graph, seed=3))
    want = evaluate(graph, random_leaves(graph, 3))
    assert len(got) == len(want) and max(close(g.numpy(), w) for g, w in zip(got, want)) <= 1.0
    assert all(isinstance(b, torch.Tensor) for b in module.buffers()) and len(list(module.buffers())) > 0


def test_an_optimized_graph_gives_the_original_outputs_and_folds_its_weights_once(monkeypatch):
    steps = resnet_steps(n=2, c=8, hw=8)
    calls = []
    for op in ("concat", "enlarge"):
        spec = OP_TABLE[op]
        counted = (lambda t, attrs, xs, _f=spec.torch, _op=op: calls.append(_op) or _f(t, attrs, xs))
        monkeypatch.setitem(OP_TABLE, op, dataclasses.replace(spec, torch=counted))
    original, merged = to_module(steps["original"]), to_module(steps["merged"])
    assert sorted(calls) == ["concat", "enlarge"] and merged.folded == 1  # concat(w1, enlarge(w3)): one buffer
    xs = example_inputs(steps["original"])
    for _ in range(3):
        a, b = original(*xs), merged(*xs)
    assert sorted(calls) == ["concat", "enlarge"], "the weights were concatenated again per call"
    assert torch.allclose(a[0], b[0], rtol=1e-4, atol=1e-5)
    assert merged.steps < original.steps + 2  # two convs, split parts as views, add, relu


def test_half_precision_runs_and_bad_requests_get_one_sentence():
    graph = build_model("bert", seq=8, hidden=32, heads=2, layers=1)
    want = evaluate(graph, random_leaves(graph, 0))[0]
    for dtype in ("bfloat16", "float16"):
        got = to_module(graph, dtype=dtype)(*example_inputs(graph, dtype=dtype))[0].float().numpy()
        assert np.abs(got - want).max() <= 0.05 * max(1.0, np.abs(want).max())
    with pytest.raises(UnsupportedError, match="dtype 'int8' is not supported"):
        to_module(graph, dtype="int8")
    module = to_module(graph)
    with pytest.raises(ShapeError, match="must be a torch.float32 tensor of shape"):
        module(torch.zeros(3, 3))
    register(OpSpec(name="toy_no_torch", arity=1, attrs=(), shape=lambda attrs, ins: (ins[0],),
                    evaluate=lambda attrs, xs, domain: xs[0]))
    try:
        with pytest.raises(UnsupportedError, match="'toy_no_torch' has no PyTorch form"):
            to_module(Graph((node("toy_no_torch", input_("x", (2,))),)))
    finally:
        unregister("toy_no_torch")
    if not torch.cuda.is_available():
        with pytest.raises(UnsupportedError, match="no CUDA device"):
            to_module(graph, device="cuda")


def test_view_ops_are_views_of_their_input():
    x = input_("x", (4, 6))
    parts = node("split", x, axis=1, sizes=(2, 4))
    outs = (node("reshape", x, shape=(6, 4)), node("proj", parts, index=1), node("expand", x, shape=(3, 4, 6)),
            node("slice", x, starts=(1, 0), ends=(4, 6), steps=(2, 3)), node("transpose", x))
    module = to_module(Graph(outs))
    (inp,) = example_inputs(Graph(outs))
    assert module.steps == 6  # the split once, its part read by proj
    for out in module(inp):
        assert out.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr()


def test_dynamo_traces_a_module_whole():
    """One graph, no breaks (fullgraph): forward has no data-dependent control flow or host sync;
    gather's device constant included."""
    x = input_("x", (4, 8))
    h = node("matmul", x, node("transpose", weight("w", (8, 8))), act="relu")
    out = node("gather", node("softmax", h), axis=1, indices=(0, 7, 7), index_shape=(3,))
    graph = Graph((out, node("reshape", h, shape=(32,))))
    module = to_module(graph)
    xs = example_inputs(graph)
    compiled = torch.compile(module, backend="eager", fullgraph=True)
    for g, w in zip(compiled(*xs), module(*xs)):
        assert torch.equal(g, w)


@pytest.mark.slow
def test_inductor_compiles_a_module():  # about 30 s of C++ compilation on this CPU
    graph = build_model("resnet_block", n=1, c=4, hw=6)
    module = to_module(graph)
    xs = example_inputs(graph)
    assert torch.allclose(torch.compile(module)(*xs)[0], module(*xs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_module_is_captured_in_a_cuda_graph():
    graph = build_model("bert", seq=8, hidden=32, heads=2, layers=2)
    module = to_module(graph, device="cuda")
    xs = example_inputs(graph, device="cuda")
    want = module(*xs)  # warm-up outside capture (cuBLAS handles, gather constants)
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        outs = module(*xs)
    cuda_graph.replay()
    torch.cuda.synchronize()
    assert all(torch.allclose(o, w, rtol=1e-4, atol=1e-5) for o, w in zip(outs, want))


def test_the_package_imports_without_the_search_dependencies():
    """eqsat.pytorch runs on a bare CUDA machine: numpy, onnx and torch only."""
    code = ("import sys\n"
            "for m in ('egglog', 'highspy', 'xgboost', 'scipy', 'networkx', 'matplotlib'): sys.modules[m] = None\n"
            "from eqsat.pytorch.module import to_module, example_inputs\n"
            "from eqsat.models import build\n"
            "g = build('bert', seq=4, hidden=16, heads=2, layers=1)\n"
            "print(to_module(g)(*example_inputs(g))[0].shape)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "torch.Size([4, 16])" in done.stdout


def module_inputs(graph):
    return sorted({leaf.attr("name") for leaf in graph.leaves("input")})


@pytest.mark.parametrize("name", ["gpt2", "llama_block", "mobilenet_v3_small"])
def test_a_zoo_model_runs_as_a_module_equal_to_numpy(name, tmp_path):
    """Exporter-shaped ONNX files: GPT-2's token Gather (opaque) runs in torch, nothing on the host."""
    pytest.importorskip("onnxruntime")
    from eqsat.onnx import load
    from experiments.zoo import ZOO

    imp = load(str(ZOO[name].write(tmp_path / f"{name}.onnx", seed=0, small=True)))
    values = random_leaves(imp.graph, 0) | dict(imp.weights)  # the file's weights, random inputs
    rng = np.random.default_rng(1)
    for n in module_inputs(imp.graph):
        if imp.elem_types.get(n) == 7:  # int64 token ids: real ones, not the floats' truncation to 0
            values[n] = rng.integers(0, 8, values[n].shape).astype(np.float64)
    module = to_module(imp.graph, values)
    assert module.host_ops == () and module.input_names == tuple(module_inputs(imp.graph))
    got = module(*(torch.as_tensor(values[n], dtype=torch.float32) for n in module.input_names))
    want = evaluate(imp.graph, values)
    assert max(close(g.numpy(), w) for g, w in zip(got, want)) <= 1.0


RESIZES = [  # (attributes, scales, sizes, runs in torch): the forms eqsat.ir.opaque_torch computes, one it does not
    (dict(mode="linear"), None, [1, 2, 9, 5], True),  # MobileViT's: half-pixel bilinear to given sizes
    (dict(mode="linear", coordinate_transformation_mode="align_corners"), [1, 1, 2.0, 1.5], None, True),
    (dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"), [1, 1, 2.0, 3.0],
     None, True),
    (dict(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"), None,
     [1, 2, 3, 13], True),
    (dict(mode="cubic"), [1, 1, 2.0, 2.0], None, False),
]


@pytest.mark.parametrize("attrs,scales,sizes,in_torch", RESIZES)
def test_opaque_gather_elements_and_resize_run_in_torch_as_in_onnxruntime(tmp_path, attrs, scales, sizes, in_torch):
    """BERT's GatherElements and MobileViT's Resize run in PyTorch (no host op) and equal onnxruntime;
    a Resize PyTorch does not compute the same way stays on the host."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from eqsat.onnx import load

    idx = np.array([[0, -1, 2, 1, 3, -4], [5, 0, -6, 2, 2, 4]], dtype=np.int64)  # negatives count from the end
    inits = [numpy_helper.from_array(idx.reshape(1, 2, 1, 6).repeat(7, axis=2), "idx")]
    names = ["g", "", "", ""]
    for k, (name, value, dtype) in enumerate((("scales", scales, np.float32), ("sizes", sizes, np.int64)), start=2):
        if value is not None:
            inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
            names[k] = name
    out = [1, 2] + ([int(np.floor(d * s)) for d, s in zip((7, 6), scales[2:])] if scales else sizes[2:])
    graph = helper.make_graph(
        [helper.make_node("GatherElements", ["x", "idx"], ["g"], axis=3),
         helper.make_node("Resize", names, ["y"], **attrs)],
        "gather_resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 7, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    path = tmp_path / "gather_resize.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    imp = load(str(path))
    assert sorted(n.attr("op_type") for n in imp.graph.nodes() if n.op == "opaque") == ["GatherElements", "Resize"]
    values = random_leaves(imp.graph, 2) | dict(imp.weights)
    module = to_module(imp.graph, values)
    assert module.host_ops == (() if in_torch else ("Resize",))
    got = module(torch.as_tensor(values["x"], dtype=torch.float32))
    want = evaluate(imp.graph, values)
    assert got[0].shape == tuple(out) and close(got[0].numpy(), want[0]) <= 1.0


def test_a_module_in_channels_last_computes_the_same_and_returns_contiguous_outputs():
    steps = resnet_steps(n=2, c=8, hw=8)
    graph = steps["merged"]
    nchw, nhwc = to_module(graph), to_module(graph, layout="channels_last")
    assert nhwc.layout == "channels_last" and "layout=channels_last" in repr(nhwc)
    four_d = [b for b in nhwc.buffers() if b.dim() == 4]
    assert four_d and all(b.is_contiguous(memory_format=torch.channels_last) and not b.is_contiguous()
                          for b in four_d)
    xs = example_inputs(graph)
    (a,), (b,) = nchw(*xs), nhwc(*xs)
    assert b.is_contiguous() and torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    assert xs[0].is_contiguous()  # the caller's input is not changed
    with pytest.raises(UnsupportedError, match=r"^memory format 'nhwc' is not supported .*channels_last"):
        to_module(graph, layout="nhwc")
