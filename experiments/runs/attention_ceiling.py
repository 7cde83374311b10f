"""``eqsat-lab experiment attention-ceiling``: what fusing attention would be worth on this CPU.

onnxruntime's transformer optimizer makes no ``Attention``/``MultiHeadAttention`` of the zoo's
exporter-shaped attention (``experiment ort-fusions``), so its ceiling is measured by hand: the
attention core of each zoo transformer at its own sizes (heads split by Reshape/Transpose, scores
scaled, the causal mask by ``Where``, Softmax, the context merged back) is timed against
onnxruntime's ``com.microsoft.MultiHeadAttention`` on the same projected q, k, v (checked equal,
tolerance 1e-3; ``ORT_ENABLE_ALL`` both sides, 1 thread, interleaved), and the model itself is
timed alone. The bound a fusion of every layer's attention could reach is then
``model / (model - layers * saved)``: the most an attention rule could add to that model.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.files import write_atomic
from experiments.command import Experiment, add_sweep_options, positive_int, split_list, sweep_kwargs
from experiments.onnx_io import TOLERANCE
from experiments.output import write_table
from experiments.sweep import Cell, RunOptions, run_cells

RUNS = 40
GOAL = 1.05


@dataclass(frozen=True)
class Block:
    """One zoo transformer's attention: tokens, heads, width, layers, whether it is causal."""

    model: str
    seq: int
    heads: int
    d: int
    layers: int
    causal: bool


BLOCKS = {b.model: b for b in (
    Block("vit", 197, 6, 384, 6, False),  # 14 x 14 patches and the class token
    Block("gpt2", 128, 12, 768, 2, True),
    Block("llama_block", 128, 16, 1024, 1, True),
)}
"""The zoo's transformers at their full sizes (``tests/test_attention_ceiling.py`` checks them against the builders)."""


