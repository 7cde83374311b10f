"""``eqsat-lab experiment ort-fusions``: the ceiling of onnxruntime's contrib fusions on this CPU.

Before any contrib op (``Attention``, ``SkipLayerNormalization``, ``FastGelu``, ...) is emitted by our
own pipeline, measure what they are worth: each model goes through onnxruntime's own transformer
optimizer (``onnxruntime.transformers.optimizer.optimize_model``) for every model type asked for, at
opt level 0 (its Python fusions on the file) and 1 (on the graph onnxruntime's basic level writes,
which is what its ``optimize_by_onnxruntime`` does; that function imports PyTorch only to read its
version, so it is done here directly), with the head count and width detected and, for a zoo model
whose builder has them, given. Of the distinct graphs, the one onnxruntime runs with the fewest
nodes (``ORT_ENABLE_ALL``) is checked against the input (tolerance 1e-3) and timed against it
with the zoo's timing (``ORT_ENABLE_ALL`` both sides, 1 thread, interleaved, median of ``--runs``).
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eqsat.files import write_atomic
from experiments.command import Experiment, add_sweep_options, add_zoo_input, positive_int, split_list, sweep_kwargs
from experiments.onnx_io import TOLERANCE
from experiments.output import write_table
from experiments.sweep import Cell, RunOptions, run_cells

MODEL_TYPES = ("bert", "gpt2", "vit", "qwen3")  # onnxruntime's encoder, decoder, ViT, RoPE/RMSNorm decoder fusions
CONTRIB = "com.microsoft"
RUNS = 40
GOAL = 1.05  # issue 38's geometric-mean goal: a fusion worth building pays at least this much


def sizes(model: str) -> tuple[int, int] | None:
    """(heads, width) of a zoo model whose builder takes ``heads`` and ``d``, else None (detected)."""
    from experiments.zoo import ZOO

    if model not in ZOO:
        return None
    params = inspect.signature(ZOO[model].build).parameters
    if "heads" not in params or "d" not in params:
        return None
    return params["heads"].default, params["d"].default


def contrib_ops(graph: Any) -> dict[str, int]:
    """Counts of a graph's onnxruntime-only nodes by op type: the ``com.microsoft`` domain, and ops onnxruntime
    registers in the standard domain that ONNX does not define (``SimplifiedLayerNormalization``)."""
    import onnx

    own = (n.op_type for n in graph.node if n.domain == CONTRIB
           or (n.domain in ("", "ai.onnx") and not onnx.defs.has(n.op_type)))
    return dict(sorted(Counter(own).items()))


def signature(graph: Any) -> tuple[Any, ...]:
    """What tells two optimizer outputs apart: their nodes' (domain, op type, inputs, outputs)."""
    return tuple((n.domain, n.op_type, tuple(n.input), tuple(n.output)) for n in graph.node)


