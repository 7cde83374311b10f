"""The ``eqsat-lab`` command line.

Subcommands are a table (``COMMANDS``): each entry adds its arguments and names
the function that runs it, so later issues add a row, not a branch.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from eqsat.errors import EqsatError


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs into builder keyword arguments (ints, comma-separated int tuples or strings)."""
    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        try:
            params[key] = tuple(int(v) for v in value.split(",")) if "," in value else int(value)
        except ValueError:
            params[key] = value
    return params


def write_json(path: str, payload: Any) -> None:
    """Write JSON atomically: a temp file renamed into place."""
    from experiments.output import write_atomic

    write_atomic(Path(path), json.dumps(payload, indent=2) + "\n")


# --------------------------------------------------------------------------- cost
def _add_cost(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`)")
    p.add_argument("--device", default="h100", help="device profile name or a .json profile (default h100)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument("--json", dest="json_out", help="write the report as JSON here")
    p.add_argument("--all-ops", action="store_true", help="also list folded and free ops")


def _run_cost(args: argparse.Namespace) -> int:
    from eqsat.cost import RooflineCost
    from eqsat.models import build

    graph = build(args.model, **parse_params(args.param))
    report = RooflineCost(args.device).report(graph)
    print(f"{graph.name} on {report.device} ({graph.dtype}): {report.total_us:.2f} µs, {graph.op_count()} ops")
    print(f"{'op':10s} {'output shape':>22s} {'GFLOP':>9s} {'MB':>9s} {'µs':>8s}  bound")
    for r in report.rows:
        if r.kind in ("leaf", "view") or (r.kind == "folded" and not args.all_ops):
            continue
        print(f"{r.op:10s} {str(r.shape):>22s} {r.flops / 1e9:9.3f} {r.bytes / 1e6:9.3f} {r.time_us:8.2f}  {r.kind}")
    if args.json_out:
        write_json(args.json_out, report.to_dict())
    return 0


# --------------------------------------------------------------------------- models / table / dot
def _add_models(p: argparse.ArgumentParser) -> None:
    pass


def _run_models(args: argparse.Namespace) -> int:
    from eqsat.models import MODELS, build, model_params

    for name in MODELS:
        g = build(name)
        params = ", ".join(f"{k}={v}" for k, v in model_params(name).items())
        print(f"{name:14s} {g.op_count():5d} ops  ({params})")
    return 0


def _add_table(p: argparse.ArgumentParser) -> None:
    p.add_argument("--devices", default="h100,weak", help="comma-separated device names")
    p.add_argument("--models", default="", help="comma-separated model names (default: all)")
    p.add_argument("--out", help="folder for cost_table.csv / .json")


def _run_table(args: argparse.Namespace) -> int:
    from experiments.cost_table import run

    models = [m for m in args.models.split(",") if m] or None
    run(models, [d for d in args.devices.split(",") if d], Path(args.out) if args.out else None,
        progress=sys.stderr.isatty())
    return 0


def _add_dot(p: argparse.ArgumentParser) -> None:
    p.add_argument("model")
    p.add_argument("--param", action="append", default=[], metavar="K=V")
    p.add_argument("--out", help="write the DOT text here instead of stdout")


def _run_dot(args: argparse.Namespace) -> int:
    from eqsat.models import build

    text = build(args.model, **parse_params(args.param)).to_dot()
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return 0


# --------------------------------------------------------------------------- optimize
def _add_optimize(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`) or an .onnx file")
    p.add_argument("--out", help="onnx: where to write the optimized model (checked with onnxruntime)")
    p.add_argument("--batch", type=int, default=1, help="onnx: size of a dynamic batch dimension")
    p.add_argument("--search", choices=sorted(SEARCHES), default="taso")
    p.add_argument("--device", default="h100")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument("--rules", nargs="+", help="rule files (default: the shipped generated sets)")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")
    p.add_argument("--alpha", type=float, default=1.05, help="taso: queue graphs cheaper than alpha x best")
    p.add_argument("--budget", type=int, default=1000, help="taso: graphs popped from the queue")
    p.add_argument("--time-limit", type=float, help="taso: seconds")
    p.add_argument("--multi", action="store_true", help="taso: also apply the two-output rules")
    p.add_argument("--no-pair-move", action="store_true", help="taso: disable the pair move")
    p.add_argument("--iters", type=int, default=15, help="eqsat: iteration limit")
    p.add_argument("--nodes", type=int, default=50_000, help="eqsat: e-node limit")
    p.add_argument("--seconds", type=float, default=60.0, help="eqsat: saturation time limit")
    p.add_argument("--k-multi", type=int, default=1, help="eqsat: iterations that run multi-pattern rules")
    p.add_argument("--extract", choices=("ilp", "greedy"), default="ilp", help="eqsat: extractor")


