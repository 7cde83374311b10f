"""``eqsat-lab experiment zoo``: a folder of ONNX files through both searches on both kinds of device.

One cell per (model, search, device) runs ``eqsat-lab optimize MODEL.onnx`` itself (which is
:func:`eqsat.pipeline.optimize_model` and its report), in a child process with a time limit, so a
file gets exactly what a user gets (the same import, search, onnxruntime check and written file)
and a model that fails, hangs or outgrows its memory is a row with its one-line error instead of
ending the run: a hung saturation or ILP solve cannot be stopped from inside the process, only
killed with its process group. A written file that is not the input is then timed against
the input end to end (onnxruntime CPU, ``ORT_ENABLE_ALL`` on both sides, one thread, the two
interleaved in several sessions, the median of at least ``--runs`` runs each); a file the search
left as the input is the input copied, ratio 1 by construction, and is not timed. One cell per
model counts its ONNX nodes and the nodes the importer leaves opaque.

Without ``--models`` the twelve architectures of :data:`experiments.zoo.ZOO` are generated into
the output folder first. Cells resume from the output folder; a cell's key includes a digest of
its model file, so a changed file is run again.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE, ORT_CPU
from eqsat.cost.registry import is_measured
from eqsat.files import write_atomic
from experiments.command import (
    Experiment,
    add_sweep_options,
    add_zoo_input,
    device_list,
    positive_int,
    positive_seconds,
    split_list,
    sweep_kwargs,
)
from experiments.onnx_io import TOLERANCE
from experiments.output import write_table
from experiments.sweep import Cell, RunOptions, run_cells

DEVICES = (ORT_CPU.name, DEFAULT_DEVICE)  # this machine measured, and the papers' GPU
TIMEOUT_S = 300.0  # the issue's bound for one optimize run on 2 cores
RUNS = 40
QUICK_MODELS = ("lora_mlp", "unet")  # written at their small sizes
QUICK_RUNS = 5
ROOT = Path(__file__).resolve().parents[2]


def digest(path: str | Path) -> str:
    """SHA-1 of a file's bytes: part of every cell key, so an edited model is run again."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def inspect_model(path: str, digest: str) -> dict[str, Any]:
    """ONNX nodes in the file and the nodes the importer keeps opaque, by op type."""
    import onnx

    from eqsat import onnx as onnx_io

    nodes = None
    try:
        nodes = len(onnx.load(path, load_external_data=False).graph.node)
        opaque = onnx_io.load(path).opaque
    except Exception as exc:  # a file onnx or the importer refuses is a row, not a crash
        return {"onnx_ops": nodes, "opaque": None, "opaque_types": {}, "import_error": _one_line(str(exc))}
    return {"onnx_ops": nodes, "opaque": len(opaque), "import_error": "",
            "opaque_types": dict(Counter(o.split(" ", 1)[0] for o in opaque))}


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _scrub(text: str) -> str:
    """``text`` with paths under the temporary folder replaced: a table cites no temporary file."""
    return re.sub(re.escape(tempfile.gettempdir().rstrip("/")) + r"/[^\s:;,)]+", "<temporary file>", text)


def _error_line(stderr: str, code: int) -> str:
    """The child's one-line error (``eqsat-lab: error: ...``), else its last line, else the code."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln.split("error: ", 1)[1] for ln in lines if ln.startswith("eqsat-lab: error: ")]
    return _one_line(errors[-1] if errors else (lines[-1] if lines else f"exit code {code}"))


def optimize_command(model: str, search: str, device: str, out_file: str, json_file: str, seed: int,
                     quick: bool) -> list[str]:
    """The ``eqsat-lab optimize`` command line of one cell."""
    cmd = [sys.executable, "-m", "experiments.cli", "optimize", model, "--search", search, "--device", device,
           "--out", out_file, "--json", json_file, "--seed", str(seed)]
    return cmd + (["--preset", "quick"] if quick else [])


def run_optimize(cmd: Sequence[str], timeout: float) -> tuple[int | None, str, float]:
    """Run ``cmd`` in its own process group; on timeout kill that group. (exit code or None, stderr, s)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
        return proc.returncode, err, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, "", time.perf_counter() - t0
    except BaseException:  # interrupted: the child has its own session, so end it here, not leave it running
        os.killpg(proc.pid, signal.SIGKILL)
        raise


