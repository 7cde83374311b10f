"""``eqsat-lab experiment onnx-suite``: ONNX's own backend test cases through import and write.

Every case of the installed ``onnx`` package's backend test suite (the node cases regenerated
from onnx's case definitions, ``onnx.backend.test.case.node``, since the wheel ships none; the
``simple``, ``pytorch-converted`` and ``pytorch-operator`` cases and the ``light`` models from
its data folder) is read with :func:`eqsat.onnx.load`, written back with :func:`eqsat.onnx.save`
and run in onnxruntime on the case's inputs against the case's reference outputs. Each case falls
in one class: ``equal`` (no opaque node), ``equal-opaque``, ``refused`` (a one-sentence
:class:`OnnxError`, kept), ``crashed`` (any other exception: a bug), ``wrong`` (the written file
fails in onnxruntime or differs from the reference), or ``ort-fails`` (onnxruntime itself does not
run the case as given, or not to its reference: not counted against the tool).
"""
from __future__ import annotations

import argparse
import random
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.cost.devices import DEFAULT_DEVICE
from experiments.command import Experiment, command_line, positive_int, seed_int
from experiments.output import write_table
from experiments.searches import SEARCHES, search_graph

KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator", "light")
CLASSES = ("equal", "equal-opaque", "refused", "crashed", "wrong", "ort-fails")
OPTIMIZED = ("equal", "kept", "crashed", "wrong")  # what --optimize's search made of an equal case
RTOL, ATOL = 1e-3, 1e-5  # onnx's backend runner uses rtol 1e-3, atol 1e-7; float32 kernels differ more near 0


@dataclass(frozen=True)
class SuiteCase:
    """One backend test case: the model, one data set's inputs and its reference outputs."""

    name: str
    kind: str
    model: Any  # onnx.ModelProto
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]


def _data_dir() -> Path:
    import onnx.backend.test

    return Path(onnx.backend.test.__file__).parent / "data"


def _read_pb(path: Path) -> Any:
    import onnx
    from onnx import numpy_helper

    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def case_names(kinds: Sequence[str] = KINDS) -> list[tuple[str, str]]:
    """``(kind, name)`` of every case of ``kinds`` in the installed onnx package, in a fixed order."""
    found: list[tuple[str, str]] = []
    for kind in kinds:
        if kind == "node":
            found += [("node", c.name) for c in _node_cases()]
        elif kind == "light":
            found += [("light", p.stem) for p in sorted((_data_dir() / "light").glob("*.onnx"))]
        else:
            found += [(kind, p.name) for p in sorted((_data_dir() / kind).iterdir()) if (p / "model.onnx").exists()]
    return found


_NODE_CASES: list[Any] = []


def _node_cases() -> list[Any]:
    """onnx's node cases, regenerated from its case definitions (the wheel ships no node data)."""
    if not _NODE_CASES:
        import warnings

        from onnx.backend.test.case import node

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            _NODE_CASES.extend(sorted(node.collect_testcases(None), key=lambda c: c.name))
    return _NODE_CASES


def load_case(kind: str, name: str) -> SuiteCase:
    """The case's model and its first data set."""
    import onnx

    if kind == "node":
        c = next(c for c in _node_cases() if c.name == name)
        inputs, outputs = c.data_sets[0]
        return SuiteCase(name, kind, c.model, tuple(inputs), tuple(outputs))
    if kind == "light":
        path = _data_dir() / "light" / f"{name}.onnx"
        model = onnx.load(str(path))
        inits = {i.name for i in model.graph.initializer}
        inputs = []
        for vi in model.graph.input:  # what onnx's runner feeds a light model: arange / n
            if vi.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        return SuiteCase(name, kind, model, tuple(inputs), (_read_pb(path.with_name(f"{name}_output_0.pb")),))
    folder = _data_dir() / kind / name
    data = folder / "test_data_set_0"
    ins = tuple(_read_pb(p) for p in sorted(data.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1])))
    outs = tuple(_read_pb(p) for p in sorted(data.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1])))
    return SuiteCase(name, kind, onnx.load(str(folder / "model.onnx")), ins, outs)