def _run_optimize(args: argparse.Namespace) -> int:
    from eqsat.models import build

    imported = None
    if args.model.endswith(".onnx"):
        from eqsat import onnx as onnx_io

        if not args.out:
            raise ValueError("optimizing an .onnx file needs --out for the optimized model")
        imported = onnx_io.load(args.model, batch=args.batch)
        graph = imported.graph
    else:
        graph = build(args.model, **parse_params(args.param))
    result = SEARCHES[args.search](graph, args)
    payload = result.to_dict()
    work = (f"{payload['expanded']} expanded" if "expanded" in payload else
            f"{payload['enodes']} e-nodes, {len(payload['iterations'])} iterations, extraction {payload['extract']} "
            f"(gap {payload['gap']:.2g})")
    print(f"{graph.name} on {payload['device']}: {payload['original_us']:.2f} -> {payload['best_us']:.2f} µs "
          f"({payload['speedup_pct']:+.1f}%) in {payload['search_s']:.2f} s, {work}, stop: {payload['stop']}")
    for it in payload.get("iterations", []):
        top = ", ".join(f"{k} {v}" for k, v in list(it["matches"].items())[:3])
        print(f"  iteration {it['index']:2d}: {it['enodes']:7d} e-nodes {it['seconds']:6.2f} s  top matches: {top}")
    for i, step in enumerate(payload.get("path", []), start=1):
        print(f"  {i:2d}. {step['rule']:24s} {step['cost_us']:10.2f} µs  {step['ratio_to_best']:.3f}x best so far")
    verified = payload.get("verified")
    if verified:
        print(f"verified against the input ({verified['method']}): max relative error {verified['max_rel_error']:.2g}")
    if imported is not None:
        _write_onnx(imported, result.best, args)
    if args.json_out:
        write_json(args.json_out, payload)
    return 0


def _write_onnx(imported: Any, best: Any, args: argparse.Namespace) -> None:
    """Export the optimized graph and check it against the input model in onnxruntime; a model
    that differs beyond tolerance is removed and reported as an error."""
    from eqsat import onnx as onnx_io

    out = Path(args.out)
    onnx_io.save(imported, best, out)
    diff = onnx_io.max_difference(args.model, out)
    if diff > 1e-3:
        out.unlink()
        raise ValueError(f"{out}: the optimized model differs from {args.model} by {diff:.3g} (relative) in "
                         f"onnxruntime; nothing written")
    print(f"wrote {out}; onnxruntime max relative difference to {args.model}: {diff:.2g} "
          f"(ops in: {', '.join(f'{k} {v}' for k, v in sorted(imported.ops.items()))})")
    print(f"opaque ops (kept exactly, not optimized): {', '.join(imported.opaque) or 'none'}")


def _taso(graph, args: argparse.Namespace):
    from taso_baseline.search import alpha_search, default_rules

    rules = default_rules(args.rules)
    return alpha_search(graph, rules, args.device, alpha=args.alpha, budget=args.budget, time_limit=args.time_limit,
                        pair_move=not args.no_pair_move, multi=args.multi, progress=sys.stderr.isatty())


