"""``eqsat-lab experiment real``: optimize for this CPU with measured costs, and measure the gain.

One cell per benchmark model. The builder graph is written as an ONNX file (random weights),
read back, and optimized by both searches on ``ort-cpu`` (kernels timed in onnxruntime on this
machine, :mod:`eqsat.cost.measured`) and, to show what a wrong cost model costs, by the e-graph on the
roofline ``h100``, each as ``eqsat-lab optimize`` does it (:func:`eqsat.pipeline.optimize_model`:
calibration, the guards, the written file checked in onnxruntime) at the papers' limits, in
standard ONNX. Every file is priced again as written (the file's price, not the search's graph),
and all of a model's files are timed end to end, alternately, in onnxruntime's CPU provider at
``ENABLE_ALL`` with one thread.

The cost model's accuracy is measured over candidate graphs: the input, each written file and
up to :data:`PATH_GRAPHS` graphs on the α search's path to its best; each is priced (kernels plus
one run call) and timed end to end. The summary gives Kendall's τ between predicted and measured
latency over all candidates, the median per-model τ, and the mean relative error.

Searching and timing are separate cells: every model is searched first, then every model's files
are timed in a quiet machine (no search running), with the input once more as a control (the
ratio of two copies of one file is the measurement's own noise).
"""
from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE, ORT_CPU
from eqsat.pipeline import optimize_model
from experiments.command import Experiment, add_models, add_sweep_options, split_list, sweep_kwargs, thread_count
from experiments.compare import COMPARE_MODELS, check_models
from experiments.onnx_io import TOLERANCE
from experiments.output import pyplot, save_figure, write_json, write_table
from experiments.searches import ALPHA, EGRAPH, get_search, limits_for, prepare_rules
from experiments.sweep import Cell, RunOptions, run_cells

VARIANTS = (ALPHA, EGRAPH)  # searched on ort-cpu
WRONG_MODEL = DEFAULT_DEVICE  # the roofline device whose best graph is also run on this CPU
PATH_GRAPHS = 4
QUICK_MODELS = {"resnet_block": {"n": 1, "c": 32, "hw": 28}, "lora": {"tokens": 64, "d_model": 512, "rank": 16}}
E2E_RUNS, E2E_SECONDS = 40, 5.0  # end-to-end timing: runs per model at least, and seconds at least
CONTROL = "original-copy"  # the input again, in its own sessions: the measurement's own noise (A/A)


def search_model(model: str, seed: int, out: str, quick: bool = False, threads: int = 1) -> dict[str, Any]:
    """One model: both searches on ``ort-cpu`` and the e-graph on the roofline, every file written,
    checked against the input in onnxruntime and priced as written; candidate graphs from the α
    search's path for the accuracy study. Returns the files and their prices (no timing yet)."""
    from eqsat import onnx as onnx_io
    from eqsat.cost.registry import cost_model
    from eqsat.models import build
    device = ORT_CPU.with_threads(threads)
    folder = Path(out) / "models"
    folder.mkdir(parents=True, exist_ok=True)
    params = QUICK_MODELS.get(model, {}) if quick else {}
    src = folder / f"{model}.onnx"
    onnx_io.export_graph(build(model, **params), src, seed=seed)
    imported = onnx_io.load(src)
    cost = cost_model(device, progress=False)
    t0 = time.perf_counter()
    cost.graph_time_us(imported.graph)
    files: dict[str, Path] = {"original": src}
    searches: dict[str, Any] = {}
    path_graphs: list[Any] = []
    for name, search, dev in [(v, v, device) for v in VARIANTS] + [(WRONG_MODEL, EGRAPH, WRONG_MODEL)]:
        # what `eqsat-lab optimize` does to the file (calibration, guards, the written file checked), at
        # the papers' limits for the benchmark model and in standard ONNX
        files[name] = folder / f"{model}.{name}.onnx"
        engine = get_search(search)
        if not quick:
            prepare_rules(search)  # parsed and compiled once per process, so a search's time is its own
        outcome = optimize_model(src, search=search, device=dev, seed=seed, out=files[name], onnx_ops="standard",
                                 limits=limits_for(engine, model, quick))
        result = outcome.result
        searches[name] = {"search_s": result.search_s, "stop": result.stop, "verified": result.verified.equal,
                          "changed": not outcome.written.file.input_copied,
                          "kept": None if result.kept is None else result.kept.guard}
        if search == ALPHA and dev == device:
            path_graphs = _spread(list(result.work.path_graphs), PATH_GRAPHS)
    diffs = {}
    for name, path in files.items():
        try:
            diffs[name] = onnx_io.max_difference(src, path, seed=seed)
        except onnx_io.OnnxError:
            diffs[name] = math.nan  # float32 overflow on random inputs: the search verified in float64
        if diffs[name] > TOLERANCE:
            raise AssertionError(f"{model}: {path} differs from the input by {diffs[name]:.3g} in onnxruntime")
    for i, g in enumerate(path_graphs):
        files[f"path{i}"] = folder / f"{model}.path{i}.onnx"
        onnx_io.save(imported, g, files[f"path{i}"])
    predicted = {k: cost.latency_us(onnx_io.load(p).graph) for k, p in files.items()}
    return {"model": model, "device": device, "ops": imported.graph.op_count(),
            "search_and_pricing_s": time.perf_counter() - t0, "kernels_timed": cost.measured,
            "files": {k: str(p) for k, p in files.items()}, "predicted_us": predicted, "searches": searches,
            "max_diff": diffs}