def _feeds(model: Any, inputs: Sequence[Any]) -> dict[str, Any]:
    inits = {i.name for i in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    return dict(zip(names, inputs))


def _matches(got: Sequence[Any], want: Sequence[Any]) -> str:
    """Empty when ``got`` equals the references, else what differs (one phrase)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"output {k} has shape {g.shape}, the reference {w.shape}"
        if g.dtype != w.dtype:
            return f"output {k} is {g.dtype}, the reference {w.dtype}"
        if w.dtype.kind in "fc":
            ok = np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(g, w)
        if not ok:
            return f"output {k} differs from the reference"
    return ""


def _run_ort(model: Any, feeds: dict[str, Any]) -> list[Any]:
    """``model`` in onnxruntime on the ``feeds`` it takes (a written file may read fewer inputs)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def _sized(model: Any, inputs: Sequence[Any]) -> Any:
    """The model with each symbolic input dimension set to its data's size (as ``--dim`` would)."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    data = _feeds(out, inputs)
    for vi in out.graph.input:
        x = data.get(vi.name)
        if not isinstance(x, np.ndarray) or not vi.type.HasField("tensor_type"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == x.ndim:
            for d, size in zip(dims, x.shape):
                if not d.HasField("dim_value"):
                    d.dim_value = size
    return out


def check_case(case: SuiteCase, folder: Path, search: str | None = None) -> dict[str, Any]:
    """One case through onnxruntime (as given), import, write and onnxruntime (as written); with
    ``search``, an equal case is also optimized (quick preset, the default device's roofline) and what the search
    picked is written and run against the references (``optimized``: ``kept`` when it kept the input)."""
    import onnx

    from eqsat import onnx as onnx_io

    row: dict[str, Any] = {"kind": case.kind, "case": case.name, "opaque": 0, "message": ""}
    feeds = _feeds(case.model, case.inputs)  # by name: the written file lists its inputs in its own order
    try:
        reference = _matches(_run_ort(case.model, feeds), case.outputs)
    except Exception as exc:  # onnxruntime's errors have no common base
        reference = _one_line(exc)
    if reference:
        return {**row, "class": "ort-fails", "message": reference}
    src, dst = folder / f"{case.name}.onnx", folder / f"{case.name}.written.onnx"
    onnx.save(_sized(case.model, case.inputs), str(src))
    try:
        imported = onnx_io.load(src)
        onnx_io.save(imported, imported.graph, dst, dtype=onnx_io.interface_dtype(imported))
    except onnx_io.OnnxError as exc:
        return {**row, "class": "refused", "message": _one_line(exc).replace(str(src), "<model>")}
    except Exception as exc:  # a bug: any other exception
        return {**row, "class": "crashed", "message": f"{type(exc).__name__}: {_one_line(exc)}"}
    row["opaque"] = len(imported.opaque)
    try:
        got = _run_ort(onnx.load(str(dst)), feeds)
    except Exception as exc:
        return {**row, "class": "wrong", "message": f"onnxruntime cannot run the written file: {_one_line(exc)}"}
    differs = _matches(got, case.outputs)
    if differs:
        return {**row, "class": "wrong", "message": differs}
    row["class"] = "equal-opaque" if imported.opaque else "equal"
    if search is not None:
        row |= _optimized(imported, case, feeds, folder / f"{case.name}.{search}.onnx", search)
    return row


def _optimized(imported: Any, case: SuiteCase, feeds: dict[str, Any], dst: Path, search: str) -> dict[str, Any]:
    import onnx

    from eqsat import onnx as onnx_io

    try:
        _, best = search_graph(imported.graph, case.name, search, DEFAULT_DEVICE, quick=True)
        if best.outputs == imported.graph.outputs:
            return {"optimized": "kept"}
        onnx_io.save(imported, best, dst, dtype=onnx_io.interface_dtype(imported))
        differs = _matches(_run_ort(onnx.load(str(dst)), feeds), case.outputs)
    except Exception as exc:  # a bug: the input was read and written equal
        return {"optimized": "crashed", "optimized_message": f"{type(exc).__name__}: {_one_line(exc)}"}
    return {"optimized": "wrong", "optimized_message": differs} if differs else {"optimized": "equal"}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def pick(names: list[tuple[str, str]], sample: int | None, limit: int | None, seed: int) -> list[tuple[str, str]]:
    """``--sample N`` cases drawn with ``seed`` (kept in suite order), then the first ``--limit``."""
    if sample is not None and sample < len(names):
        keep = set(random.Random(seed).sample(range(len(names)), sample))
        names = [n for i, n in enumerate(names) if i in keep]
    return names[:limit] if limit is not None else names


def run(kinds: Sequence[str], out: Path | None = None, sample: int | None = None, limit: int | None = None,
        seed: int = 0, command: str = "", progress: bool = False, search: str | None = None) -> list[dict[str, Any]]:
    """Every picked case through :func:`check_case`; with ``out``, the rows and the table written there."""
    names = pick(case_names(kinds), sample, limit, seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="eqsat-onnx-suite-") as tmp:
        for i, (kind, name) in enumerate(names):
            try:
                case = load_case(kind, name)
            except Exception as exc:  # a case this harness cannot read (a sequence or map input)
                rows.append({"kind": kind, "case": name, "class": "ort-fails", "opaque": 0,
                             "message": f"case data not readable as tensors: {_one_line(exc)}"})
                continue
            rows.append(check_case(case, Path(tmp), search))
            if progress and (i + 1) % 100 == 0:
                print(f"{i + 1}/{len(names)}", flush=True)
    if out is not None:
        text = (f"`{command}`\n\n" if command else "") + format_table(rows) + "\n\n" + format_reasons(rows)
        write_table(out, "onnx_suite", rows, {"command": command})
        from eqsat.files import write_atomic

        write_atomic(out / "onnx_suite.md", text)
        print(text, end="")
    return rows


def counts(rows: Sequence[dict[str, Any]]) -> dict[str, Counter]:
    """Per kind, how many cases fell in each class."""
    by: dict[str, Counter] = {}
    for r in rows:
        by.setdefault(r["kind"], Counter())[r["class"]] += 1
    return by


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table: one line per kind plus the total, one column per class."""
    by = counts(rows)
    total = sum(by.values(), Counter())
    lines = ["| cases | " + " | ".join(CLASSES) + " | all |", "|---" * (len(CLASSES) + 2) + "|"]
    for kind, c in [*sorted(by.items(), key=lambda kv: KINDS.index(kv[0])), ("total", total)]:
        lines.append(f"| {kind} | " + " | ".join(str(c.get(k, 0)) for k in CLASSES) + f" | {sum(c.values())} |")
    optimized = Counter(r["optimized"] for r in rows if "optimized" in r)
    if optimized:
        lines += ["", "| optimized (equal cases) | " + " | ".join(OPTIMIZED) + " |",
                  "|---" * (len(OPTIMIZED) + 1) + "|",
                  "| searched | " + " | ".join(str(optimized.get(k, 0)) for k in OPTIMIZED) + " |"]
    return "\n".join(lines)


def reason(message: str) -> str:
    """A refusal's message with the case's own names (quoted tensors, shapes) left out, so equal
    causes count together."""
    import re

    text, done = re.sub(r"'[^']*'", "'...'", message), ""
    while text != done:  # innermost parentheses first: (a (b) c) -> (a (...) c) -> (...)
        text, done = re.sub(r"\([^()]*\)", "(...)", text), text
    return text


def format_reasons(rows: Sequence[dict[str, Any]]) -> str:
    """The refusals, crashes and wrong outputs by cause (most frequent first), as markdown lines."""
    lines = []
    for cls, key in (("crashed", "class"), ("wrong", "class"), ("refused", "class"), ("crashed", "optimized"),
                     ("wrong", "optimized")):
        found = Counter(reason(r.get(f"{key}_message", r["message"]) if key == "optimized" else r["message"])
                        for r in rows if r.get(key) == cls)
        if found:
            lines.append(f"{cls}{' after --optimize' if key == 'optimized' else ''}:\n")
            lines += [f"- {n} x {msg}" for msg, n in found.most_common()]
            lines.append("")
    return "\n".join(lines) + "\n" if lines else "no case refused, crashed or came back wrong\n"


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kinds", default=",".join(KINDS), help=f"case families to run (default {','.join(KINDS)})")
    p.add_argument("--sample", type=positive_int, help="run N cases drawn at random (with --seed) instead of all")
    p.add_argument("--limit", type=positive_int, help="run at most the first N (picked) cases")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of --sample's draw")
    p.add_argument("--optimize", choices=tuple(SEARCHES), help="also optimize every equal case with this search "
                   f"(quick preset, {DEFAULT_DEVICE} roofline) and check what it wrote")
    p.add_argument("--out", default="results/onnx_suite", help="output folder (default results/onnx_suite)")


def _run(args: argparse.Namespace) -> int:
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"--kinds: no case family {unknown[0]!r} (families: {', '.join(KINDS)})")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    run(kinds, Path(args.out), args.sample, args.limit, args.seed, command_line(), progress=True, search=args.optimize)
    return 0


EXPERIMENTS = (
    Experiment("onnx-suite", "ONNX's own backend test cases imported, written back and run in onnxruntime against "
               "their references; counts per class (equal, equal with opaque nodes, refused, crashed, wrong)",
               _add_arguments, _run, outputs=("onnx_suite.csv", "onnx_suite.json", "onnx_suite.md"),
               doc="onnx_suite/README.md"),
)
