"""Fuzzing the user-facing inputs (hypothesis): rule files, device files, ONNX models and graphs.

Every case goes through the CLI (``experiments.cli.main``) as a user would, and must end in
exit 0, or in exit 2 with one line on stderr that names the input; never a traceback, never
exit 3 (an internal error), never a partial output file. Optimized graphs must be equivalent
(each search's own final check; ONNX files are re-run in onnxruntime here). The number of
examples scales with ``EQSAT_FUZZ_SCALE`` (default 1: a CI-sized run; the nightly run is
``python -m experiments.runs.bench_fuzz``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.cli import main

SCALE = max(int(os.environ.get("EQSAT_FUZZ_SCALE", "1")), 1)


def fuzz(examples: int):
    return settings(max_examples=examples * SCALE, deadline=None, derandomize=SCALE == 1,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def run_cli(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean(code: int, err: str, names: tuple[str, ...]) -> None:
    """Exit 0, or exit 2 with one error line naming one of ``names``; never a traceback."""
    assert "Traceback" not in err
    assert code in (0, 2), f"exit {code}: {err}"
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.startswith("eqsat-lab")]
        assert lines, err
        assert any(n in lines[-1] for n in names), f"error does not name its input: {lines[-1]}"


# --------------------------------------------------------------------------- rule files
SHIPPED = (Path(__file__).parents[1] / "eqsat" / "rules" / "matrix.min.rules").read_text().splitlines()
TOKENS = ["(", ")", "?A", "?B", "matmul", "ewadd", "transpose", "<=>", "=>", ";", "vars=", "A:?x?", "B:zz",
          ":axis", "1", "-1", "\"", "#", "relu", "concat", "enlarge", ":size [3 3]", "\n", " ", ","]


@st.composite
def rule_texts(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.sampled_from([ln for ln in SHIPPED if ln.strip()][:60]), min_size=0, max_size=4))
    text = "\n".join(lines)
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        tok = draw(st.sampled_from(TOKENS))
        if kind == "insert":
            text = text[:pos] + tok + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 8)):]
        else:
            text = text[:pos] + tok + text[pos + len(tok):]
    return text


@fuzz(40)
@given(text=rule_texts())
def test_rule_files_parse_or_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture, text: str) -> None:
    path = tmp_path / "fuzz.rules"
    path.write_text(text)
    code, _, err = run_cli(capsys, ["rules", "check", str(path)])
    assert_clean(code, err, (str(path),))


# --------------------------------------------------------------------------- device files
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**16),
                    st.text(max_size=3), st.none(), st.booleans())


@st.composite
def device_texts(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:  # not JSON at all, or cut short
        return draw(st.sampled_from(["", "{", "{\"name\": 1,}", "[1, 2]", "null", "{\"peak_flops\": 1e15"]))
    fields = {"name": draw(st.one_of(st.text(max_size=5), st.integers())),
              "peak_flops": draw(NUMBERS), "bandwidth": draw(NUMBERS), "launch_us": draw(NUMBERS)}
    for key in draw(st.lists(st.sampled_from(list(fields)), max_size=2)):
        fields.pop(key, None)
    if draw(st.booleans()):
        fields["extra"] = 1
    return json.dumps(fields)  # NaN and Infinity become the non-standard tokens Python reads back


@fuzz(40)
@given(text=device_texts())
def test_device_files_price_finitely_or_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                      text: str) -> None:
    path = tmp_path / "dev.json"
    path.write_text(text)
    code, out, err = run_cli(capsys, ["cost", "qkv", "--param", "batch=2", "--param", "d_model=8",
                                      "--device", str(path)])
    assert_clean(code, err, (str(path), "dev.json"))
    if code == 0:
        assert "nan" not in out.lower() and "inf" not in out.lower(), out


# --------------------------------------------------------------------------- ONNX models
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DTYPES = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.DOUBLE: np.float64}


@st.composite
def onnx_models(draw: st.DrawFn) -> tuple[bytes, str]:
    """A small model: a chain of shape-preserving or matmul ops on one input, odd shapes (rank 0,
    dims of 1) and dtypes, sometimes an output that is an input or an initializer."""
    elem = draw(st.sampled_from(list(DTYPES)))
    rank = draw(st.integers(0, 3))
    shape = [draw(st.sampled_from([1, 2, 3])) for _ in range(rank)]
    x = helper.make_tensor_value_info("x", elem, shape)
    inits, nodes = [], []
    cur, k = "x", 0
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["Relu", "Add", "Mul", "Identity", "Neg", "MatMul", "Transpose", "Sigmoid"]))
        out = f"t{k}"
        k += 1
        if op in ("Add", "Mul"):
            c = f"c{k}"
            inits.append(numpy_helper.from_array(np.full(shape, 0.5, DTYPES[elem]), c))
            nodes.append(helper.make_node(op, [cur, c], [out]))
        elif op == "MatMul":
            if rank < 1:
                continue
            c = f"c{k}"
            inits.append(numpy_helper.from_array(np.eye(shape[-1], dtype=DTYPES[elem]), c))
            nodes.append(helper.make_node(op, [cur, c], [out]))
        elif op == "Transpose":
            if rank < 1:  # a rank-0 Transpose has no perm to write
                continue
            nodes.append(helper.make_node(op, [cur], [out], perm=list(reversed(range(rank)))))
            shape = list(reversed(shape))
        else:
            nodes.append(helper.make_node(op, [cur], [out]))
        cur = out
    outs = [helper.make_tensor_value_info(cur, elem, shape)]
    extra = draw(st.sampled_from(["none", "input", "init"]))
    if extra == "input" and cur != "x":
        outs.append(helper.make_tensor_value_info("x", elem, list(x.type.tensor_type.shape.dim and
                                                               [d.dim_value for d in x.type.tensor_type.shape.dim])))
    elif extra == "init" and inits:
        arr = numpy_helper.to_array(inits[0])
        outs.append(helper.make_tensor_value_info(inits[0].name, elem, list(arr.shape)))
    graph = helper.make_graph(nodes, "fuzz", [x], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString(), cur


@fuzz(10)
@given(case=onnx_models(), search=st.sampled_from(["taso", "eqsat"]))
def test_onnx_models_optimize_to_equal_files_or_fail_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             case: tuple[bytes, str], search: str) -> None:
    data, _ = case
    src, dst = tmp_path / "m.onnx", tmp_path / "m.opt.onnx"
    src.write_bytes(data)
    code, _, err = run_cli(capsys, ["optimize", str(src), "--search", search, "--preset", "quick", "--out", str(dst)])
    assert_clean(code, err, (str(src), "m.onnx"))
    if code != 0:
        assert not dst.exists(), "a failed run left its output behind"
        return
    a = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    feeds = {}
    for i in a.get_inputs():
        dims = [d if isinstance(d, int) else 1 for d in i.shape]
        dtype = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}[i.type]
        feeds[i.name] = np.asarray(np.random.default_rng(0).standard_normal(dims), dtype=dtype)
    for x, y in zip(a.run(None, feeds), b.run(None, feeds)):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=2e-2, atol=2e-2)


# --------------------------------------------------------------------------- graphs from the op table
@st.composite
def matrix_graphs(draw: st.DrawFn) -> list[str]:
    """A random program over n x n matrices, as builder steps the test replays."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["matmul", "ewadd", "ewmul", "transpose", "relu", "concat"]))
        steps.append((op, draw(st.integers(0, 10)), draw(st.integers(0, 10))))
    return steps


@fuzz(10)
@given(steps=matrix_graphs(), search=st.sampled_from(["taso", "eqsat"]))
def test_random_graphs_optimize_to_verified_equal_graphs(steps: list, search: str) -> None:
    from eqsat.cost.select import cost_model
    from eqsat.ir.graph import Graph, input_, node, weight
    from eqsat.rules.rulesets import default_rules
    from experiments.searches import get_search, limits_for

    n = 4
    pool = [input_("x", (n, n)), weight("w0", (n, n)), weight("w1", (n, n))]
    for op, i, j in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        if op in ("transpose", "relu"):
            pool.append(node(op, a))
        elif op == "concat":
            pool.append(node("matmul", node("concat", a, b, axis=1), node("concat", b, a, axis=0)))
        else:
            pool.append(node(op, a, b))
    engine = get_search(search)
    limits = limits_for(engine, "fuzz", quick=True)
    from eqsat.search import run_verified

    result = run_verified(engine, Graph((pool[-1],), name="fuzz"), default_rules(engine.default_rule_sets),
                          cost_model("h100"), limits, seed=0)
    assert result.verified is not None and result.verified.equal
    assert result.best_us <= result.original_us + 1e-9
