"""``eqsat-lab experiment pytorch``: do the rewrites pay in PyTorch eager on this CPU?

PyTorch eager runs one kernel per op and fuses nothing, which is where TASO and TENSAT measured
their gains. Per model the input graph and the search's best run as :class:`torch.nn.Module`
(:func:`eqsat.pytorch.module.to_module`, the same weights), checked equal, then timed
interleaved (median of ``--runs``, default 40): the original, a second copy of it (the A/A
control: its ratio is the measurement's own noise), the optimized graph; then ``torch.compile``
(inductor) of the original and of the optimized graph, the peer a user would pick instead.
Writes ``pytorch.csv``, ``.json``, ``.md`` and ``pytorch.png`` into ``--out``.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from eqsat.cost.devices import TORCH_CPU
from eqsat.errors import EqsatError
from eqsat.searches import EGRAPH
from experiments.command import Experiment, add_models, command_line, positive_int, seed_int, split_list
from experiments.output import pyplot, save_figure, write_table

RUNS = 40
CHECK_TOLERANCE = 1e-3  # relative, float32: the optimized module against the original


def _modules(graph: Any, best: Any, seed: int, layout: str = "contiguous") -> tuple[dict[str, Any], dict[str, Any],
                                                                                   float]:
    """The original (twice: the A/A control) and the optimized module (its 4-D tensors in
    ``layout``; when that is not PyTorch's default, the optimized graph contiguous too, as
    ``rewritten``: what the rewrites alone give) with one draw of weights and inputs, and the
    largest relative difference of an optimized module from the original."""
    import torch

    from eqsat.pytorch.gpu_check import shared_values
    from eqsat.pytorch.module import to_module
    from eqsat.pytorch.timing import relative_difference

    values = shared_values({"original": graph, "optimized": best}, seed)

    def module(g: Any, layout: str = "contiguous") -> Any:
        names = {leaf.attr("name") for leaf in g.leaves()}
        return to_module(g, {k: v for k, v in values.items() if k in names}, layout=layout).eval()

    mods = {"original": module(graph), "original-copy": module(graph), "optimized": module(best, layout)}
    if layout != "contiguous":
        mods["rewritten"] = module(best)
    inputs = {name: tuple(torch.as_tensor(values[n], dtype=torch.float32) for n in m.input_names)
              for name, m in mods.items()}
    with torch.no_grad():
        expected = mods["original"](*inputs["original"])
        diff = max(relative_difference(expected, mods[name](*inputs[name])) for name in mods if name != "original")
    return mods, inputs, diff


def _user_call(model: str, seed: int) -> Any:
    """The model as its user runs it (a transformers/timm module in eager), or None for a graph."""
    from experiments.zoo.hf import HF, build_module

    if model not in HF:
        return None
    module, inputs = build_module(model, seed)
    return lambda: module(*inputs)


def measure(model: str, graph: Any, best: Any, seed: int, runs: int, inductor: bool,
            layout: str = "contiguous") -> dict[str, Any]:
    """One model's timings in µs: eager original, A/A copy, optimized in ``layout`` (and the
    optimized graph contiguous, when ``layout`` is another; the user's own module for a
    transformers/timm model); inductor of the original and the optimized graph."""
    import torch

    from eqsat.pytorch.module import to_fx
    from eqsat.pytorch.timing import interleaved

    mods, inputs, diff = _modules(graph, best, seed, layout)
    if not diff <= CHECK_TOLERANCE:
        raise AssertionError(f"{model}: the optimized module differs from the original by {diff:.3g} in PyTorch")
    row: dict[str, Any] = {"max_rel_diff": diff}
    with torch.no_grad():
        calls = {name: (lambda m=m, x=inputs[name]: m(*x)) for name, m in mods.items()}
        user = _user_call(model, seed)
        if user is not None:
            calls["user"] = user
        eager = interleaved(calls, "cpu", runs)
        row |= {f"{k}_us": t.median_us for k, t in eager.items()} | {"eager_spread": eager["original"].spread}
        if inductor:
            compiled = {}
            torch._dynamo.reset()  # each model compiles afresh: no cache limit carried over from the last
            for name in ("original", "optimized"):
                start = time.perf_counter()
                x = inputs[name]
                fn = torch.compile(to_fx(mods[name], x))
                fn(*x)
                row[f"compile_{name}_s"] = time.perf_counter() - start
                compiled[name] = lambda fn=fn, x=x: fn(*x)
            row |= {f"inductor_{k}_us": t.median_us for k, t in interleaved(compiled, "cpu", runs).items()}
    return row


def run_model(model: str, search: str, device: str, seed: int, runs: int, quick: bool,
              inductor: bool) -> dict[str, Any]:
    """One model through the optimize job (:func:`eqsat.pipeline.optimize_model`: calibrate,
    search, verify, guards, layout) and then timed as :func:`measure` times it."""
    from eqsat.pipeline import optimize_model
    from eqsat.searches import get_search
    from experiments.runs.gpu_check import model_graph
    from experiments.searches import limits_for

    graph = model_graph(model, seed, quick)
    start = time.perf_counter()
    outcome = optimize_model(graph, search=search, device=device, seed=seed,
                             limits=limits_for(get_search(search), model, quick))
    job_s = time.perf_counter() - start
    result, layout = outcome.result, outcome.layout
    chosen = layout.name if layout is not None else "contiguous"
    timed = measure(model, graph, result.best, seed, runs, inductor, chosen)
    out = {"model": model, "search": search, "device": device, "ops_in": graph.op_count(),
           "ops_out": result.best.op_count(), "predicted_gain": result.original_us / result.best_us,
           "job_s": job_s, "changed": result.best != graph,
           "layout": chosen, "layout_measured_gain": layout.gain if layout is not None else None} | timed
    return out | gains(out)


def gains(row: dict[str, Any]) -> dict[str, Any]:
    """The ratios of a row's timings. ``eager_gain`` is what the user gets; a module identical to the
    original (the same graph, contiguous) is 1.0, its measured ratio (``eager_measured``) being one
    more sample of the noise. Where the layout changed, ``rewrite_gain`` is the optimized graph
    contiguous against the original (1.0 for the same graph) and ``layout_gain`` the rest."""
    measured = row["original_us"] / row["optimized_us"]
    identical = not row["changed"] and row["layout"] == "contiguous"
    out: dict[str, Any] = {"eager_measured": measured, "identical": identical,
                           "eager_gain": 1.0 if identical else measured,
                           "aa_ratio": row["original_us"] / row["original-copy_us"]}
    if row["layout"] != "contiguous":  # the gain split: the rewrites (contiguous), then the layout on top
        rewrite = row["original_us"] / row["rewritten_us"] if row["changed"] else 1.0
        out |= {"rewrite_gain": rewrite, "layout_gain": measured / rewrite}
    else:
        out["rewrite_gain"] = out["eager_gain"]
    if "inductor_optimized_us" in row:
        out["inductor_gain"] = row["inductor_original_us"] / row["inductor_optimized_us"]
        out["ours_vs_inductor"] = row["inductor_original_us"] / row["optimized_us"]
    return out


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


TABLE: tuple[tuple[str, str, str], ...] = (  # column title, row field, format
    ("model", "model", "{}"), ("ops in", "ops_in", "{}"), ("ops out", "ops_out", "{}"),
    ("predicted", "predicted_gain", "{:.3f}x"), ("layout", "layout", "{}"), ("user's module µs", "user_us", "{:.1f}"),
    ("eager orig µs", "original_us", "{:.1f}"), ("eager opt µs", "optimized_us", "{:.1f}"),
    ("eager gain", "eager_gain", "{:.3f}x"), ("measured", "eager_measured", "{:.3f}x"),
    ("of which rewrites", "rewrite_gain", "{:.3f}x"),
    ("of which layout", "layout_gain", "{:.3f}x"), ("A/A", "aa_ratio", "{:.3f}"),
    ("inductor orig µs", "inductor_original_us", "{:.1f}"), ("inductor opt µs", "inductor_optimized_us", "{:.1f}"),
    ("inductor gain", "inductor_gain", "{:.3f}x"), ("opt eager vs inductor orig", "ours_vs_inductor", "{:.3f}x"),
    ("max rel diff", "max_rel_diff", "{:.2g}"),
)


def _cell(row: dict[str, Any], field: str, fmt: str) -> str:
    value = row.get(field)
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    lines = [f"`{command}`", "", "| " + " | ".join(t for t, _, _ in TABLE) + " |", "|---" * len(TABLE) + "|"]
    lines += ["| " + " | ".join(_cell(r, f, fmt) for _, f, fmt in TABLE) + " |" for r in rows]
    lines += ["", "eager gain: 1.000x where the optimized module is the original (the same graph, contiguous); "
              "its measured ratio is then one more sample of the noise", "",
              f"geometric mean eager gain {geomean([r['eager_gain'] for r in rows]):.3f}x over {len(rows)} "
              f"models (A/A {geomean([r['aa_ratio'] for r in rows]):.3f}); the rewrites alone (contiguous) "
              f"{geomean([r['rewrite_gain'] for r in rows]):.3f}x"]
    if any("inductor_gain" in r for r in rows):
        lines.append(f"geometric mean inductor(optimized) / inductor(original) "
                     f"{geomean([r['inductor_gain'] for r in rows if 'inductor_gain' in r]):.3f}x")
    return "\n".join(lines) + "\n"


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.6), 4))
    xs = range(len(rows))
    ax.bar([x - 0.27 for x in xs], [r["rewrite_gain"] for r in rows], 0.27,
           label="eager: the rewrites alone (contiguous)")
    ax.bar(list(xs), [r["eager_gain"] for r in rows], 0.27, label="eager: optimized in its layout / original")
    if any("inductor_gain" in r for r in rows):
        ax.bar([x + 0.27 for x in xs], [r.get("inductor_gain", 0) for r in rows], 0.27,
               label="inductor: optimized / original")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs), [r["model"] for r in rows], rotation=45, ha="right")
    ax.set_ylabel("speedup (median of interleaved runs)")
    top = max([r["eager_gain"] for r in rows] + [r.get("inductor_gain", 0) for r in rows] + [1.0])
    wide = len(rows) >= 12  # a narrow figure stacks the legend's entries
    ax.set_ylim(0, top * (1.35 if wide else 1.5))  # room above the bars for the legend
    ax.legend(loc="upper left", fontsize="small", ncol=2 if wide else 1)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def write(out: Path, rows: list[dict[str, Any]], command: str, threads: int) -> None:
    """The csv, json, md and figure of the rows so far."""
    import torch

    from eqsat.files import write_atomic

    write_table(out, "pytorch", rows, {"command": command, "threads": threads, "torch": torch.__version__})
    write_atomic(out / "pytorch.md", markdown(rows, command))
    figure(rows, out / "pytorch.png")


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from experiments.runs.gpu_check import BENCHMARKS

    add_models(p, f"the ten benchmark graphs ({', '.join(BENCHMARKS)}), the zoo and the installed transformers/timm "
                  "models")
    p.add_argument("--search", default=EGRAPH, help=f"the search (default {EGRAPH})")
    p.add_argument("--device", default=TORCH_CPU.name,
                   help=f"the device the search prices on (default {TORCH_CPU.name})")
    p.add_argument("--out", default="results/pytorch", help="output folder (default results/pytorch)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of weights and inputs")
    p.add_argument("--runs", type=positive_int, default=RUNS, help=f"timed runs per variant (default {RUNS})")
    p.add_argument("--threads", type=positive_int, default=1, help="PyTorch intra-op threads (default 1)")
    p.add_argument("--no-inductor", action="store_true", help="skip torch.compile")
    p.add_argument("--quick", action="store_true", help="small sizes and quick limits (a smoke run)")


def _run(args: argparse.Namespace) -> int:
    import torch

    from experiments.runs.gpu_check import default_models

    torch.set_num_threads(args.threads)
    models = split_list(args.models) or default_models()
    out = Path(args.out)
    rows = []
    command = command_line()
    for model in models:
        try:
            row = run_model(model, args.search, args.device, args.seed, args.runs, args.quick, not args.no_inductor)
        except EqsatError as exc:  # a model the exporter or importer refuses: named, the others go on
            print(f"{model}: skipped ({exc})", flush=True)
            continue
        print(f"{model}: eager {row['original_us']:.1f} -> {row['optimized_us']:.1f} µs ({row['eager_gain']:.3f}x, "
              f"A/A {row['aa_ratio']:.3f})" + (f", inductor {row['inductor_gain']:.3f}x" if "inductor_gain" in row
                                               else ""), flush=True)
        rows.append(row)
        write(out, rows, command, args.threads)  # after every model: a long run killed midway keeps what it measured
    print(markdown(rows, command))
    return 0


EXPERIMENTS = (
    Experiment("pytorch", "each model and its optimized graph run in PyTorch eager on this CPU (and through "
               "torch.compile), timed interleaved with an A/A control", _add_arguments, _run,
               outputs=("pytorch.csv", "pytorch.json", "pytorch.md", "pytorch.png"), doc="pytorch/README.md"),
)