def measure_model(model: str, files: tuple[tuple[str, str], ...], seed: int, threads: int = 1,
                  quick: bool = False) -> dict[str, Any]:
    """Every file of one model timed end to end (onnxruntime CPU, ENABLE_ALL, ``threads``
    threads), alternately, with the input once more as a control."""
    from eqsat.cost.measured.timer import time_files

    named = dict(files) | {CONTROL: dict(files)["original"]}
    t0 = time.perf_counter()
    timings = time_files(list(named.values()), "ENABLE_ALL", runs=10 if quick else E2E_RUNS, seed=seed,
                         threads=threads, min_seconds=1.0 if quick else E2E_SECONDS)
    return {"model": model, "measure_s": time.perf_counter() - t0,
            "timings": {k: {"median_us": t.median_us, "p10_us": t.p10_us, "p90_us": t.p90_us, "runs": t.runs}
                        for k, t in zip(named, timings)}}


def real_row(found: dict[str, Any], timed: dict[str, Any]) -> dict[str, Any]:
    """One model's row: measured and predicted speedup of every search's file, and its candidates."""
    predicted, measured = found["predicted_us"], timed["timings"]
    base = measured["original"]["median_us"]
    row = {k: found[k] for k in ("model", "device", "ops", "search_and_pricing_s", "kernels_timed")}
    row |= {"measure_s": timed["measure_s"], "original_ms": base / 1e3,
            "original_predicted_ms": predicted["original"] / 1e3,
            "control_ratio": base / measured[CONTROL]["median_us"]}
    for name in (*VARIANTS, WRONG_MODEL):
        s, m = found["searches"][name], measured[name]
        # a kept input is the input file itself: its speedup is 1, and its measured ratio the A/A noise
        row |= {f"{name}_ms": m["median_us"] / 1e3, f"{name}_p10_ms": m["p10_us"] / 1e3,
                f"{name}_p90_ms": m["p90_us"] / 1e3, f"{name}_measured_ratio": base / m["median_us"],
                f"{name}_speedup": base / m["median_us"] if s["changed"] else 1.0,
                f"{name}_predicted_speedup": predicted["original"] / predicted[name],
                f"{name}_changed": s["changed"], f"{name}_search_s": s["search_s"], f"{name}_verified": s["verified"],
                f"{name}_max_diff": found["max_diff"][name], f"{name}_stop": s["stop"]}
    row["candidates"] = [{"graph": k, "predicted_us": predicted[k], **measured[k]} for k in predicted]
    for c in row["candidates"]:
        c["measured_us"] = c.pop("median_us")
    return row