def write_pair(block: Block, folder: Path) -> tuple[Path, Path]:
    """The unfused attention core and ``MultiHeadAttention`` on inputs q, k, v of shape (1, seq, d)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    s, h, d = block.seq, block.heads, block.d
    hd = d // h
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, s, d]) for n in ("q", "k", "v")]
    out = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, s, d])]
    inits = [numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in (
        ("heads", [1, s, h, hd], np.int64), ("merged", [1, s, d], np.int64),
        ("scale", 1 / np.sqrt(hd), np.float32))]
    nodes = [helper.make_node("Reshape", [x, "heads"], [f"{x}4"]) for x in ("q", "k", "v")]
    nodes += [helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qh", "kt"], ["raw"]),
              helper.make_node("Mul", ["raw", "scale"], ["scores"])]
    if block.causal:
        inits += [numpy_helper.from_array(np.tril(np.ones((s, s), dtype=bool))[None, None], "keep"),
                  numpy_helper.from_array(np.array(np.finfo(np.float32).min, dtype=np.float32), "lowest")]
        nodes.append(helper.make_node("Where", ["keep", "scores", "lowest"], ["masked"]))
    nodes += [helper.make_node("Softmax", ["masked" if block.causal else "scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vh"], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctx_t", "merged"], ["out"])]
    fused = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["out"], domain="com.microsoft",
                             num_heads=h, unidirectional=int(block.causal))
    paths = []
    for name, graph_nodes, graph_inits in (("unfused", nodes, inits), ("mha", [fused], [])):
        model = helper.make_model(helper.make_graph(graph_nodes, f"{block.model}_{name}", io, out, graph_inits),
                                  opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
        path = folder / f"{block.model}.attention.{name}.onnx"
        onnx.save(model, str(path))
        paths.append(path)
    return paths[0], paths[1]


def bound(model_ms: float, layers: int, saved_ms: float) -> float:
    """The model's speed-up if every layer's attention saved ``saved_ms`` and nothing else changed."""
    left = model_ms - layers * saved_ms
    if left <= 0:
        raise ValueError(f"attention saves {layers} x {saved_ms:.3f} ms of a {model_ms:.3f} ms model: timed apart, "
                         f"the pieces do not add up")
    return model_ms / left


def ceiling_cell(model: str, path: str, digest: str, runs: int, seed: int, out: str) -> dict[str, Any]:
    """The attention pair checked and timed, the model timed alone, and the bound they give."""
    from eqsat.cost.measured.timer import time_files
    from eqsat.onnx.runtime import max_difference

    block = BLOCKS[model]
    folder = Path(out) / "models" / "attention"
    folder.mkdir(parents=True, exist_ok=True)
    unfused, mha = write_pair(block, folder)
    diff = max_difference(unfused, mha, seed)
    a, b = time_files([unfused, mha], "ENABLE_ALL", runs=runs, seed=seed, threads=1)
    (whole,) = time_files([path], "ENABLE_ALL", runs=runs, seed=seed, threads=1)
    saved_ms = (a.median_us - b.median_us) / 1e3
    model_ms = whole.median_us / 1e3
    return {"seq": block.seq, "heads": block.heads, "d": block.d, "layers": block.layers, "causal": block.causal,
            "max_diff": diff, "equal": diff <= TOLERANCE, "unfused_ms": a.median_us / 1e3, "mha_ms": b.median_us / 1e3,
            "block_ratio": a.median_us / b.median_us, "block_spread": (a.p90_us - a.p10_us) / a.median_us,
            "model_ms": model_ms, "model_spread": (whole.p90_us - whole.p10_us) / whole.median_us,
            "bound": bound(model_ms, block.layers, saved_ms)}


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = ("| model | tokens x heads x width, layers | causal | max diff | attention unfused ms "
            "| MultiHeadAttention ms | attention in/fused | model ms "
            "| bound on the model: model / (model - layers x saved) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        causal = "yes" if r["causal"] else "no"
        lines.append(f"| {r['model']} | {r['seq']} x {r['heads']} x {r['d']}, {r['layers']} | {causal} "
                     f"| {r['max_diff']:.1e}{'' if r['equal'] else ' (unequal)'} | {r['unfused_ms']:.3f} | "
                     f"{r['mha_ms']:.3f} | {r['block_ratio']:.3f} | {r['model_ms']:.2f} | {r['bound']:.3f} |")
    return "\n".join(lines)


def run(out: Path, *, zoo: Sequence[str] = (), runs: int = RUNS, seed: int = 0,
        options: RunOptions = RunOptions(), command: str = "") -> list[dict[str, Any]]:
    from experiments.runs.zoo import digest, model_files

    names = list(zoo) or list(BLOCKS)
    unknown = [n for n in names if n not in BLOCKS]
    if unknown:
        raise ValueError(f"--zoo: no attention block for {', '.join(unknown)}; choose from {', '.join(BLOCKS)}")
    if options.workers != 1:
        raise ValueError("experiment attention-ceiling times files end to end: run it with --workers 1")
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    files = model_files(None, out, seed, False, names)
    found = run_cells([Cell.of("attention-ceiling", "experiments.runs.attention_ceiling:ceiling_cell", model=f.stem,
                               path=str(f), digest=digest(f), runs=runs, seed=seed, out=str(out)) for f in files],
                      out, options=options, desc="attention-ceiling: timed")
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    rows = [{"model": f.stem, **cell} for f, cell in zip(files, found)]
    paying = [f"{r['model']} {r['bound']:.3f}" for r in rows if r["equal"] and r["bound"] >= GOAL]
    note = (f"(tolerance {TOLERANCE:g}; medians of >= {runs} runs, ORT_ENABLE_ALL, 1 thread, the pair interleaved; "
            f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; bound >= {GOAL}: "
            f"{', '.join(paying) or 'none'})")
    text = (f"`{command}`\n\n" if command else "") + format_table(rows) + "\n\n" + note + "\n"
    write_table(out, "attention_ceiling", rows, {"command": command, "load_before": load_before,
                                                 "load_after": load_after})
    write_atomic(out / "attention_ceiling.md", text)
    print(text, end="")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zoo", default="", help=f"comma-separated zoo transformers (default {','.join(BLOCKS)})")
    p.add_argument("--runs", type=positive_int, default=RUNS, help=f"end-to-end runs of each file, at least ({RUNS})")
    add_sweep_options(p, "results/attention_ceiling", device=False)


def _run(args: argparse.Namespace) -> int:
    run(Path(args.out), zoo=split_list(args.zoo), runs=args.runs, seed=args.seed, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("attention-ceiling", "what onnxruntime's MultiHeadAttention would add to the zoo's transformers: "
               "their attention core timed against it, and the bound on each model", _add_arguments, _run,
               outputs=("attention_ceiling.csv", "attention_ceiling.json", "attention_ceiling.md",
                        "models/full/<model>.onnx", "models/attention/<model>.attention.<kind>.onnx"),
               doc="zoo/README.md#what-onnxruntimes-contrib-fusions-add-on-this-cpu"),
)
