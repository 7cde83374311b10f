"""``eqsat-lab experiment tuning``: tuner curves, cost-model quality and transfer on HypoGPU.

Curves: median % of optimum over seeds after 64 ... 1024 trials for grid, random and AutoTVM.
Quality: Spearman ρ and recall@30 on 3000 unseen configs for knob/program features and
rank/reg objectives. Transfer: AutoTVM on target shapes in batches of 16, cold, with a global
model from source-shape records (program features), and with knob features.
"""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from experiments.command import Experiment, add_sweep_options, positive_int, split_list, sweep_kwargs
from experiments.output import pyplot, save_figure, write_table
from experiments.sweep import Cell, RunOptions, run_cells

CURVE_SHAPES = ("square", "prefill", "decode", "wgrad", "ffn_down")
CHECKPOINTS = (64, 128, 256, 512, 1024)
CURVE_TUNERS = ("grid", "random", "autotvm", "autotvm-b16", "oracle")
SOURCES = ("square", "ffn_up", "small", "decode")
TARGETS = ("prefill_qkv", "ffn_down", "wgrad")
TRANSFER_CHECKPOINTS = (16, 32, 64, 128, 256)


def tuner_cell(tuner: str, shape: str, seed: int, checkpoints: Sequence[int], transfer: str = "",
               features: str = "program", plan_size: int = 64) -> dict[str, Any]:
    """One tuning run; % of optimum after each checkpoint, and AutoTVM's per-batch overhead."""
    from autotune.autotvm import AutoTVM
    from autotune.evaluate import fraction_after
    from autotune.measure import SimulatedMeasurer
    from autotune.registry import make_tuner
    from autotune.workload import SHAPES

    if tuner == "autotvm":
        t = AutoTVM(features=features, plan_size=plan_size, transfer=[transfer] if transfer else [])
    else:
        t = make_tuner(tuner)
    r = t.tune(SHAPES[shape], max(checkpoints), SimulatedMeasurer(seed=seed), seed=seed)
    out: dict[str, Any] = {"tuner": tuner, "shape": shape, "seed": seed, "transfer": bool(transfer),
                           "features": features, "clock_s": r.clock_s,
                           "pct": {str(n): 100 * fraction_after(r, n) for n in checkpoints}}
    if hasattr(t, "overhead"):
        out["fit_s"] = t.overhead.fit_s
        out["explore_s"] = t.overhead.explore_s
    return out


def source_records(path: str, seed: int, trials: int = 512) -> dict[str, Any]:
    """Random-search records of the source shapes (the transfer data), written to ``path``."""
    from autotune.measure import SimulatedMeasurer
    from autotune.tuners import RandomSearch
    from autotune.workload import SHAPES

    Path(path).unlink(missing_ok=True)
    for s in SOURCES:
        RandomSearch().tune(SHAPES[s], trials, SimulatedMeasurer(seed=seed, records=path), seed=seed)
    return {"path": path, "sources": list(SOURCES), "trials": trials}


def quality_cell(shape: str, seed: int) -> dict[str, Any]:
    from autotune.model_quality import quality_table
    from autotune.workload import SHAPES

    return {"rows": [asdict(q) for q in quality_table([SHAPES[shape]], seed=seed)]}


def _median_rows(results: Sequence[dict[str, Any]], label) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((label(r), r["shape"]), []).append(r)
    rows = []
    for (name, shape), rs in groups.items():
        for n in rs[0]["pct"]:
            per = [r["pct"][n] for r in rs]
            rows.append(
                {
                    "tuner": name,
                    "shape": shape,
                    "trials": int(n),
                    "median_pct": round(statistics.median(per), 2),
                    "per_seed_pct": " ".join(f"{p:.1f}" for p in per),
                }
            )
    return rows