def optimize_cell(model: str, digest: str, search: str, device: str, seed: int, timeout: float, runs: int,
                  quick: bool, out: str) -> dict[str, Any]:
    """``eqsat-lab optimize`` on one file, one search, one device; the written file timed against
    the input when it differs from it."""
    stem = f"{Path(model).stem}.{search}.{device.replace(':', '-')}"
    folder = Path(out) / "models" / "optimized"  # beside the generated models: large, never committed
    folder.mkdir(parents=True, exist_ok=True)
    out_file, json_file = folder / f"{stem}.onnx", folder / f"{stem}.json"
    json_file.unlink(missing_ok=True)
    code, err, wall = run_optimize(optimize_command(model, search, device, str(out_file), str(json_file), seed,
                                                    quick), timeout)
    row: dict[str, Any] = {"wall_s": wall}
    if code is None:
        return row | {"status": "timeout", "error": f"did not finish within {timeout:g} s"}
    if code != 0 or not json_file.exists():
        return row | {"status": f"exit {code}", "error": _error_line(err, code)}
    payload = json.loads(json_file.read_text())
    onnx_row = payload["onnx"]
    row |= {"status": "ok", "error": "", "search_s": payload["search_s"], "stop": payload["stop"],
            "kept": payload.get("kept"),
            "original_us": payload["original_us"], "best_us": payload["best_us"],
            "written_us": onnx_row.get("written_us"), "written_latency_us": onnx_row.get("written_latency_us"),
            "predicted_gain": payload["original_us"] / payload["best_us"],
            "changed": not onnx_row["input_copied"], "max_diff": onnx_row["max_rel_difference"]}
    if not row["changed"]:
        return row | {"measured_ratio": 1.0} | (measure_input(model, runs, seed) if is_measured(device) else {})
    return row | measure(model, str(out_file), runs, seed)


def measure_input(model: str, runs: int, seed: int) -> dict[str, Any]:
    """The input alone end to end: what a measured device's price of an unchanged file is checked against."""
    from eqsat.cost.measured.timer import time_files

    try:
        (a,) = time_files([model], "ENABLE_ALL", runs=runs, seed=seed, threads=1)
    except Exception as exc:  # onnxruntime's errors have no common base class
        return {"status": "not timed", "error": _one_line(f"onnxruntime could not time {model}: {exc}")}
    return {"input_ms": a.median_us / 1e3, "output_ms": a.median_us / 1e3,
            "input_spread": (a.p90_us - a.p10_us) / a.median_us, "timed_runs": a.runs}


def measure(model: str, written: str, runs: int, seed: int) -> dict[str, Any]:
    """Input and written file end to end, interleaved: medians, the input's spread, the ratio."""
    from eqsat.cost.measured.timer import time_files

    try:
        a, b = time_files([model, written], "ENABLE_ALL", runs=runs, seed=seed, threads=1)
    except Exception as exc:  # onnxruntime refusing a written file is a finding, not a crash
        return {"status": "not timed", "error": _one_line(f"onnxruntime could not time {written}: {exc}")}
    return {"input_ms": a.median_us / 1e3, "output_ms": b.median_us / 1e3, "measured_ratio": a.median_us / b.median_us,
            "input_spread": (a.p90_us - a.p10_us) / a.median_us, "timed_runs": min(a.runs, b.runs)}


