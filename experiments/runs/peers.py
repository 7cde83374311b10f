"""``eqsat-lab experiment peers``: eqsat-lab's searches beside the tools a user would pick instead,
on the runtime they use.

Every ONNX file of a folder (default: the zoo, generated) goes through eqsat-lab's searches
(``--searches``, on ``--device``, ``ort-cpu`` by default) and through the peers of :data:`PEERS`
(onnxsim, onnxoptimizer, onnxslim, onnxruntime's transformer optimizer; each an optional extra,
``pip install 'eqsat-lab[peers]'``, skipped with a note when absent). Every output is checked
against its input in onnxruntime (:func:`eqsat.onnx.max_difference`), then all of a model's files
are timed together in onnxruntime on this CPU (``ORT_ENABLE_ALL``, one thread) as medians of at
least 40 interleaved runs (:func:`eqsat.cost.measured.timer.time_files`), the input twice, so
the noise band (the input against itself) is measured beside every ratio. ``--realistic`` first
adds N(0, 0.02) to every float parameter (random initialization's zero biases and unit scales
are what the identities remove; trained weights have none); ``--weights hf-init`` sets them as
``transformers`` initializes a model. One table (csv, json, md) and a figure.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.cost.devices import ORT_CPU
from eqsat.searches import ALPHA, EGRAPH
from experiments.command import Experiment, add_sweep_options, add_zoo_input, positive_int, split_list, sweep_kwargs
from experiments.output import write_report
from experiments.sweep import Cell, RunOptions, run_cells

TOLERANCE = 1e-3  # an output whose largest relative difference to the input's is above this is "differs"
RUNS = 40  # interleaved runs per file (the issue: at least 40)
REALISTIC_STD = 0.02


def _onnxsim(src: Path, dst: Path) -> None:
    import onnx
    import onnxsim

    model, ok = onnxsim.simplify(onnx.load(str(src)))
    if not ok:
        raise RuntimeError("onnxsim could not validate its output")
    onnx.save(model, str(dst))


def _onnxoptimizer(src: Path, dst: Path) -> None:
    import onnx
    import onnxoptimizer

    onnx.save(onnxoptimizer.optimize(onnx.load(str(src))), str(dst))


def _onnxslim(src: Path, dst: Path) -> None:
    import onnxslim

    onnxslim.slim(str(src), str(dst))


def _ort_transformers(src: Path, dst: Path) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    optimize_model(str(src), model_type="bert", opt_level=0, use_gpu=False).save_model_to_file(str(dst))


@dataclass(frozen=True)
class Peer:
    """A tool a user would run instead: ``module`` must import (its extra installed), ``run(src, dst)``."""

    name: str
    module: str
    run: Callable[[Path, Path], None]


PEERS: dict[str, Peer] = {p.name: p for p in (
    Peer("onnxsim", "onnxsim", _onnxsim),
    Peer("onnxoptimizer", "onnxoptimizer", _onnxoptimizer),
    Peer("onnxslim", "onnxslim", _onnxslim),
    Peer("ort-transformers", "onnxruntime.transformers.optimizer", _ort_transformers),
)}
"""Name -> peer, in the table's order (after eqsat-lab's searches)."""


def available(peer: Peer) -> bool:
    try:
        return importlib.util.find_spec(peer.module) is not None
    except ModuleNotFoundError:  # a parent package is absent
        return False


def realistic_copy(src: Path, dst: Path, seed: int) -> Path:
    """``src`` with N(0, :data:`REALISTIC_STD`) added to every float initializer of more than one
    element (seeded per name): weights as training leaves them, without the exact zeros and ones of
    initialization."""
    import zlib

    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    for k, init in enumerate(model.graph.initializer):
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind != "f" or arr.size <= 1:  # a scalar is the computation's constant (an exponent, a
            continue  # mask's fill), not a parameter: LLaMA's RMSNorm Pow(x, 2.01) is NaN on negative x
        rng = np.random.default_rng([seed, zlib.crc32(init.name.encode())])
        noisy = (arr + rng.normal(0.0, REALISTIC_STD, arr.shape)).astype(arr.dtype)
        model.graph.initializer[k].CopyFrom(numpy_helper.from_array(noisy, init.name))
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dst))
    return dst


def hf_init_copy(src: Path, dst: Path) -> Path:
    """``src`` initialized as ``transformers``' ``_init_weights`` leaves a model: every bias a MatMul's
    Add or a Gemm reads is 0, every LayerNormalization's scale 1 and bias 0 (the zero biases and
    unit scales the peers' identities remove; the other weights as built)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    inits = {i.name: k for k, i in enumerate(model.graph.initializer)}
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    values: dict[str, float] = {}
    for n in model.graph.node:
        if n.op_type == "Add" and len(n.input) == 2:
            for a, b in (n.input, n.input[::-1]):
                if b in inits and producer.get(a) == "MatMul":
                    values[b] = 0.0
        elif n.op_type == "Gemm" and len(n.input) > 2 and n.input[2] in inits:
            values[n.input[2]] = 0.0
        elif n.op_type == "LayerNormalization":
            values.update({name: v for name, v in zip(n.input[1:3], (1.0, 0.0)) if name in inits})
    for name, v in values.items():
        arr = numpy_helper.to_array(model.graph.initializer[inits[name]])
        if arr.dtype.kind == "f":
            model.graph.initializer[inits[name]].CopyFrom(numpy_helper.from_array(np.full_like(arr, v), name))
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dst))
    return dst