def _plot(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    plt = pyplot()
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(3.3 * len(shapes), 3.2), squeeze=False, sharey=True)
    for ax, s in zip(axes[0], shapes):
        for name in dict.fromkeys(r["tuner"] for r in rows):
            pts = [r for r in rows if r["shape"] == s and r["tuner"] == name]
            ax.plot([p["trials"] for p in pts], [p["median_pct"] for p in pts], "o-", ms=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_title(s)
        ax.set_xlabel("trials")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("median % of optimum")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run(
    out: Path,
    *,
    shapes: Sequence[str] = CURVE_SHAPES,
    seeds: int = 5,
    options: RunOptions = RunOptions(),
    command: str = "",
) -> None:
    from autotune.workload import SHAPES

    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        raise ValueError(f"unknown shape(s) {', '.join(unknown)}; choose from {', '.join(SHAPES)}")
    fn = "experiments.runs.tuning:tuner_cell"
    curve_cells = [
        Cell.of("tuning", fn, tuner=t, shape=s, seed=k, checkpoints=CHECKPOINTS)
        for t in CURVE_TUNERS
        for s in shapes
        for k in range(seeds)
    ]
    results = run_cells(curve_cells, out, options=options, desc="tuner curves")
    curves = _median_rows(results, lambda r: r["tuner"])
    write_table(out, "tuning_curves", curves, {"command": command, "seeds": seeds})
    _plot(curves, out / "tuning_curves.png", f"median % of optimum over {seeds} seeds (HypoGPU)")
    from autotune.registry import make_tuner

    overhead = {
        name: (
            [x for r in runs for x in r["fit_s"][1:]],
            [x for r in runs for x in r["explore_s"][1:]],
            make_tuner(name).plan_size,
        )
        for name in CURVE_TUNERS
        if (runs := [r for r in results if r["tuner"] == name and "fit_s" in r])
    }

    quality = run_cells(
        [Cell.of("tuning", "experiments.runs.tuning:quality_cell", shape=s, seed=0) for s in shapes],
        out,
        options=options,
        desc="model quality",
    )
    qrows = [row for q in quality for row in q["rows"]]
    write_table(out, "model_quality", qrows, {"command": command})

    records = str((out / "transfer_sources.jsonl").resolve())
    run_cells(
        [Cell.of("tuning", "experiments.runs.tuning:source_records", path=records, seed=0)],
        out,
        options=RunOptions(progress=options.progress),
        desc="transfer sources",
    )
    transfer_cells = [
        Cell.of(
            "tuning",
            fn,
            tuner="autotvm",
            shape=s,
            seed=k,
            checkpoints=TRANSFER_CHECKPOINTS,
            transfer=tr,
            features=f,
            plan_size=16,
        )
        for s in TARGETS
        for k in range(seeds)
        for tr, f in (("", "program"), (records, "program"), (records, "knob"))
    ]
    tres = run_cells(transfer_cells, out, options=options, desc="transfer")
    label = {(False, "program"): "cold", (True, "program"): "transfer", (True, "knob"): "transfer (knob features)"}
    trows = _median_rows(tres, lambda r: label[(r["transfer"], r["features"])])
    write_table(out, "transfer", trows, {"command": command, "sources": list(SOURCES)})
    _plot(trows, out / "transfer.png", "AutoTVM transfer learning, batches of 16")

    print(f"median % of optimum over {seeds} seeds")
    print(f"{'tuner':12s} {'shape':10s} " + " ".join(f"{n:>6d}" for n in CHECKPOINTS))
    for name in CURVE_TUNERS:
        for s in shapes:
            row = [r for r in curves if r["tuner"] == name and r["shape"] == s]
            print(f"{name:12s} {s:10s} " + " ".join(f"{r['median_pct']:6.1f}" for r in row))
    print(
        "(oracle: HypoGPU's physical model without its unmodeled per-config factor, measured in its order: "
        "a bound for any learned cost model)"
    )
    for name, (fits, explores, batch) in overhead.items():
        if fits:
            print(
                f"{name} overhead per batch: fit {statistics.median(fits) * 1e3:.0f} ms, exploration "
                f"{statistics.median(explores) * 1e3:.0f} ms (median), vs {batch} s of simulated compile per batch"
            )
    print("cost-model quality on 3000 unseen configs (Spearman ρ / recall@30):")
    for s in shapes:
        for n in (64, 256, 1024):
            cells = {(q["features"], q["objective"]): q for q in qrows if q["workload"] == s and q["samples"] == n}
            print(
                f"  {s:10s} n={n:5d} "
                + "  ".join(f"{f}/{o} {c['spearman']:.2f}/{c['recall_at_30']:.2f}" for (f, o), c in cells.items())
            )
    rank_wins = sum(
        1
        for s in shapes
        for n in (64, 256, 1024)
        for f in ("knob", "program")
        if next(q for q in qrows if (q["workload"], q["samples"], q["features"], q["objective"]) == (s, n, f, "rank"))[
            "spearman"
        ]
        >= next(q for q in qrows if (q["workload"], q["samples"], q["features"], q["objective"]) == (s, n, f, "reg"))[
            "spearman"
        ]
    )
    print(f"rank >= reg in {rank_wins}/{len(shapes) * 6} settings (reference: 10/12)")
    print("transfer (median % of optimum, batches of 16):")
    for s in TARGETS:
        for name in label.values():
            row = [r for r in trows if r["tuner"] == name and r["shape"] == s]
            print(f"  {s:12s} {name:26s} " + " ".join(f"{r['trials']}:{r['median_pct']:.1f}" for r in row))
    print(f"wrote tuning_curves.csv/.json/.png, model_quality.csv/.json, transfer.csv/.json/.png to {out}")


ABLATION_SHAPES = ("square", "wgrad")
ABLATION_VARIANTS = (("full", "analytic"), ("full", "none"), ("beam", "analytic"), ("no-finetune", "analytic"),
                     ("limited", "analytic"))
"""(variant, prior) pairs: every search variant with the default prior, and full Ansor without it."""
COMPARE_TUNER_SHAPES = ("square", "prefill", "decode", "wgrad")


def ansor_cell(
    variant: str, shape: str, seed: int, checkpoints: Sequence[int], prior: str = "analytic"
) -> dict[str, Any]:
    from autotune.ansor import Ansor
    from autotune.evaluate import fraction_after
    from autotune.measure import SimulatedMeasurer
    from autotune.workload import SHAPES

    tuner = Ansor(variant=variant, prior=prior)
    r = tuner.tune(SHAPES[shape], max(checkpoints), SimulatedMeasurer(seed=seed), seed=seed)
    return {
        "tuner": r.tuner,
        "shape": shape,
        "seed": seed,
        "pct": {str(n): 100 * fraction_after(r, n) for n in checkpoints},
    }


def compare_tuner_cell(tuner: str, shape: str, seed: int, checkpoints: Sequence[int]) -> dict[str, Any]:
    """Triton's 24 configs (measured once; their best after every checkpoint), AutoTVM in a
    template space without rfactor, or Ansor."""
    from autotune.ansor import Ansor
    from autotune.autotvm import AUTOTVM_PRESETS, AutoTVM
    from autotune.evaluate import fraction_after
    from autotune.measure import SimulatedMeasurer
    from autotune.tuners import TritonAutotune
    from autotune.workload import SHAPES

    make = {"triton": TritonAutotune, "autotvm-no-rfactor": lambda: AutoTVM(AUTOTVM_PRESETS["autotvm-no-rfactor"]),
            "ansor": Ansor}[tuner]
    r = make().tune(SHAPES[shape], max(checkpoints), SimulatedMeasurer(seed=seed), seed=seed)
    return {
        "tuner": tuner,
        "shape": shape,
        "seed": seed,
        "pct": {str(n): 100 * fraction_after(r, min(n, len(r.history))) for n in checkpoints},
    }


def _run_table(
    cells: list[Cell], out: Path, stem: str, title: str, options: RunOptions, command: str
) -> list[dict[str, Any]]:
    results = run_cells(cells, out, options=options, desc=stem)
    rows = _median_rows(results, lambda r: r["tuner"])
    write_table(out, stem, rows, {"command": command})
    _plot(rows, out / f"{stem}.png", title)
    checkpoints = sorted({r["trials"] for r in rows})
    print(f"{title}\n{'tuner':22s} {'shape':9s} " + " ".join(f"{n:>6d}" for n in checkpoints))
    for name in dict.fromkeys(r["tuner"] for r in rows):
        for s in dict.fromkeys(r["shape"] for r in rows):
            row = [r for r in rows if r["tuner"] == name and r["shape"] == s]
            print(f"{name:22s} {s:9s} " + " ".join(f"{r['median_pct']:6.1f}" for r in row))
    print(f"wrote {stem}.csv/.json/.png to {out}")
    return rows


def run_ansor_ablation(
    out: Path, *, seeds: int = 5, options: RunOptions = RunOptions(), command: str = ""
) -> list[dict[str, Any]]:
    cells = [
        Cell.of(
            "ansor-ablation",
            "experiments.runs.tuning:ansor_cell",
            variant=v,
            prior=p,
            shape=s,
            seed=k,
            checkpoints=CHECKPOINTS,
        )
        for v, p in ABLATION_VARIANTS
        for s in ABLATION_SHAPES
        for k in range(seeds)
    ]
    return _run_table(
        cells,
        out,
        "ansor_ablation",
        f"Ansor ablations, median % of optimum over {seeds} seeds",
        options,
        command,
    )


def run_compare_tuners(
    out: Path, *, seeds: int = 5, options: RunOptions = RunOptions(), command: str = ""
) -> list[dict[str, Any]]:
    cells = [
        Cell.of(
            "compare-tuners", "experiments.runs.tuning:compare_tuner_cell",
            tuner=t, shape=s, seed=k, checkpoints=CHECKPOINTS,
        )
        for t in ("triton", "autotvm-no-rfactor", "ansor")
        for s in COMPARE_TUNER_SHAPES
        for k in range(seeds)
    ]
    return _run_table(
        cells,
        out,
        "compare_tuners",
        f"Triton's 24 configs vs AutoTVM (no rfactor) vs Ansor, median % of optimum over {seeds} seeds",
        options,
        command,
    )


SCHEDULER_SETTINGS = (("round-robin", "all"), ("gradient", "all"), ("gradient", "intensity"))


def scheduler_cell(strategy: str, similarity: str, seed: int, units: int) -> dict[str, Any]:
    """The toy network tuned with Ansor for ``units`` units of 64 measurements; for round-robin
    also the winner's curse and the top-5 x 5 re-measurement."""
    import tempfile

    from autotune.ansor import Ansor
    from autotune.scheduler import TaskScheduler, toy_network, winners_curse

    tasks = toy_network()
    with tempfile.TemporaryDirectory(prefix="eqsat-sched-") as tmp:
        r = TaskScheduler(tasks, Ansor, strategy=strategy, similarity=similarity, seed=seed, workdir=tmp).run(units)
    out: dict[str, Any] = {
        "strategy": strategy,
        "similarity": similarity,
        "seed": seed,
        "units": r.units,
        **r.end_to_end(tasks),
    }
    curse = winners_curse(r, tasks, seed=seed + 1000)
    out["curse"] = [asdict(c) for c in curse]
    return out


def run_scheduler(
    out: Path,
    *,
    seeds: int = 5,
    units: int = 44,
    options: RunOptions = RunOptions(),
    command: str = "",
) -> list[dict[str, Any]]:
    from autotune.evaluate import optimum_us
    from autotune.scheduler import toy_network

    cells = [
        Cell.of("scheduler", "experiments.runs.tuning:scheduler_cell", strategy=st, similarity=si, seed=k, units=units)
        for st, si in SCHEDULER_SETTINGS
        for k in range(seeds)
    ]
    results = run_cells(cells, out, options=options, desc="scheduler")
    tasks = toy_network()
    rows = []
    for st, si in SCHEDULER_SETTINGS:
        rs = [r for r in results if (r["strategy"], r["similarity"]) == (st, si)]
        pct = [100 * r["fraction_of_optimum"] for r in rs]
        med = statistics.median(pct)
        rep = min(rs, key=lambda r: abs(100 * r["fraction_of_optimum"] - med))
        rows.append(
            {
                "strategy": st,
                "similarity": si,
                "median_pct": round(med, 2),
                "per_seed_pct": " ".join(f"{p:.1f}" for p in pct),
                **{f"units_{t.name}": rep["units"][t.name] for t in tasks},
            }
        )
    write_table(out, "scheduler", rows, {"command": command, "units": units, "seeds": seeds})
    curse = [c for r in results if r["strategy"] == "round-robin" for c in r["curse"]]
    curse_rows = [{"seed": r["seed"], **c} for r in results if r["strategy"] == "round-robin" for c in r["curse"]]
    write_table(out, "winners_curse", curse_rows, {"command": command})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.27
    for k, row in enumerate(rows):
        ax.bar(
            [i + (k - 1) * width for i in range(len(tasks))],
            [row[f"units_{t.name}"] for t in tasks],
            width,
            label=f"{row['strategy']} ({row['similarity']}): {row['median_pct']:.1f}%",
        )
    ax.set_xticks(range(len(tasks)), [t.name for t in tasks], rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("units of 64 measurements")
    ax.legend(fontsize=7)
    ax.set_title(f"task scheduler on the toy network ({units} units; median-seed allocation)")
    fig.tight_layout()
    save_figure(fig, out / "scheduler.png", dpi=120)
    plt.close(fig)
    total = sum(t.weight * optimum_us(t.workload) for t in tasks)
    print(f"toy network: {len(tasks)} tasks, true optimum {total / 1e3:.2f} ms")
    for t in sorted(tasks, key=lambda t: -t.weight * optimum_us(t.workload)):
        share = 100 * t.weight * optimum_us(t.workload) / total
        print(f"  {t.name:17s} {share:5.1f}% of the optimum, intensity {t.intensity:6.1f} FLOP/B")
    for row in rows:
        units_text = ", ".join(f"{t.name} {row[f'units_{t.name}']}" for t in tasks)
        print(
            f"{row['strategy']:11s} {row['similarity']:9s} median {row['median_pct']:.1f}% of optimum "
            f"({row['per_seed_pct']}); units: {units_text}"
        )
    improved = sum(c["remeasured_true_us"] < c["true_us"] - 1e-9 for c in curse)
    worse = sum(c["remeasured_true_us"] > c["true_us"] + 1e-9 for c in curse)
    print(
        f"winner's curse (round-robin, {len(curse)} task results): measured bests are "
        f"{100 * statistics.mean(c['optimism'] for c in curse):.1f}% optimistic on average; re-measuring the top 5 "
        f"five times improves {improved} and worsens {worse}"
    )
    print(f"wrote scheduler.csv/.json/.png and winners_curse.csv/.json to {out}")
    return rows


def _add_curve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", default=",".join(CURVE_SHAPES), help="comma-separated named shapes")
    p.add_argument("--seeds", type=positive_int, default=5, help="seeds 0..N-1")
    add_sweep_options(p, "results/tuning", device=False, seed=False)


def _run_curves(args: argparse.Namespace) -> int:
    run(Path(args.out), shapes=split_list(args.shapes), seeds=args.seeds, **sweep_kwargs(args))
    return 0


def _row(name: str, out: str, text: str, fn: Any, outputs: tuple[str, ...], doc: str) -> Experiment:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seeds", type=positive_int, default=5, help="seeds 0..N-1")
        add_sweep_options(p, out, device=False, seed=False)

    def go(args: argparse.Namespace) -> int:
        fn(Path(args.out), seeds=args.seeds, **sweep_kwargs(args))
        return 0

    return Experiment(name, text, add, go, outputs, doc=doc)


EXPERIMENTS = (
    Experiment("tuning", "tuner curves, cost-model quality and transfer on HypoGPU", _add_curve_arguments, _run_curves,
               outputs=("tuning_curves.csv", "tuning_curves.json", "tuning_curves.png", "model_quality.csv",
                        "model_quality.json", "transfer.csv", "transfer.json", "transfer.png"),
               doc="README.md#tuner-curves-model-quality-transfer"),
    _row("ansor-ablation", "results/ansor_ablation", "Ansor vs no analytic prior, beam search, no fine-tuning, "
         "limited space", run_ansor_ablation, ("ansor_ablation.csv", "ansor_ablation.json", "ansor_ablation.png"),
         doc="README.md#ansor-ablation"),
    _row("compare-tuners", "results/compare_tuners", "Triton configs vs AutoTVM without rfactor vs Ansor",
         run_compare_tuners, ("compare_tuners.csv", "compare_tuners.json", "compare_tuners.png"),
         doc="README.md#tuner-comparison"),
    _row("scheduler", "results/scheduler", "task scheduler strategies and the winner's curse on the toy network",
         run_scheduler,
         ("scheduler.csv", "scheduler.json", "scheduler.png", "winners_curse.csv", "winners_curse.json"),
         doc="README.md#task-scheduler-and-the-winners-curse"),
)