def model_files(models: str | None, out: Path, seed: int, quick: bool, zoo: Sequence[str] = ()) -> list[Path]:
    """The ``.onnx`` files of ``models`` (a folder), or the zoo (``zoo``: these of its models)
    written into ``out``."""
    if models:
        folder = Path(models)
        if not folder.is_dir():
            raise ValueError(f"--models {models}: not a folder of .onnx files")
        files = sorted(folder.glob("*.onnx"))
        if not files:
            raise ValueError(f"--models {models}: the folder holds no .onnx file")
        return files
    from experiments.zoo import write_zoo

    names = list(zoo) or (QUICK_MODELS if quick else None)
    return write_zoo(out / "models" / ("small" if quick else "full"), names, seed, quick)


def zoo_rows(files: Sequence[Path], searches: Sequence[str], devices: Sequence[str], out: Path, *, seed: int = 0,
             timeout: float = TIMEOUT_S, runs: int = RUNS, quick: bool = False,
             options: RunOptions = RunOptions()) -> list[dict[str, Any]]:
    """Every (model, search, device) row: the model's counts, then the cell's result (its files are
    timed end to end: the cells run one at a time, whatever ``options.workers`` says)."""
    options = replace(options, workers=1)
    digests = {f: digest(f) for f in files}
    info = run_cells([Cell.of("zoo", "experiments.runs.zoo:inspect_model", path=str(f), digest=digests[f])
                      for f in files], out, options=options, desc="zoo: import")
    keys = [(f, s, d) for f in files for s in searches for d in devices]
    cells = [Cell.of("zoo", "experiments.runs.zoo:optimize_cell", model=str(f), digest=digests[f], search=s,
                     device=d, seed=seed, timeout=timeout, runs=runs, quick=quick, out=str(out)) for f, s, d in keys]
    found = run_cells(cells, out, options=options, desc="zoo: optimize and time")
    by_file = dict(zip(files, info))
    rows = []
    for (f, s, d), result in zip(keys, found):
        counts = by_file[f]
        rows.append({"model": f.stem, "search": s, "device": d, "onnx_ops": counts["onnx_ops"],
                     "opaque": counts["opaque"], "tolerance": TOLERANCE, **result, "error": _scrub(result["error"]),
                     "opaque_types": " ".join(f"{k}:{v}" for k, v in sorted(counts["opaque_types"].items()))})
    return rows