def basic_level(src: Path, dst: Path) -> Path:
    """``src`` as onnxruntime's basic level rewrites it (constant folding, redundant nodes), written to ``dst``."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    return dst


def variants(src: Path, basic: Path, model_types: Sequence[str], given: tuple[int, int] | None) -> list[dict[str, Any]]:
    """Every (model type, opt level, sizes) the optimizer is asked for, with its graph (``model``)."""
    from onnxruntime.transformers.optimizer import optimize_model

    found = []
    for kind in model_types:
        for level, path in ((0, src), (1, basic)):
            for heads, width in [(0, 0)] + ([given] if given else []):
                v: dict[str, Any] = {"model_type": kind, "opt_level": level, "heads": heads, "hidden": width}
                try:
                    model = optimize_model(str(path), model_type=kind, num_heads=heads, hidden_size=width,
                                           opt_level=0)
                except Exception as exc:  # its fusions assert on graphs they do not expect: a row, not a crash
                    found.append(v | {"error": " ".join(str(exc).split())[:200] or type(exc).__name__})
                    continue
                found.append(v | {"nodes": len(model.model.graph.node), "contrib": contrib_ops(model.model.graph),
                                  "model": model})
    return found


def pick(tried: Sequence[Mapping[str, Any]]) -> int:
    """Index of the variant onnxruntime runs with the fewest nodes (``runtime_nodes``); ties: more contrib
    nodes, then the earlier variant."""
    return min(range(len(tried)), key=lambda k: (tried[k]["runtime_nodes"], -sum(tried[k]["contrib"].values()), k))


def label(v: Mapping[str, Any]) -> str:
    """``gpt2 o1 12x768`` (heads x width given) or ``gpt2 o0`` (detected)."""
    return f"{v['model_type']} o{v['opt_level']}" + (f" {v['heads']}x{v['hidden']}" if v["heads"] else "")


def fusion_cell(path: str, digest: str, model_types: Sequence[str], runs: int, seed: int, out: str) -> dict[str, Any]:
    """One model through every optimizer variant; the best distinct graph checked and timed against the input."""
    from eqsat.cost.measured.timer import time_files
    from eqsat.onnx.runtime import max_difference
    from eqsat.onnx.runtime_graph import runtime_graph

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    src = Path(path)
    folder = Path(out) / "models" / "ortfused"
    folder.mkdir(parents=True, exist_ok=True)
    basic = basic_level(src, folder / f"{src.stem}.basic.onnx")
    tried = variants(src, basic, model_types, sizes(src.stem))
    basic.unlink()
    distinct: dict[tuple[Any, ...], dict[str, Any]] = {}
    for v in tried:
        if "error" in v:
            continue
        first = distinct.setdefault(signature(v["model"].model.graph), v)
        if first is not v:
            v["same_as"] = label(first)
            continue
        file = folder / f"{src.stem}.{v['model_type']}.o{v['opt_level']}.{v['heads']}.onnx"
        v.pop("model").save_model_to_file(str(file))
        v["file"] = str(file)
        v["runtime_nodes"] = sum(runtime_graph(file).runtime_ops.values())
    for v in tried:
        v.pop("model", None)
    files = [v for v in tried if "file" in v]
    if not files:
        raise ValueError(f"{src.name}: onnxruntime's transformer optimizer failed on every variant: "
                         f"{tried[0]['error']}")
    best = files[pick(files)]
    base = runtime_graph(src)
    row = {"file_nodes": sum(base.file_ops.values()), "runtime_nodes_in": sum(base.runtime_ops.values()),
           "best": label(best), "best_nodes": best["nodes"], "runtime_nodes_out": best["runtime_nodes"],
           "contrib": best["contrib"], "variants": tried,
           "max_diff": max_difference(src, best["file"], seed)}
    a, b = time_files([src, best["file"]], "ENABLE_ALL", runs=runs, seed=seed, threads=1)
    for v in files:
        Path(v.pop("file")).unlink(missing_ok=True)
    return row | {"input_ms": a.median_us / 1e3, "fused_ms": b.median_us / 1e3, "ratio": a.median_us / b.median_us,
                  "input_spread": (a.p90_us - a.p10_us) / a.median_us, "timed_runs": min(a.runs, b.runs),
                  "equal": row["max_diff"] <= TOLERANCE}


def _ops(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One Markdown row per model: the contrib ops of the best variant, nodes, equality, the measured ratio."""
    head = ("| model | best variant | contrib ops it made | nodes onnxruntime runs: input -> fused | max diff | "
            "input ms | fused ms | measured in/fused | input p10-p90 spread |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['best']} | {_ops(r['contrib'])} | {r['runtime_nodes_in']} -> "
                     f"{r['runtime_nodes_out']} | {r['max_diff']:.1e}{'' if r['equal'] else ' (unequal)'} | "
                     f"{r['input_ms']:.2f} | {r['fused_ms']:.2f} | {r['ratio']:.3f} | {r['input_spread']:.0%} |")
    return "\n".join(lines)