WEIGHTS: dict[str, Callable[[Path, Path, int], Path] | None] = {
    "as built": None, "realistic": realistic_copy, "hf-init": lambda s, d, seed: hf_init_copy(s, d)}
"""The weights a model is run with: the file's own, every parameter plus N(0, 0.02), or
``transformers``' initialization (zero biases, unit norm scales)."""


def _tag(weights: str) -> str:
    """The folder name of a weight kind's files."""
    return "built" if weights == "as built" else weights


def optimize_cell(path: str, digest: str, tool: str, device: str, out: str, seed: int = 0) -> dict[str, Any]:
    """One tool on one model: the file it writes (``out``), its node count, its largest relative
    difference to the input in onnxruntime and the seconds it took; a failure is a row, not a crash."""
    import contextlib
    import io
    import json

    import onnx

    from eqsat import onnx as onnx_io

    dst = Path(out)
    dst.parent.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"tool": tool, "status": "ok", "note": ""}
    start = time.perf_counter()
    try:
        if tool in PEERS:
            with contextlib.redirect_stdout(io.StringIO()):  # onnxslim prints its own table
                PEERS[tool].run(Path(path), dst)
        else:
            from experiments.cli import main

            js = dst.with_suffix(".json")
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(["optimize", path, "--search", tool, "--device", device, "--seed", str(seed),
                             "--out", str(dst), "--json", str(js)])
            if code != 0:
                raise RuntimeError(f"eqsat-lab optimize exited {code}")
            payload = json.loads(js.read_text())
            row["note"] = "input kept" if payload.get("onnx", {}).get("input_copied") else "written"
            row["stop"] = payload.get("stop", "")
    except Exception as exc:  # a tool that fails on a model is a row of the table
        row.update(status="failed", note=(str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])
        return row | {"seconds": time.perf_counter() - start}
    row["seconds"] = time.perf_counter() - start
    row["nodes"] = len(onnx.load(str(dst), load_external_data=False).graph.node)
    try:
        row["max_difference"] = onnx_io.max_difference(path, dst, seed=seed)
    except Exception as exc:  # onnxruntime refuses the output: it cannot be timed either
        row.update(status="failed", note=f"onnxruntime: {(str(exc).strip().splitlines() or ['?'])[0][:160]}")
        return row
    if not row["max_difference"] <= TOLERANCE:
        row.update(status="differs", note=f"max relative difference {row['max_difference']:.2g}")
    return row