def _num(value: Any, fmt: str) -> str:
    return "" if value is None or value == "" else format(value, fmt)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as one Markdown table (a failed row: its status and one-line error)."""
    head = ("| model | search | device | ONNX ops | opaque | search s | wall s | predicted gain | "
            "measured in/out | max diff | result |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ratio = _num(r.get("measured_ratio"), ".3f") + ("" if r.get("changed", True) else " (=)")
        result = r["status"] if not r.get("error") else f"{r['status']}: {r['error']}"
        lines.append(f"| {r['model']} | {r['search']} | {r['device']} | {_num(r['onnx_ops'], 'd')} | "
                     f"{_num(r['opaque'], 'd')} | "
                     f"{_num(r.get('search_s'), '.1f')} | {r['wall_s']:.0f} | {_num(r.get('predicted_gain'), '.3f')} | "
                     f"{ratio} | {_num(r.get('max_diff'), '.1e')} | {result.replace('|', '/')} |")
    return "\n".join(lines)


PREDICTION_BOUND = 0.15  # issue 38: a measured device's price within 15% of the end-to-end time


def _off(priced_us: Any, measured_ms: Any) -> float | None:
    """Priced over measured, less one (None when either is missing)."""
    if priced_us is None or not measured_ms:
        return None
    return priced_us / (measured_ms * 1e3) - 1.0


def format_prediction_table(rows: Sequence[dict[str, Any]]) -> str:
    """Measured-device cells: the price of the input and of the written file against their
    end-to-end times, and the predicted gain against the measured one."""
    head = ("| model | search | device | input priced ms | input measured ms | off | written priced ms | "
            "written measured ms | off | predicted gain | measured in/out | input p10-p90 spread |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if not is_measured(r["device"]) or r["status"] != "ok" or not r.get("input_ms"):
            continue
        input_us, written_us = priced_latencies(r)
        lines.append(
            f"| {r['model']} | {r['search']} | {r['device']} | {_num(_ms(input_us), '.2f')} | "
            f"{r['input_ms']:.2f} | {_num(_off(input_us, r['input_ms']), '+.0%')} | "
            f"{_num(_ms(written_us), '.2f')} | {_num(r.get('output_ms'), '.2f')} | "
            f"{_num(_off(written_us, r.get('output_ms')), '+.0%')} | {_num(r.get('predicted_gain'), '.3f')} | "
            f"{_num(r.get('measured_ratio'), '.3f')} | {_num(r.get('input_spread'), '.0%')} |")
    return "\n".join(lines)


def priced_latencies(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """A measured-device cell's predicted end-to-end latency of its input and of its written file:
    the kernels' prices plus the runtime's fixed cost of a run (the written file's latency less its
    kernels)."""
    latency = row.get("written_latency_us")
    if latency is None or row.get("written_us") is None or row.get("original_us") is None:
        return None, None
    return row["original_us"] + latency - row["written_us"], latency


def _ms(us: Any) -> float | None:
    return None if us is None else us / 1e3


def prediction_summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """How many measured-device prices fall within :data:`PREDICTION_BOUND` of the measured time."""
    priced = [r for r in rows if is_measured(r["device"]) and r["status"] == "ok" and r.get("input_ms")]
    if not priced:
        return []
    pairs = [(priced_latencies(r), r) for r in priced]
    offs = [abs(v) for (input_us, written_us), r in pairs
            for v in (_off(input_us, r["input_ms"]), _off(written_us, r.get("output_ms"))) if v is not None]
    if not offs:
        return []
    within = sum(v <= PREDICTION_BOUND for v in offs)
    return [f"measured device: {within} of {len(offs)} priced files (inputs and written files of {len(priced)} "
            f"cells) within {PREDICTION_BOUND:.0%} of their end-to-end time; worst {max(offs):.0%} off"]


FLOOR = 0.98  # issue 38: no written file slower than this fraction of its input's speed


def summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The table's closing lines: cells that finished, opaque share, and per search and device the
    geometric mean and worst measured ratio, and the files under :data:`FLOOR`."""
    models = {r["model"]: r for r in rows}
    ops = sum(r["onnx_ops"] or 0 for r in models.values())
    opaque = sum(r["opaque"] or 0 for r in models.values())
    ok = [r for r in rows if r["status"] == "ok"]
    lines = [f"{len(ok)} of {len(rows)} cells ok; opaque nodes {opaque} of {ops} ONNX nodes "
             f"({opaque / max(ops, 1):.1%}) over {len(models)} models"]
    for key in dict.fromkeys((r["search"], r["device"]) for r in rows):
        ratios = {r["model"]: r["measured_ratio"] for r in ok if (r["search"], r["device"]) == key
                  and r.get("measured_ratio")}
        if not ratios:
            lines.append(f"{key[0]} on {key[1]}: no file measured")
            continue
        geo = math.exp(sum(math.log(v) for v in ratios.values()) / len(ratios))
        slow = ", ".join(f"{m} {v:.2f}" for m, v in ratios.items() if v < FLOOR) or "none"
        lines.append(f"{key[0]} on {key[1]}: {len(ratios)} models, geometric-mean measured ratio {geo:.3f}, "
                     f"worst {min(ratios.values()):.3f}; under {FLOOR}: {slow}")
    return lines


