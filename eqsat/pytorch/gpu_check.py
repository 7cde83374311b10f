"""The GPU check's measuring half: ``python -m eqsat.pytorch.gpu_check FOLDER OUT``.

It reads what ``eqsat-lab experiment gpu-check`` wrote on the searching machine (a manifest and
one graph file per model and variant, without weights), runs every graph in PyTorch on the GPU
with weights drawn from the manifest's seed (the same draw for a model's original and optimized
graph), checks the variants agree, and times each as a user would run it: eager (one launch per
op), replayed from a CUDA graph (launch overhead removed) and through ``torch.compile`` (inductor,
the peer a user picks instead). A variant the manifest lists under ``layouts`` is a graph run with
its 4-D tensors ``channels_last`` (the searching half adds the optimized graph so, for a model with
convolutions: PyTorch leaves the layout to its caller). It writes ``gpu_check.csv``, ``.json`` and ``.md`` into OUT.

It imports numpy, torch and eqsat's graph and PyTorch modules only, so it runs on a bare CUDA
machine with a stock PyTorch and none of the search's dependencies. Without a GPU it runs on the
CPU (for a dry run; the numbers are then the CPU's).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}
CHECK_TOLERANCE = 1e-3  # relative, float32 on the device: the optimized graph against the original
MEASURED = ("eager_us", "eager_spread", "graph_us", "compile_us", "compile_s", "max_rel_diff", "changed", "note",
            "dtype", "layout")


def environment(device: str) -> dict[str, Any]:
    """What ran the check: GPU, driver, CUDA and PyTorch versions, host."""
    import torch

    env: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
                           "host_cpus": __import__("os").cpu_count(), "device": device}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        env |= {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                "multiprocessors": props.multi_processor_count}
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            env["nvidia_smi"] = smi.stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            env["nvidia_smi"] = f"unavailable ({exc})"
    return env


def shared_values(graphs: dict[str, Any], seed: int) -> dict[str, Any]:
    """One draw of weights and inputs for every variant of a model (drawn from the original graph,
    so the variants compute the same function on the same numbers)."""
    from eqsat.ir.evaluate import random_leaves

    values = random_leaves(graphs["original"], seed)
    for graph in graphs.values():  # a leaf only an optimized graph has (none today) gets its own draw
        values |= {k: v for k, v in random_leaves(graph, seed).items() if k not in values}
    return values


def _modules(graphs: dict[str, Any], values: dict[str, Any], device: str, dtype: str,
             layouts: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, tuple]]:
    """One module per variant on ``device`` in ``dtype`` (its 4-D tensors in the variant's entry of
    ``layouts``, default contiguous), and its inputs, from the shared values."""
    import torch

    from eqsat.pytorch.module import to_module

    modules, inputs = {}, {}
    for name, graph in graphs.items():
        leaves = {leaf.attr("name") for leaf in graph.leaves()}
        module = to_module(graph, {k: v for k, v in values.items() if k in leaves}, device=device, dtype=dtype,
                           layout=(layouts or {}).get(name, "contiguous"))
        modules[name] = module.eval()
        inputs[name] = tuple(torch.as_tensor(values[n]).to(device=device, dtype=getattr(torch, dtype))
                             for n in module.input_names)
    return modules, inputs


def _check(graphs: dict[str, Any], values: dict[str, Any], device: str,
           layouts: dict[str, str] | None = None) -> dict[str, float]:
    """Each variant's outputs against the original's, in float32 on the device."""
    import torch

    from eqsat.pytorch.timing import relative_difference

    modules, inputs = _modules(graphs, values, device, "float32", layouts)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # float32 means float32 here
    with torch.no_grad():
        ref = modules["original"](*inputs["original"])
        diffs = {name: relative_difference(ref, m(*inputs[name])) for name, m in modules.items()}
    del modules, inputs
    return diffs


def _prepared(entry: dict[str, Any], folder: Path, seed: int, device: str) -> tuple[dict, dict, dict, str]:
    """A model's graphs, their float32 check against the original, and modules in the graph's dtype
    (a variant named in the entry's ``layouts`` is its graph run with its 4-D tensors so laid out)."""
    from eqsat.ir.graphfile import read_graph

    graphs = {name: read_graph(folder / path) for name, path in entry["graphs"].items()}
    layouts = entry.get("layouts", {})
    values = shared_values(graphs, seed)
    diffs = _check(graphs, values, device, layouts)
    dtype = DTYPES.get(graphs["original"].dtype, "float32")
    modules, inputs = _modules(graphs, values, device, dtype, layouts)
    rows = {name: {"model": entry["model"], "variant": name, "ops": graphs[name].op_count(),
                   **{f"pred_{dev}_us": prices.get(name, math.nan) for dev, prices in entry["predicted"].items()},
                   "max_rel_diff": diffs[name], "note": "", "dtype": dtype,
                   "layout": layouts.get(name, "contiguous"),
                   "changed": graphs[name] != graphs["original"] or name in layouts} for name in graphs}
    return rows, modules, inputs, dtype


def _release(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def measure_model(entry: dict[str, Any], folder: Path, seed: int, device: str, runs: int) -> list[dict[str, Any]]:
    """Rows for one model's variants: checked, then timed eager and replayed from a CUDA graph."""
    import torch

    from eqsat.pytorch.timing import cuda_graph, interleaved

    rows, modules, inputs, _ = _prepared(entry, folder, seed, device)
    with torch.no_grad():
        calls = {name: (lambda m=m, x=inputs[name]: m(*x)) for name, m in modules.items()}
        for name, timing in interleaved(calls, device, runs).items():
            rows[name] |= {"eager_us": timing.median_us, "eager_spread": timing.spread}
        if device.startswith("cuda"):
            replays = {}
            for name, fn in calls.items():
                try:
                    replays[name] = cuda_graph(fn)
                except Exception as exc:  # noqa: BLE001 - a graph that cannot be captured is a row's note
                    rows[name]["note"] += f"no CUDA graph ({type(exc).__name__}); "
            for name, timing in interleaved(replays, device, runs).items():
                rows[name]["graph_us"] = timing.median_us
    del modules, inputs, calls
    _release(device)
    return list(rows.values())


def compile_model(entry: dict[str, Any], folder: Path, seed: int, device: str, runs: int) -> dict[str, dict]:
    """``torch.compile`` (inductor, default mode) of each variant as one FX graph: the compiled
    median and the compile seconds per variant, or why it failed."""
    import torch

    from eqsat.pytorch.module import to_fx
    from eqsat.pytorch.timing import interleaved

    rows, modules, inputs, _ = _prepared(entry, folder, seed, device)
    out: dict[str, dict] = {name: {"note": ""} for name in modules}
    compiled = {}
    torch._dynamo.reset()  # each model compiles afresh: no cache limit carried over from the last
    with torch.no_grad():
        for name, module in modules.items():
            start = time.perf_counter()
            try:
                x = inputs[name]
                fn = torch.compile(to_fx(module, x))
                compiled[name] = lambda fn=fn, x=x: fn(*x)
                compiled[name]()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - inductor failing on a graph is a finding, not a crash
                out[name]["note"] = f"torch.compile failed ({type(exc).__name__}: {str(exc)[:80]}); "
                compiled.pop(name, None)
            out[name]["compile_s"] = time.perf_counter() - start
        for name, timing in interleaved(compiled, device, runs).items():
            out[name]["compile_us"] = timing.median_us
    del modules, inputs, compiled
    _release(device)
    return out


def _fmt(v: Any, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.4g}{unit}" if isinstance(v, float) else f"{v}{unit}"


def _ratio(a: Any, b: Any) -> str:
    try:
        return f"{a / b:.3f}x" if a and b and not (math.isnan(a) or math.isnan(b)) else ""
    except TypeError:
        return ""


def markdown(rows: Sequence[dict[str, Any]], env: dict[str, Any], priced: Sequence[str]) -> str:
    """The table a reader compares: per model and optimized variant, predicted gain (on each
    roofline profile in ``priced``) against measured."""
    lines = [f"GPU check on {env.get('gpu', env['device'])} (torch {env['torch']}, CUDA {env['cuda']}, "
             f"nvidia-smi: {env.get('nvidia_smi', 'n/a')}); medians of interleaved runs.", "",
             "| model | variant | ops | " + " | ".join(f"predicted {d}" for d in priced)
             + " | eager | eager gain | CUDA graph | graph gain | torch.compile | compile gain | max rel diff |",
             "|---" * (10 + len(priced)) + "|"]
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["variant"]] = r
    for model, variants in by_model.items():
        o = variants.get("original", {})
        for name, r in variants.items():
            if name == "original":
                cells = [_fmt(r.get(f"pred_{d}_us"), " µs") for d in priced] + [
                    _fmt(r.get("eager_us"), " µs"), "", _fmt(r.get("graph_us"), " µs"), "",
                    _fmt(r.get("compile_us"), " µs"),
                    f"{_ratio(r.get('eager_us'), r.get('compile_us'))} (eager/compile)"]
            else:
                cells = [_ratio(o.get(f"pred_{d}_us"), r.get(f"pred_{d}_us")) for d in priced] + [
                    _fmt(r.get("eager_us"), " µs"), _ratio(o.get("eager_us"), r.get("eager_us")),
                    _fmt(r.get("graph_us"), " µs"), _ratio(o.get("graph_us"), r.get("graph_us")),
                    _fmt(r.get("compile_us"), " µs"), _ratio(o.get("compile_us"), r.get("compile_us"))]
            lines.append(f"| {model} | {name} | {r['ops']} | " + " | ".join(cells) + f" | {_fmt(r['max_rel_diff'])} |")
    return "\n".join(lines + [""] + summary(by_model, priced)) + "\n"


def _geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def summary(by_model: dict[str, dict[str, dict[str, Any]]], priced: Sequence[str]) -> list[str]:
    """Geometric means of the gains, over the models the search changed, and the same ratio over
    the models it left alone (two copies of one graph: the measurement's own noise)."""
    pairs = [(v["original"], r) for v in by_model.values() for n, r in v.items()
             if n != "original" and "original" in v and "eager_us" in r and "eager_us" in v["original"]]
    lines = []
    for changed in (True, False):
        group = [(o, r) for o, r in pairs if bool(r.get("changed", True)) == changed]
        if not group:
            continue
        gains = {key: _geomean([o.get(key, math.nan) / r.get(key, math.nan) for o, r in group
                                if r.get(key) and o.get(key)])
                 for key in (*(f"pred_{d}_us" for d in priced), "eager_us", "graph_us", "compile_us")}
        what = f"{len(group)} models the search changed" if changed else \
            f"{len(group)} models it left alone (the same graph twice: noise)"
        predicted = ", ".join(f"{d} {gains[f'pred_{d}_us']:.3f}x" for d in priced)
        lines.append(f"Geometric mean over {what}: predicted {predicted}; measured eager {gains['eager_us']:.3f}x, "
                     f"CUDA graph "
                     f"{gains['graph_us']:.3f}x, torch.compile of each {gains['compile_us']:.3f}x.")
    return lines


def run(folder: Path, out: Path, runs: int = 60, budget_s: float = 270.0, models: Sequence[str] = (),
        compile_share: float = 0.5) -> int:
    """Measure every model of the manifest in ``folder``; write csv/json/md into ``out``."""
    import torch

    manifest = json.loads((folder / MANIFEST).read_text())
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = environment(device)
    print(json.dumps(env), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    entries = [e for e in manifest["models"] if (not models or e["model"] in models) and "graphs" in e]
    seed = manifest["seed"]

    def log(model: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {model}: "
              + "; ".join(f"{r['variant']} eager {_fmt(r.get('eager_us'))} graph {_fmt(r.get('graph_us'))} "
                          f"compile {_fmt(r.get('compile_us'))} {r.get('note', '')}"
                          for r in rows if r["model"] == model), flush=True)

    timing_end = start + budget_s * (1 - compile_share)
    for entry in entries:  # first every model eager and replayed: the check's core
        if time.perf_counter() > timing_end + budget_s * compile_share * 0.5:
            rows.append({"model": entry["model"], "variant": "original", "note": "not measured: the budget is spent"})
            continue
        try:
            rows += measure_model(entry, folder, seed, device, runs)
        except Exception as exc:  # noqa: BLE001 - one model failing must not lose the others' numbers
            rows.append({"model": entry["model"], "variant": "original",
                         "note": f"failed: {type(exc).__name__}: {str(exc)[:200]}"})
        log(entry["model"])
    for entry in entries:  # then torch.compile, in the manifest's order, while the budget lasts
        mine = {r["variant"]: r for r in rows if r["model"] == entry["model"] and "eager_us" in r}
        if not mine:
            continue
        if time.perf_counter() - start > budget_s:
            for r in mine.values():
                r["note"] += "torch.compile not run (the check's budget is spent); "
            continue
        try:
            for name, got in compile_model(entry, folder, seed, device, runs).items():
                note = got.pop("note")
                mine[name] |= got
                mine[name]["note"] += note
        except Exception as exc:  # noqa: BLE001
            for r in mine.values():
                r["note"] += f"torch.compile failed ({type(exc).__name__}); "
        log(entry["model"])
    payload = {"environment": env, "manifest": {k: v for k, v in manifest.items() if k != "models"},
               "seconds": time.perf_counter() - start, "rows": rows}
    (out / "gpu_check.json").write_text(json.dumps(payload, indent=1, default=str))
    buf = io.StringIO()
    priced = manifest.get("priced_on", [])
    columns = ["model", "variant", "ops", *(f"pred_{d}_us" for d in priced), *MEASURED]
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    (out / "gpu_check.csv").write_text(buf.getvalue())
    (out / "gpu_check.md").write_text(markdown([r for r in rows if "ops" in r], env, priced))
    print(f"wrote {out}/gpu_check.csv, .json, .md in {time.perf_counter() - start:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eqsat.pytorch.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="the folder 'eqsat-lab experiment gpu-check' wrote")
    p.add_argument("out", type=Path, help="where gpu_check.csv/.json/.md go")
    p.add_argument("--runs", type=int, default=60, help="timed runs per variant and mode (default 60)")
    p.add_argument("--budget-s", type=float, default=270.0, help="seconds for the whole check (default 270)")
    p.add_argument("--models", default="", help="comma-separated models of the manifest (default all)")
    p.add_argument("--compile-share", type=float, default=0.5,
                   help="share of the budget torch.compile may take (default 0.5; 0: no torch.compile)")
    args = p.parse_args(argv)
    if not (args.folder / MANIFEST).is_file():
        print(f"{args.folder}: no {MANIFEST}; run 'eqsat-lab experiment gpu-check' first", file=sys.stderr)
        return 2
    return run(args.folder, args.out, args.runs, args.budget_s, [m for m in args.models.split(",") if m],
               args.compile_share)


if __name__ == "__main__":
    sys.exit(main())