def _eqsat(graph, args: argparse.Namespace):
    from eqsat.egraph import Limits, optimize
    from taso_baseline.search import default_rules

    limits = Limits(iterations=args.iters, nodes=args.nodes, seconds=args.seconds, k_multi=args.k_multi)
    return optimize(graph, default_rules(args.rules), args.device, limits, extract=args.extract)


SEARCHES: dict[str, Callable[[Any, argparse.Namespace], Any]] = {"taso": _taso, "eqsat": _eqsat}


# --------------------------------------------------------------------------- compare / experiments
def _add_sweep_options(p: argparse.ArgumentParser, out: str, device: bool = True) -> None:
    if device:
        p.add_argument("--device", default="h100", help="device profile (default h100)")
    p.add_argument("--out", default=out, help=f"output folder; finished cells are read back from it (default {out})")
    p.add_argument("--seed", type=int, default=0, help="seed of the numerical checks' random inputs")
    p.add_argument("--workers", type=int, default=1, help="local processes running cells (timings are fairest at 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local", help="run cells locally or on Ray")


def _add_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", default="", help="comma-separated models (default: the case studies and TENSAT's suite)")
    p.add_argument("--quick", action="store_true", help="smoke test: two small models, tiny budgets")
    _add_sweep_options(p, "results/compare")


def _command_line(args: argparse.Namespace) -> str:
    return "eqsat-lab " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("eqsat-lab") else ""


def _run_compare(args: argparse.Namespace) -> int:
    from experiments.compare import run

    run([m for m in args.models.split(",") if m] or None, args.device, Path(args.out), quick=args.quick,
        seed=args.seed, workers=args.workers, executor=args.executor, progress=sys.stderr.isatty(),
        command=_command_line(args))
    return 0


def _add_experiment(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="experiment", required=True)
    budget = sub.add_parser("budget", help="best cost vs search time: α in {1, 1.05, 1.3, 1.5}, e-graph limits x k_multi")
    budget.add_argument("--models", default="", help="comma-separated models (default: the case studies)")
    budget.add_argument("--budget", type=int, default=1000, help="α search: largest budget (its trace gives the smaller ones)")
    _add_sweep_options(budget, "results/budget")
    alpha = sub.add_parser("alpha", help="graphs expanded and final cost against α")
    alpha.add_argument("--models", default="", help="comma-separated models (default: the case studies)")
    alpha.add_argument("--budget", type=int, default=1000)
    alpha.add_argument("--alphas", default="", help="comma-separated α values (default 1.0 ... 2.0)")
    _add_sweep_options(alpha, "results/alpha")
    hw = sub.add_parser("hardware", help="best graph per device and the penalty of running it elsewhere")
    hw.add_argument("--models", default="", help="comma-separated models (default: the case studies)")
    hw.add_argument("--devices", default="h100,weak,a100,v100,k80")
    hw.add_argument("--k-multi", type=int, default=2, help="e-graph multi-pattern iterations (the case studies need 2)")
    _add_sweep_options(hw, "results/hardware", device=False)
    ox = sub.add_parser("onnx", help="every benchmark model exported to ONNX, imported, optimized, exported, "
                                     "checked in onnxruntime")
    ox.add_argument("--models", default="", help="comma-separated models (default: the compare suite)")
    ox.add_argument("--searches", default="eqsat", help="comma-separated: eqsat, taso")
    ox.add_argument("--quick", action="store_true", help="smoke-test search limits")
    _add_sweep_options(ox, "results/onnx")
    tuning = sub.add_parser("tuning", help="tuner curves, cost-model quality and transfer on HypoGPU")
    tuning.add_argument("--shapes", default="square,prefill,decode,wgrad,ffn_down")
    tuning.add_argument("--seeds", type=int, default=5)
    tuning.add_argument("--out", default="results/tuning")
    tuning.add_argument("--workers", type=int, default=1)
    tuning.add_argument("--executor", choices=("local", "ray"), default="local")
    for name, out, text in (("ansor-ablation", "results/ansor_ablation", "Ansor vs beam search, no fine-tuning, limited space"),
                            ("compare-tuners", "results/compare_tuners", "Triton configs vs AutoTVM without rfactor vs Ansor"),
                            ("scheduler", "results/scheduler", "task scheduler strategies and the winner's curse on the toy network")):
        q = sub.add_parser(name, help=text)
        q.add_argument("--seeds", type=int, default=5)
        q.add_argument("--out", default=out)
        q.add_argument("--workers", type=int, default=1)
        q.add_argument("--executor", choices=("local", "ray"), default="local")


def _run_experiment(args: argparse.Namespace) -> int:
    if args.experiment in ("ansor-ablation", "compare-tuners", "scheduler"):
        from experiments.tuning import run_ansor_ablation, run_compare_tuners, run_scheduler

        run = {"ansor-ablation": run_ansor_ablation, "compare-tuners": run_compare_tuners,
               "scheduler": run_scheduler}[args.experiment]
        run(Path(args.out), seeds=args.seeds, workers=args.workers, executor=args.executor,
            progress=sys.stderr.isatty(), command=_command_line(args))
        return 0
    if args.experiment == "tuning":
        from experiments.tuning import run as run_tuning

        run_tuning(Path(args.out), shapes=[s for s in args.shapes.split(",") if s], seeds=args.seeds,
                   workers=args.workers, executor=args.executor, progress=sys.stderr.isatty(),
                   command=_command_line(args))
        return 0
    models = [m for m in args.models.split(",") if m] or None
    common = dict(seed=args.seed, workers=args.workers, executor=args.executor, progress=sys.stderr.isatty(),
                  command=_command_line(args))
    if args.experiment == "onnx":
        from experiments.onnx_roundtrip import run as run_onnx

        run_onnx(models, args.device, Path(args.out), searches=[s for s in args.searches.split(",") if s],
                 quick=args.quick, **common)
    elif args.experiment == "budget":
        from experiments.budget import run as run_budget

        run_budget(models, args.device, Path(args.out), budget=args.budget, **common)
    elif args.experiment == "alpha":
        from experiments.alpha import ALPHAS, run as run_alpha

        alphas = tuple(float(a) for a in args.alphas.split(",") if a) or ALPHAS
        run_alpha(models, args.device, Path(args.out), budget=args.budget, alphas=alphas, **common)
    else:
        from experiments.hardware import run as run_hardware

        run_hardware(models, Path(args.out), devices=[d for d in args.devices.split(",") if d],
                     k_multi=args.k_multi, **common)
    return 0


# --------------------------------------------------------------------------- tune
def _add_tune(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=("run", "landscape", "curves"), default="run",
                   help="run: tune one shape; landscape: the shape of the space; curves: %% of optimum vs trials")
    p.add_argument("--shape", default="square", help="named shape (square, decode, wgrad, ...) or MxNxK[+relu]")
    p.add_argument("--tuner", default="random", help="grid, random or triton (curves: comma-separated)")
    p.add_argument("--trials", default="256", help="measurement budget (curves: comma-separated checkpoints)")
    p.add_argument("--seed", type=int, default=0, help="tuner and measurement-noise seed (curves: seeds 0..N-1 with --seeds)")
    p.add_argument("--seeds", type=int, default=5, help="curves: number of seeds")
    p.add_argument("--shapes", default="square,prefill,decode,wgrad,ffn_down", help="curves: comma-separated shapes")
    p.add_argument("--measurer", choices=("hypogpu", "cpu"), default="hypogpu", help="simulated GPU or this CPU")
    p.add_argument("--records", help="JSON-lines record file: every measurement is appended; an existing file resumes")
    p.add_argument("--reselect", type=int, default=0, metavar="K",
                   help="re-measure the K fastest configs 5 times each and re-select by the mean (winner's curse)")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")


def _run_tune(args: argparse.Namespace) -> int:
    from experiments.tune import run_curves, run_landscape, run_tune

    return {"run": run_tune, "landscape": run_landscape, "curves": run_curves}[args.action](args)


# --------------------------------------------------------------------------- pet
def _add_pet(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="pet_cmd", required=True)
    for name, text in (("demo", "the notes' split-to-batch example as a region table, with the correction"),
                       ("verify", "false-pass rates of random tests with small primes against n/p")):
        q = sub.add_parser(name, help=text)
        for dim, default in (("N", 2), ("C", 3), ("O", 4), ("H", 6), ("W", 8)):
            q.add_argument(f"--{dim}", type=int, default=default)
        q.add_argument("--stride", type=int, default=1)
        q.add_argument("--pad", type=int, default=1)
        q.add_argument("--dilation", type=int, default=1)
        q.add_argument("--axis", choices=("H", "W"), default="W")
        q.add_argument("--parts", type=int, default=2)
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--json", dest="json_out")
        if name == "demo":
            q.add_argument("--tests", type=int, default=3, help="random tests per checked position (t)")
            q.add_argument("--prime", type=int, default=2**31 - 1)
        else:
            q.add_argument("--trials", type=int, default=3000)
    opt = sub.add_parser("optimize", help="beam search over which convs to transform, on the roofline cost")
    opt.add_argument("model", choices=("resnet18_last", "csrnet_backend"))
    opt.add_argument("--device", default="h100")
    opt.add_argument("--batch", type=int, default=16)
    opt.add_argument("--beam", type=int, default=4, help="beam width")
    opt.add_argument("--depth", type=int, help="layers transformed at most (default: all)")
    opt.add_argument("--candidates", type=int, default=8, help="transformations tried per layer")
    opt.add_argument("--json", dest="json_out")


def _run_pet(args: argparse.Namespace) -> int:
    from experiments.pet_demo import run_demo, run_optimize, run_verify

    return {"demo": run_demo, "verify": run_verify, "optimize": run_optimize}[args.pet_cmd](args)


# --------------------------------------------------------------------------- rules
def _add_rules(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_cmd", required=True)
    check = sub.add_parser("check", help="parse rule files and summarize them")
    check.add_argument("files", nargs="+")
    fmt = sub.add_parser("fmt", help="print rule files in canonical form")
    fmt.add_argument("files", nargs="+")
    gen = sub.add_parser("generate", help="run the TASO generator: enumerate, fingerprint, prune, verify")
    gen.add_argument("--world", required=True, help="matrix or conv")
    gen.add_argument("--max-ops", type=int, default=3, help="largest graph size (ops)")
    gen.add_argument("--out", required=True, help="rule file to write")
    gen.add_argument("--stats-json", help="write the generator's statistics here")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--workers", type=int, default=1, help="verification processes (same output for any value)")
    ver = sub.add_parser("verify", help="verify every rule of a file; exit 1 if any is unsound")
    ver.add_argument("files", nargs="+")
    ver.add_argument("--seed", type=int, default=0)
    col = sub.add_parser("collisions", help="fingerprint collision rate of relu(C) vs A*relu(C) on 4x4 ints")
    col.add_argument("--trials", type=int, default=2_000_000)
    col.add_argument("--seed", type=int, default=0)


def _run_rules(args: argparse.Namespace) -> int:
    return RULE_COMMANDS[args.rules_cmd](args)


def _rules_check(args: argparse.Namespace) -> int:
    from eqsat.rules import load_rules

    for path in args.files:
        rules = load_rules(path)
        multi = sum(r.is_multi for r in rules)
        origins: dict[str, int] = {}
        for r in rules:
            origins[r.origin] = origins.get(r.origin, 0) + 1
        print(f"{path}: {len(rules)} rules ({len(rules) - multi} single-output, {multi} multi-output; "
              + ", ".join(f"{v} {k}" for k, v in sorted(origins.items())) + ")")
    return 0


def _rules_fmt(args: argparse.Namespace) -> int:
    from eqsat.rules import format_rule, load_rules

    for path in args.files:
        for r in load_rules(path):
            print(format_rule(r))
    return 0


def _rules_generate(args: argparse.Namespace) -> int:
    from eqsat.rules import save_rules
    from taso_baseline.generate import generate, header_lines
    from taso_baseline.world import get_world

    world = get_world(args.world)
    rules, stats = generate(world, args.max_ops, seed=args.seed, progress=sys.stderr.isatty(), workers=args.workers)
    command = f"eqsat-lab rules generate --world {args.world} --max-ops {args.max_ops} --seed {args.seed}"
    save_rules(args.out, rules, header_lines(stats, command, world))
    if args.stats_json:
        write_json(args.stats_json, stats.to_dict())
    print("\n".join(header_lines(stats, command, world)[2:5]))
    print(f"wrote {len(rules)} rules to {args.out} in {sum(stats.seconds.values()):.1f} s "
          f"({', '.join(f'{k} {v:.1f} s' for k, v in stats.seconds.items())})")
    return 0


def _rules_verify(args: argparse.Namespace) -> int:
    from eqsat.rules import format_rule, load_rules
    from taso_baseline.verify import verify_rules

    bad = 0
    for path in args.files:
        rules = load_rules(path)
        report = verify_rules(rules, seed=args.seed, path=path)
        by_name = {r.name: r for r in rules}
        for v in report.unsound:
            print(f"UNSOUND {path}: {format_rule(by_name[v.rule])}\n  failed {v.failed}: {v.counterexample}")
        layers: dict[str, int] = {}
        for v in report.verdicts:
            for layer in v.passed:
                layers[layer] = layers.get(layer, 0) + 1
        print(f"{path}: {len(rules) - len(report.unsound)}/{len(rules)} rules verified "
              f"({', '.join(f'{n} passed {k}' for k, n in layers.items())}); {len(report.unsound)} unsound")
        bad += len(report.unsound)
    return 1 if bad else 0


def _rules_collisions(args: argparse.Namespace) -> int:
    from eqsat.graph import input_, node
    from taso_baseline.fingerprint import collision_rate

    a, c = input_("A", (4, 4)), input_("C", (4, 4))
    left, right = node("relu", c), node("ewmul", a, node("relu", c))
    for low, high in ((-2, 2), (-50, 50)):
        rate = collision_rate(left, right, low, high, args.trials, args.seed)
        print(f"ints in [{low}, {high}]: relu(C) and A*relu(C) collide on {rate:.3g} of {args.trials:,} input sets")
    return 0


RULE_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": _rules_check, "fmt": _rules_fmt, "generate": _rules_generate,
    "verify": _rules_verify, "collisions": _rules_collisions,
}


Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: list[Command] = [
    ("table", _add_table, _run_table),
    ("cost", _add_cost, _run_cost),
    ("models", _add_models, _run_models),
    ("dot", _add_dot, _run_dot),
    ("rules", _add_rules, _run_rules),
    ("optimize", _add_optimize, _run_optimize),
    ("compare", _add_compare, _run_compare),
    ("experiment", _add_experiment, _run_experiment),
    ("tune", _add_tune, _run_tune),
    ("pet", _add_pet, _run_pet),
]
HELP = {
    "table": "cost table of the built-in benchmark graphs (the main job for now)",
    "cost": "roofline cost of one benchmark graph, per op",
    "models": "list the benchmark graphs and their size parameters",
    "dot": "Graphviz DOT of a benchmark graph",
    "rules": "generate, verify, check and format rule files",
    "optimize": "optimize a benchmark graph (taso: α-backtracking; eqsat: equality saturation on egglog)",
    "experiment": "search-budget curves, α sweep, hardware cross-penalties",
    "pet": "partially-equivalent transformations: region table, verification, correction",
    "tune": "auto-tune a matmul on HypoGPU (or this CPU); landscape and tuner curves",
    "compare": "the main job: TENSAT-style e-graph vs TASO-style α search on the benchmark suite",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eqsat-lab", description="Tensor-graph superoptimization and auto-tuning lab.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add, run in COMMANDS:
        p = sub.add_parser(name, help=HELP[name])
        add(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args._run(args)
    except (EqsatError, KeyError, ValueError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"eqsat-lab: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
