"""Fuzzing the user-facing inputs (hypothesis): rule files, device files, e-graph files, every numeric
flag of every command and experiment row, ONNX models and graphs.

Every case goes through the CLI (``experiments.cli.main``) as a user would, and must end in
exit 0, or in exit 2 with one line on stderr that names the input; never a traceback, never
exit 3 (an internal error), never a partial output file. Optimized graphs must be equivalent
(each search's own final check; ONNX files are re-run in onnxruntime here). The number of
examples scales with ``EQSAT_FUZZ_SCALE`` (default 1: a CI-sized run; the nightly run is
``eqsat-lab experiment fuzz``).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from experiments.cli import build_parser, main
from experiments.command import device_arg, device_list

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


# --------------------------------------------------------------------------- e-graph files (eqsat-lab extract)
EGRAPH = json.dumps({"nodes": {"x": {"op": "x", "children": [], "eclass": "X", "cost": 1.0},
                               "w": {"op": "w", "children": [], "eclass": "W", "cost": 1.0},
                               "m": {"op": "matmul", "children": ["x", "w"], "eclass": "M", "cost": 4.0},
                               "r": {"op": "relu", "children": ["m"], "eclass": "R", "cost": 2.0},
                               "f": {"op": "fused", "children": ["x", "w"], "eclass": "R", "cost": 3.5},
                               "loop": {"op": "id", "children": ["r"], "eclass": "R", "cost": 0.0}},
                     "root_eclasses": ["R"], "class_data": {"X": {"shape": [2, 8]}, "R": {"const": False}}})
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                      max_size=3), max_leaves=12)
JSON_TOKENS = ["{", "}", "[", "]", ",", ":", '"', "null", "1e999", "-1", "NaN", "Infinity", '"cost"', '"children"',
               '"eclass"', '"R"', '"nodes"', "\\", "\x00", "\xff", "[" * 500]


@st.composite
def egraph_files(draw: st.DrawFn) -> bytes:
    """An e-graph file as a user or a crash might leave it: the valid one with tokens inserted,
    deleted or replaced, one field set to any JSON value, cut short, or raw bytes."""
    kind = draw(st.sampled_from(["tokens", "field", "cut", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "cut":
        return EGRAPH.encode()[:draw(st.integers(0, len(EGRAPH)))]
    if kind == "field":
        doc = json.loads(EGRAPH)
        where = draw(st.sampled_from(["root_eclasses", "class_data", "nodes", "node", "field"]))
        value = draw(JSON_VALUES)
        if where in ("node", "field"):
            node_id = draw(st.sampled_from(sorted(doc["nodes"])))
            if where == "node":
                doc["nodes"][node_id] = value
            else:
                doc["nodes"][node_id][draw(st.sampled_from(["op", "children", "eclass", "cost"]))] = value
        else:
            doc[where] = value
        return json.dumps(doc).encode()
    text = EGRAPH
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        tok = draw(st.sampled_from(JSON_TOKENS))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        text = (text[:pos] + tok + text[pos:] if op == "insert" else
                text[:pos] + text[pos + draw(st.integers(1, 12)):] if op == "delete" else
                text[:pos] + tok + text[pos + len(tok):])
    return text.encode("utf-8", "surrogatepass")


@fuzz(60)
@given(data=egraph_files(), extractor=st.sampled_from(["ilp", "greedy"]))
def test_egraph_files_extract_or_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture, data: bytes,
                                               extractor: str) -> None:
    """The extraction JSON reader through ``eqsat-lab extract``: a cost, or one line naming the
    file, exit 2, and no result file; never a traceback, a RecursionError or "inf"."""
    path, out = tmp_path / "e.json", tmp_path / "r.json"
    path.write_bytes(data)
    out.unlink(missing_ok=True)
    code, text, err = run_cli(capsys, ["extract", str(path), "--extractor", extractor, "--seconds", "5",
                                       "--json", str(out)])
    event(f"exit {code}")
    assert_clean(code, err, (str(path),))
    if code == 0:
        cost = json.loads(out.read_text())["cost"]
        assert math.isfinite(cost) and cost >= 0 and f"{cost:.6g}" in text
    else:
        assert not out.exists() and text == ""


# --------------------------------------------------------------------------- numeric flags
def _filler(action: argparse.Action) -> str:
    return str(next(iter(action.choices))) if action.choices else "x"


NUMERIC_LIST = re.compile(r"^[0-9.,eE+-]*[0-9][0-9.,eE+-]*$")  # "1000,4000", "1,5": a list of numbers as text


def numeric_flags() -> tuple[list[tuple[tuple[str, ...], list[str], str, Any]], list[str], list[tuple]]:
    """(subcommand path, its required arguments, flag, argparse type) of every flag of every
    command and experiment row whose type is a shared bounded number type (``number_in``,
    ``list_of``); and the names of numeric flags that are not: typed plain ``int``/``float``,
    untyped with a number default, or untyped with a default like ``"1,5"``; and every ``--device``
    flag (path, required arguments, flag)."""
    out, loose, devices = [], [], []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        needed = []
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction) \
                    and action.nargs not in ("?", "*"):
                needed.append(_filler(action))
            elif action.required and action.option_strings:
                needed += [action.option_strings[0], _filler(action)]
        for action in parser._actions:
            name = f"{' '.join(path)} {action.option_strings[0] if action.option_strings else action.dest}"
            default = action.default
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, path + (sub_name,))
            elif hasattr(action.type, "bounds"):
                out.append((path, needed, action.option_strings[0], action.type))
            elif action.type in (device_arg, device_list):
                devices.append((path, needed, action.option_strings[0]))
            elif action.type in (int, float) or (
                    type(action) is argparse._StoreAction and action.type is None
                    and (isinstance(default, (int, float)) and not isinstance(default, bool)
                         or isinstance(default, str) and NUMERIC_LIST.match(default))):
                loose.append(name)
    walk(PARSER, ())
    return out, loose, devices


PARSER = build_parser()
NUMERIC, LOOSE, DEVICE_FLAGS = numeric_flags()
ATTACKS = ["0", "-1", "-0.0", "nan", "inf", "-inf", "1e308", "1e400", "3e6", "2.5", "1e3", "abc", "", " ",
           "99999999999999999999", "0x10", "1_000", "+5", "7", "1,,2", "1,nan", "3e6,1"]
ISSUE_ATTACKS = ["3e6", "0", "-1", "nan", "inf"]  # tried on every flag (issue 39 item 6)


def _flag_name(case: tuple) -> str:
    path, _, flag, _ = case
    return f"{' '.join(path)} {flag}"


def check_flag(case: tuple, text: str) -> None:
    """``flag=text`` fails at parse time, exit 2, one line naming the flag; or it parses to a
    finite value within the type's bounds (each element, for a list)."""
    path, required, flag, kind_fn = case
    kind, low, high, above = kind_fn.bounds
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            args = PARSER.parse_args([*path, *required, f"{flag}={text}"])
        except SystemExit as exc:
            assert exc.code == 2
            lines = err.getvalue().strip().splitlines()
            assert f"error: argument {flag}: expected" in lines[-1], lines[-1]
            assert "Traceback" not in err.getvalue()
            return
    value = getattr(args, next(a.dest for a in PARSER_ACTIONS[path] if flag in a.option_strings))
    values = [kind(v) for v in value.split(",") if v] if getattr(kind_fn, "listed", False) else [value]
    for v in values:
        assert isinstance(v, kind) and math.isfinite(v), (flag, text, v)
        assert (v > low if above else v >= low) and (high is None or v <= high), (flag, text, v)