def run(models: str | None, out: Path, *, zoo: Sequence[str] = (), searches: Sequence[str] | None = None,
        devices: Sequence[str] = DEVICES, seed: int = 0, timeout: float = TIMEOUT_S, runs: int | None = None,
        quick: bool = False, options: RunOptions = RunOptions(),
        command: str = "") -> list[dict[str, Any]]:
    from eqsat.cost.registry import check_device
    from experiments.searches import SEARCHES

    for device in devices:
        check_device(device)
    searches = list(searches or SEARCHES)
    unknown = [s for s in searches if s not in SEARCHES]
    if unknown:
        raise ValueError(f"--searches: unknown search {', '.join(unknown)}; choose from {', '.join(SEARCHES)}")
    if options.workers != 1:
        raise ValueError("experiment zoo times files end to end: run it with --workers 1")
    if timeout <= 0 or (runs is not None and runs < 1):
        raise ValueError("--timeout must be > 0 and --runs >= 1")
    load_before = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    if models and zoo:
        raise ValueError("--models and --zoo exclude each other: --zoo picks models of the generated zoo")
    files = model_files(models, out, seed, quick, zoo)
    rows = zoo_rows(files, searches, devices, out, seed=seed, timeout=timeout,
                    runs=runs or (QUICK_RUNS if quick else RUNS), quick=quick, options=options)
    load_after = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    table = format_table(rows)
    note = (f"(tolerance: max |out - in| / max(1, max |in|) <= {TOLERANCE:g} in onnxruntime; measured in/out: "
            f"input median / written median, ORT_ENABLE_ALL, 1 thread; (=): the search kept the input, its file is "
            f"the input copied, ratio 1, timed only on a measured device; load average before {' '.join(load_before)}, "
            f"after {' '.join(load_after)})")
    closing = summary(rows) + prediction_summary(rows)
    predictions = format_prediction_table(rows)
    write_table(out, "zoo", rows, {"command": command, "load_before": load_before, "load_after": load_after,
                                   "summary": closing})
    intro = ("Measured device, priced against end to end (off: priced / measured - 1; the input's price is "
             "calibrated to its own end-to-end time, the written file's is a prediction):")
    text = ((f"`{command}`\n\n" if command else "") + table + "\n\n" + note + "\n\n"
            + "\n".join(f"- {line}" for line in closing) + f"\n\n{intro}\n\n{predictions}\n")
    write_atomic(out / "zoo.md", text)
    print(table)
    print(note)
    print("\n".join(closing))
    print(f"wrote {out / 'zoo.csv'}, {out / 'zoo.json'} and {out / 'zoo.md'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_zoo_input(p)
    p.add_argument("--searches", default="", help="comma-separated searches (default: every registered search)")
    p.add_argument("--devices", type=device_list, default=",".join(DEVICES),
                   help=f"comma-separated devices (default {','.join(DEVICES)})")
    p.add_argument("--timeout", type=positive_seconds, default=TIMEOUT_S,
                   help=f"seconds per optimize run (default {TIMEOUT_S:g})")
    p.add_argument("--runs", type=positive_int,
                   help=f"end-to-end runs of each file, at least (default {RUNS}; quick {QUICK_RUNS})")
    p.add_argument("--quick", action="store_true", help="two tiny zoo models, the quick search preset, few runs")
    add_sweep_options(p, "results/zoo", device=False)


def _run(args: argparse.Namespace) -> int:
    run(args.models, Path(args.out), zoo=split_list(args.zoo), searches=split_list(args.searches),
        devices=split_list(args.devices) or DEVICES,
        seed=args.seed, timeout=args.timeout, runs=args.runs, quick=args.quick, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("zoo", "a folder of ONNX files (default: twelve current architectures) through every search and "
               "device: ops, opaque ops, search time, predicted gain, measured onnxruntime ratio, max difference",
               _add_arguments, _run, outputs=("zoo.csv", "zoo.json", "zoo.md", "models/full/<model>.onnx",
                                              "models/optimized/<model>.<search>.<device>.onnx"), doc="zoo/README.md"),
)