def _spread(items: list[Any], k: int) -> list[Any]:
    """At most ``k`` items, evenly spaced, the last one excluded (it is the search's best)."""
    items = items[:-1]
    if len(items) <= k:
        return items
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def accuracy(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Kendall's τ (pooled, and the median over models) and the mean relative error of predicted
    against measured end-to-end latency over every candidate graph."""
    from scipy.stats import kendalltau

    pred = [c["predicted_us"] for r in rows for c in r["candidates"]]
    meas = [c["measured_us"] for r in rows for c in r["candidates"]]
    per_model = []
    for r in rows:
        p = [c["predicted_us"] for c in r["candidates"]]
        m = [c["measured_us"] for c in r["candidates"]]
        if len(set(p)) > 1 and len(set(m)) > 1:
            per_model.append(float(kendalltau(p, m).statistic))
    per_model.sort()
    pooled = float(kendalltau(pred, meas).statistic) if len(pred) > 1 else math.nan
    return {"candidates": len(pred), "kendall_tau": pooled,
            "kendall_tau_per_model_median": per_model[len(per_model) // 2] if per_model else math.nan,
            "mean_relative_error": sum(abs(p - m) / m for p, m in zip(pred, meas)) / len(pred)}


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"models": len(rows), **accuracy(rows),
                           "control_worst_deviation": max(abs(r["control_ratio"] - 1) for r in rows)}
    for name in (*VARIANTS, WRONG_MODEL):
        speedups = [r[f"{name}_speedup"] for r in rows]
        out[f"{name}_geomean_speedup"] = geomean(speedups)
        out[f"{name}_worst_speedup"] = min(speedups)
        out[f"{name}_geomean_predicted"] = geomean([r[f"{name}_predicted_speedup"] for r in rows])
    return out


def format_rows(rows: Sequence[dict[str, Any]], summ: dict[str, Any]) -> str:
    head = (f"{'model':14s} {'orig ms':>9s} {'pred ms':>9s} {'A/A':>6s} " +
            " ".join(f"{n + ' meas/pred':>19s}" for n in (*VARIANTS, WRONG_MODEL)))
    lines = [head]
    for r in rows:
        cells = " ".join(f"{r[f'{n}_speedup']:8.3f}x/{r[f'{n}_predicted_speedup']:7.3f}x"
                         f"{'' if r[f'{n}_changed'] else '='}" for n in (*VARIANTS, WRONG_MODEL))
        lines.append(f"{r['model']:14s} {r['original_ms']:9.2f} {r['original_predicted_ms']:9.2f} "
                     f"{r['control_ratio']:6.3f} {cells}")
    lines.append("(meas/pred: measured/predicted speedup over the input; = : the search kept the input graph, and "
                 "its file is the input file, speedup 1 by construction (measured_ratio in the CSV is the noise); A/A: "
                 "the input against a copy of itself, the measurement's own noise)")
    lines.append("geomean measured speedup: " + ", ".join(
        f"{n} {summ[f'{n}_geomean_speedup']:.3f}x (worst {summ[f'{n}_worst_speedup']:.3f}x)"
        for n in (*VARIANTS, WRONG_MODEL)))
    lines.append(f"cost-model accuracy over {summ['candidates']} candidate graphs: Kendall τ {summ['kendall_tau']:.3f} "
                 f"(median per model {summ['kendall_tau_per_model_median']:.3f}), mean relative error "
                 f"{summ['mean_relative_error']:.1%}")
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    for r in rows:
        xs = [c["predicted_us"] / 1e3 for c in r["candidates"]]
        ys = [c["measured_us"] / 1e3 for c in r["candidates"]]
        ax.scatter(xs, ys, s=14, label=r["model"])
    lo = min(min(c["predicted_us"], c["measured_us"]) for r in rows for c in r["candidates"]) / 1e3
    hi = max(max(c["predicted_us"], c["measured_us"]) for r in rows for c in r["candidates"]) / 1e3
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted latency (ms, ort-cpu kernels + run call)")
    ax.set_ylabel("measured latency (ms, onnxruntime ENABLE_ALL, 1 thread)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, out / "real.png", dpi=120)
    plt.close(fig)


def run(models: Sequence[str] | None, out: Path, *, seed: int = 0, quick: bool = False, threads: int = 1,
        options: RunOptions = RunOptions(), command: str = "") -> list[dict[str, Any]]:
    models = check_models(models or (tuple(QUICK_MODELS) if quick else COMPARE_MODELS))
    if options.workers != 1:
        raise ValueError("experiment real times models end to end: run it with --workers 1")
    cells = [Cell.of("real", "experiments.runs.real:search_model", model=m, seed=seed, out=str(out), quick=quick,
                     threads=threads) for m in models]
    found = run_cells(cells, out, options=options, desc="real: search")
    timing = [Cell.of("real", "experiments.runs.real:measure_model", model=f["model"], seed=seed, threads=threads,
                      quick=quick, files=tuple(f["files"].items())) for f in found]
    timed = run_cells(timing, out, options=options, desc="real: time end to end")
    rows = [real_row(f, t) for f, t in zip(found, timed)]
    summ = summary(rows)
    flat = [{k: v for k, v in r.items() if k != "candidates"} for r in rows]
    write_table(out, "real", flat, {"command": command, "summary": summ})
    write_json(out / "real_candidates.json", [{"model": r["model"], "candidates": r["candidates"]} for r in rows])
    plot(rows, out)
    print(format_rows(rows, summ))
    print(f"wrote {out / 'real.csv'}, {out / 'real.json'}, {out / 'real_candidates.json'} and {out / 'real.png'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "the compare suite")
    p.add_argument("--quick", action="store_true", help="two small models, smoke-test search limits")
    p.add_argument("--threads", type=thread_count, default=1, help="onnxruntime intra-op threads (default 1)")
    add_sweep_options(p, "results/real", device=False)


def _run(args: argparse.Namespace) -> int:
    run(split_list(args.models) or None, Path(args.out), seed=args.seed, quick=args.quick, threads=args.threads,
        **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("real", "optimize on measured ort-cpu costs; measure original and optimized end to end on this CPU",
               _add_arguments, _run, outputs=("real.csv", "real.json", "real_candidates.json", "real.png"),
               doc="README.md#measured-cost-model-end-to-end"),
)