def time_cell(files: Sequence[str], digest: str, runs: int = RUNS, seed: int = 0) -> dict[str, Any]:
    """Medians (µs) of ``files`` (the input first) timed together, the input twice: ``input_us``
    (the mean of its two sessions), ``noise`` (``|1 - a/b|``) and each file's ``us``."""
    from eqsat.cost.measured.timer import time_files

    timings = time_files([files[0], *files], runs=runs, seed=seed)
    a, b = timings[0].median_us, timings[1].median_us
    return {"input_us": (a + b) / 2, "noise": abs(1 - a / b) if b > 0 else 0.0,
            "us": [t.median_us for t in timings[2:]]}


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def model_rows(files: Sequence[Path], tools: Sequence[str], device: str, out: Path, *, seed: int = 0,
               runs: int = RUNS, weights: str = "as built", options: RunOptions = RunOptions()) -> list[dict[str, Any]]:
    """One row per (model, tool): its optimize row and, when it ran and agrees, ``ratio`` (the input's
    time over the file's, above 1: faster) beside the model's ``noise``."""
    from experiments.runs.zoo import digest

    tag = _tag(weights)
    digests = {f: digest(f) for f in files}
    cells = [Cell.of("peers", "experiments.runs.peers:optimize_cell", path=str(f), digest=digests[f], tool=t,
                     device=device, seed=seed, out=str(out / "files" / tag / t / f.name))
             for f in files for t in tools]
    done = run_cells(cells, out, options=options, desc="peers: optimize")
    by_model = {f: done[k * len(tools):(k + 1) * len(tools)] for k, f in enumerate(files)}
    rows = []
    for f in files:
        opt = by_model[f]
        timed = [r for r, t in zip(opt, tools) if r["status"] == "ok"]
        paths = [str(out / "files" / tag / r["tool"] / f.name) for r in timed]
        t = run_cells([Cell.of("peers-time", "experiments.runs.peers:time_cell", files=(str(f), *paths),
                               digest=digests[f] + "".join(digest(p)[:6] for p in paths), runs=runs, seed=seed)],
                      out, options=RunOptions(progress=False))[0]
        us = dict(zip((r["tool"] for r in timed), t["us"]))
        for r in opt:
            row = {"model": f.stem, "weights": weights, **r, "input_us": t["input_us"], "noise": t["noise"]}
            if r["tool"] in us:
                row |= {"us": us[r["tool"]], "ratio": t["input_us"] / us[r["tool"]]}
            rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]], tools: Sequence[str]) -> str:
    """One Markdown row per (model, weights): each tool's ratio (``differs``/``failed`` where it
    did not give a file equal to the input), the noise band; then the geometric means."""
    head = "| model | weights | input ms | noise | " + " | ".join(tools) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    keys = list(dict.fromkeys((r["model"], r["weights"]) for r in rows))
    for model, weights in keys:
        mine = {r["tool"]: r for r in rows if r["model"] == model and r["weights"] == weights}
        first = next(iter(mine.values()))
        cells = []
        for t in tools:
            r = mine.get(t)
            if r is None:
                cells.append("-")
            elif "ratio" in r:
                bold = r["ratio"] > 1 + max(r["noise"], 0.01) or r["ratio"] < 1 - max(r["noise"], 0.01)
                text = f"{r['ratio']:.3f}" + (" (kept)" if r.get("note") == "input kept" else "")
                cells.append(f"**{text}**" if bold else text)
            else:
                cells.append(r["status"])
        lines.append(f"| {model} | {weights} | {first['input_us'] / 1e3:.2f} | ±{first['noise']:.1%} | "
                     + " | ".join(cells) + " |")
    for weights in dict.fromkeys(r["weights"] for r in rows):
        means = [geomean([r.get("ratio", 1.0) for r in rows if r["tool"] == t and r["weights"] == weights
                          and r["status"] == "ok"]) for t in tools]
        lines.append(f"| geometric mean | {weights} | | | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], tools: Sequence[str], path: Path) -> None:
    """Each model's ratio per tool as bars, its noise band shaded around 1."""
    from experiments.output import pyplot

    plt = pyplot()
    keys = list(dict.fromkeys((r["model"], r["weights"]) for r in rows))
    fig, ax = plt.subplots(figsize=(min(16.0, max(6.0, 0.45 * len(keys) * max(1, len(tools)) / 3 + 2)), 4.5))
    width = 0.8 / max(1, len(tools))
    for k, (model, weights) in enumerate(keys):
        mine = [r for r in rows if r["model"] == model and r["weights"] == weights]
        noise = mine[0]["noise"]
        ax.fill_between([k - 0.45, k + 0.45], 1 - noise, 1 + noise, color="#dddddd", zorder=0)
        for j, t in enumerate(tools):
            r = next((r for r in mine if r["tool"] == t), None)
            if r is not None and "ratio" in r:
                ax.bar(k - 0.4 + (j + 0.5) * width, r["ratio"] - 1, width, bottom=1, color=f"C{j}",
                       label=t if k == 0 else None)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(keys)), [f"{m}\n({w})" if len({w for _, w in keys}) > 1 else m for m, w in keys],
                  rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("onnxruntime speed vs the input (×)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(models: str | None, out: Path, *, searches: Sequence[str] = (EGRAPH, ALPHA), device: str = ORT_CPU.name,
        peers: Sequence[str] | None = None, zoo: Sequence[str] = (), weights: Sequence[str] = ("as built",),
        runs: int = RUNS, seed: int = 0, small: bool = False, options: RunOptions = RunOptions(),
        command: str = "") -> list[dict[str, Any]]:
    from experiments.runs.zoo import model_files
    from experiments.searches import SEARCHES

    unknown = [s for s in searches if s not in SEARCHES] + [p for p in peers or () if p not in PEERS]
    if unknown:
        raise ValueError(f"--searches/--peers: unknown {', '.join(unknown)} (searches: {', '.join(SEARCHES)}; "
                         f"peers: {', '.join(PEERS)})")
    if runs < RUNS and not small:
        raise ValueError(f"--runs {runs}: the table needs at least {RUNS} interleaved runs per file")
    wanted = [PEERS[p] for p in (peers if peers is not None else PEERS)]
    absent = [p.name for p in wanted if not available(p)]
    for name in absent:
        print(f"peers: {name} is not installed (pip install 'eqsat-lab[peers]'); skipped")
    tools = list(searches) + [p.name for p in wanted if p.name not in absent]
    if models and zoo:
        raise ValueError("--models and --zoo exclude each other: --zoo picks models of the generated zoo")
    files = model_files(models, out, seed, small, zoo) if models or not small else \
        model_files(None, out, seed, True, zoo or ("lora_mlp",))
    bad = [w for w in weights if w not in WEIGHTS]
    if bad:
        raise ValueError(f"--weights {', '.join(bad)}: choose from {', '.join(WEIGHTS)}")
    rows: list[dict[str, Any]] = []
    for kind in weights:
        make = WEIGHTS[kind]
        chosen = files if make is None else [make(f, out / "models" / _tag(kind) / f.name, seed) for f in files]
        rows += model_rows(chosen, tools, device, out, seed=seed, runs=runs, weights=kind, options=options)
    table = format_table(rows, tools)
    note = (f"(ratio: the input's onnxruntime time over the file's, CPU provider, ORT_ENABLE_ALL, 1 thread, medians of "
            f"{runs} interleaved runs; above 1 is faster; bold: outside the noise band (the input against itself, "
            f"at least 1%); (kept): eqsat-lab wrote the input; searches on --device {device}; every file checked "
            f"against its input in onnxruntime, 'differs' above {TOLERANCE:g}"
            + (f"; not installed: {', '.join(absent)}" if absent else "") + ")")
    plot(rows, tools, out / "peers.png")
    write_report(out, "peers", rows, {"command": command, "device": device, "runs": runs, "tools": tools}, table,
                 note, command)
    print(f"wrote {out / 'peers.csv'}, {out / 'peers.json'}, {out / 'peers.md'} and {out / 'peers.png'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_zoo_input(p)
    p.add_argument("--searches", default="eqsat,taso", help="eqsat-lab's searches to run (default eqsat,taso)")
    p.add_argument("--peers", help=f"comma-separated peers (default all: {', '.join(PEERS)}; absent ones skipped)")
    p.add_argument("--realistic", action="store_true", help="add N(0, 0.02) to every float parameter first "
                   "(the same as --weights realistic)")
    p.add_argument("--weights", default="", help=f"comma-separated weight kinds, one table ({', '.join(WEIGHTS)}; "
                   "default 'as built')")
    p.add_argument("--runs", type=positive_int, default=RUNS, help=f"interleaved runs per file (at least {RUNS})")
    p.add_argument("--small", action="store_true", help="a quick smoke run: one small zoo model, few runs allowed")
    add_sweep_options(p, "results/peers")
    p.set_defaults(device=ORT_CPU.name)


def _run(args: argparse.Namespace) -> int:
    weights = split_list(args.weights) or (["realistic"] if args.realistic else ["as built"])
    run(args.models, Path(args.out), searches=split_list(args.searches), device=args.device,
        peers=split_list(args.peers) if args.peers else None, zoo=split_list(args.zoo), weights=weights,
        runs=args.runs, seed=args.seed, small=args.small, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("peers", "eqsat-lab's searches beside onnxsim, onnxoptimizer, onnxslim and onnxruntime's transformer "
               "optimizer: every file checked against its input and timed in onnxruntime with the noise band",
               _add_arguments, _run, outputs=("peers.csv", "peers.json", "peers.md", "peers.png",
                                              "files/<weights>/<tool>/<model>.onnx", "models/full/<model>.onnx"),
               input_args=("models",), doc="peers/README.md"),
)