def _actions_of(path: tuple[str, ...]) -> list[argparse.Action]:
    parser = PARSER
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser._actions


PARSER_ACTIONS = {case[0]: _actions_of(case[0]) for case in NUMERIC}


def test_every_numeric_flag_uses_a_shared_type() -> None:
    assert not LOOSE, f"numeric flags without a shared bounded type: {LOOSE}"
    flags = {(p, f) for p, _, f, _ in NUMERIC}
    for attack in [(("optimize",), "--seconds"), (("pet", "optimize"), "--beam"), (("pet", "demo"), "--N"),
                   (("pet", "demo"), "--stride"), (("pet", "demo"), "--tests"), (("tune",), "--reselect"),
                   (("experiment", "caps"), "--seconds"), (("experiment", "fuzz"), "--minutes"),
                   (("experiment", "real"), "--threads"), (("experiment", "tuning-budget"), "--trials")]:
        assert attack in flags
    assert len({p for p, _ in flags if p[:1] == ("experiment",)}) >= 15  # every experiment row with a number


def test_every_device_flag_refuses_a_thread_count_that_would_hang() -> None:
    """``--device ort-cpu:100000`` hung starting 100,000 threads (issue 39 item 6)."""
    assert len(DEVICE_FLAGS) >= 12
    for path, required, flag in DEVICE_FLAGS:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
            PARSER.parse_args([*path, *required, flag, "ort-cpu:100000"])
        assert exit_.value.code == 2
        assert f"error: argument {flag}: device 'ort-cpu:100000': the thread count" in err.getvalue(), path


@pytest.mark.parametrize("case", NUMERIC, ids=_flag_name)
def test_every_numeric_flag_refuses_the_issues_attacks(case: tuple) -> None:
    for text in ISSUE_ATTACKS:
        check_flag(case, text)


@fuzz(150)
@given(st.sampled_from(NUMERIC), st.one_of(st.sampled_from(ATTACKS), st.text(max_size=8),
                                           st.floats().map(repr), st.integers().map(str)))
def test_numeric_flags_fail_at_parse_time_naming_the_flag(case: tuple, text: str) -> None:
    check_flag(case, text)


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
    code, _, err = run_cli(capsys, ["optimize", "--device", "h100", str(src), "--search", search, "--preset",
                                    "quick", "--out", str(dst)])
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
    from eqsat.cost.registry import cost_model
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