def summary(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The geometric mean of the measured ratios and the models whose fusions pay at least :data:`GOAL`."""
    import numpy as np

    ratios = [r["ratio"] for r in rows if r["equal"]]
    paying = [f"{r['model']} {r['ratio']:.3f}" for r in rows if r["equal"] and r["ratio"] >= GOAL]
    unequal = [r["model"] for r in rows if not r["equal"]]
    lines = [f"geometric-mean measured ratio over {len(ratios)} models: {float(np.exp(np.mean(np.log(ratios)))):.3f}"
             if ratios else "no model's fused graph equals its input"]
    lines.append(f"paying >= {GOAL}x: {', '.join(paying) or 'none'}")
    return lines + ([f"outputs differ beyond {TOLERANCE:g}: {', '.join(unequal)}"] if unequal else [])


def check_optimizer() -> None:
    """onnxruntime's transformer optimizer needs sympy (its symbolic shape inference): one clear error without it."""
    if importlib.util.find_spec("sympy") is None:
        raise ValueError("experiment ort-fusions runs onnxruntime's transformer optimizer, which needs sympy: "
                         "pip install 'eqsat-lab[ort-fusions]'")


def run(models: str | None, out: Path, *, zoo: Sequence[str] = (), model_types: Sequence[str] = MODEL_TYPES,
        runs: int = RUNS, seed: int = 0, options: RunOptions = RunOptions(),
        command: str = "") -> list[dict[str, Any]]:
    from experiments.runs.zoo import digest, model_files

    check_optimizer()
    from onnxruntime.transformers.optimizer import MODEL_TYPES as KNOWN

    unknown = [t for t in model_types if t not in KNOWN]
    if unknown:
        raise ValueError(f"--model-types: onnxruntime's optimizer has no model type {', '.join(unknown)}")
    if options.workers != 1:
        raise ValueError("experiment ort-fusions times files end to end: run it with --workers 1")
    if models and zoo:
        raise ValueError("--models and --zoo exclude each other: --zoo picks models of the generated zoo")
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    files = model_files(models, out, seed, False, zoo)
    found = run_cells([Cell.of("ort-fusions", "experiments.runs.ort_fusions:fusion_cell", path=str(f), digest=digest(f),
                               model_types=tuple(model_types), runs=runs, seed=seed, out=str(out)) for f in files],
                      out, options=options, desc="ort-fusions: timed")
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    rows = [{"model": f.stem, **cell} for f, cell in zip(files, found)]
    note = (f"(best variant: model type, opt level, heads x width when given; tolerance {TOLERANCE:g}; measured: "
            f"input median / fused median, ORT_ENABLE_ALL both sides, 1 thread, interleaved, >= {runs} runs; load "
            f"average before {' '.join(load_before)}, after {' '.join(load_after)})")
    lines = summary(rows)
    text = ((f"`{command}`\n\n" if command else "") + format_table(rows) + "\n\n" + note + "\n\n"
            + "\n".join(f"- {line}" for line in lines) + "\n")
    write_table(out, "ort_fusions", rows, {"command": command, "load_before": load_before, "load_after": load_after,
                                           "summary": lines})
    write_atomic(out / "ort_fusions.md", text)
    print(text, end="")
    print(f"wrote {out / 'ort_fusions.csv'}, {out / 'ort_fusions.json'} and {out / 'ort_fusions.md'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_zoo_input(p)
    p.add_argument("--model-types", default=",".join(MODEL_TYPES),
                   help=f"onnxruntime optimizer model types to try (default {','.join(MODEL_TYPES)})")
    p.add_argument("--runs", type=positive_int, default=RUNS, help=f"end-to-end runs of each file, at least ({RUNS})")
    add_sweep_options(p, "results/ort_fusions", device=False)


def _run(args: argparse.Namespace) -> int:
    run(args.models, Path(args.out), zoo=split_list(args.zoo), model_types=split_list(args.model_types) or MODEL_TYPES,
        runs=args.runs, seed=args.seed, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("ort-fusions", "the ceiling of onnxruntime's contrib fusions: each model through its transformer "
               "optimizer (model types, opt level 0/1, sizes detected or given), the best graph checked and timed "
               "against the input", _add_arguments, _run,
               outputs=("ort_fusions.csv", "ort_fusions.json", "ort_fusions.md", "models/full/<model>.onnx"),
               input_args=("models",), doc="zoo/README.md#what-onnxruntimes-contrib-fusions-add-on-this-cpu"),
)
