"""``eqsat-lab rules check|fmt|generate|verify|collisions``: rule files and the TASO generator."""
from __future__ import annotations

import argparse

from experiments.command import (
    MAX_SECONDS,
    Command,
    add_subcommands,
    dispatched_by_subcommand,
    number_in,
    positive_int,
    progress,
    seed_int,
)
from experiments.output import write_json


def _files(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="rule files")


def _add_generate(p: argparse.ArgumentParser) -> None:
    from rulegen.world import WORLDS

    p.add_argument("--world", required=True, choices=list(WORLDS), help="the generator's world")
    p.add_argument("--max-ops", type=positive_int, default=3, help="largest graph size (ops)")
    p.add_argument("--out", required=True, help="rule file to write")
    p.add_argument("--stats-json", help="write the generator's statistics here")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--workers", type=positive_int, default=1, help="verification processes (same output for any value)")
    p.add_argument("--known", nargs="+", metavar="SET_OR_FILE",
                   help="rules found before (e.g. matrix-min): pair only buckets holding a graph of --max-ops ops, "
                        "and only terms these rules cannot already prove equal (Ruler's step)")


def _add_verify(p: argparse.ArgumentParser) -> None:
    _files(p)
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--prove", action="store_true",
                   help="also prove each rule from the operator axioms with Z3 (the 'prove' extra)")
    p.add_argument("--axioms", help="axiom file (default: eqsat/rules/axioms.rules)")
    p.add_argument("--prove-seconds", type=number_in(float, 0, MAX_SECONDS, above=True), default=1.0,
                   help="Z3's time limit per rule")
    p.add_argument("--out", help="with --prove and one file: write its rules here, proved ones marked proved=z3")


def _add_minimize(p: argparse.ArgumentParser) -> None:
    _files(p)
    p.add_argument("--out", required=True, help="rule file to write (the kept rules)")
    p.add_argument("--iterations", type=positive_int, default=3, help="saturation iterations per derivability check")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the second shape assignment")
    p.add_argument("--json", dest="json_out", help="write the report (kept, dropped and why) here")
    p.add_argument("--known", nargs="+", metavar="SET_OR_FILE",
                   help="rules kept before (not written): candidates they derive are dropped too")


def _minimize(args: argparse.Namespace) -> int:
    from eqsat.rules.rulefile import save_rules
    from eqsat.rules.rulesets import default_rules
    from rulegen.minimize import MinimizeSettings, minimize

    rules = default_rules(args.files)
    known = default_rules(args.known) if args.known else []
    report = minimize(rules, MinimizeSettings(iterations=args.iterations, seed=args.seed), progress=progress(),
                      known=known)
    against = f" --known {' '.join(args.known)}" if args.known else ""
    header = [f"minimized by: eqsat-lab rules minimize {' '.join(args.files)} --iterations {args.iterations} "
              f"--seed {args.seed}{against}",
              f"from {len(rules)} rules: {report.summary()}",
              "a rule was dropped when equality saturation with the rules kept before it made its two sides equal "
              f"within {args.iterations} iterations, at two shape assignments"]
    save_rules(args.out, report.kept, header)
    print(f"{args.out}: {report.summary()}")
    if args.json_out:
        write_json(args.json_out, {"files": args.files, "input": len(rules), "kept": [r.name for r in report.kept],
                                   "derived": list(report.derived), "passthrough": report.passthrough,
                                   "batches": report.batches, "seconds": report.seconds})
    return 0


def _add_collisions(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trials", type=positive_int, default=2_000_000)
    p.add_argument("--seed", type=seed_int, default=0)


def _check(args: argparse.Namespace) -> int:
    from eqsat.rules.rulesets import default_rules

    for path in args.files:
        rules = default_rules([path])
        multi = sum(r.is_multi for r in rules)
        origins: dict[str, int] = {}
        for r in rules:
            origins[r.origin] = origins.get(r.origin, 0) + 1
        print(f"{path}: {len(rules)} rules ({len(rules) - multi} single-output, {multi} multi-output; "
              + ", ".join(f"{v} {k}" for k, v in sorted(origins.items())) + ")")
    return 0


def _fmt(args: argparse.Namespace) -> int:
    from eqsat.rules.rulefile import format_rule
    from eqsat.rules.rulesets import default_rules

    for path in args.files:
        for r in default_rules([path]):
            print(format_rule(r))
    return 0


def _generate(args: argparse.Namespace) -> int:
    from eqsat.rules.rulefile import save_rules
    from eqsat.rules.rulesets import default_rules
    from rulegen.generate import generate, header_lines
    from rulegen.world import get_world

    world = get_world(args.world)
    known = default_rules(args.known) if args.known else None
    rules, stats = generate(world, args.max_ops, seed=args.seed, progress=progress(), workers=args.workers,
                            known=known)
    command = f"eqsat-lab rules generate --world {args.world} --max-ops {args.max_ops} --seed {args.seed}"
    if args.known:
        command += f" --known {' '.join(args.known)}"
    save_rules(args.out, rules, header_lines(stats, command, world))
    if args.stats_json:
        write_json(args.stats_json, stats.to_dict())
    print("\n".join(header_lines(stats, command, world)[2:5]))
    print(f"wrote {len(rules)} rules to {args.out} in {sum(stats.seconds.values()):.1f} s "
          f"({', '.join(f'{k} {v:.1f} s' for k, v in stats.seconds.items())})")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from eqsat.rules.rulefile import format_rule
    from eqsat.rules.rulesets import default_rules
    from rulegen.verify import verify_rules

    bad = 0
    for path in args.files:
        rules = default_rules([path])
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
        if args.prove:
            _prove(args, path, rules)
    return 1 if bad else 0


def _prove(args: argparse.Namespace, path: str, rules: list) -> None:
    import time

    from eqsat.rules.rulefile import save_rules
    from rulegen.prove import prove_rules

    start = time.perf_counter()
    proofs = prove_rules(rules, args.axioms, args.prove_seconds)
    counts: dict[str, int] = {}
    for p in proofs:
        counts[p.status] = counts.get(p.status, 0) + 1
    skipped = sorted({p.reason for p in proofs if p.status == "skipped"})
    print(f"{path}: Z3 from the axioms: {', '.join(f'{n} {k}' for k, n in sorted(counts.items()))} "
          f"in {time.perf_counter() - start:.1f} s; the rest is left to the random tests"
          + (f" (skipped: {'; '.join(skipped)})" if skipped else ""))
    if args.out:
        if len(args.files) != 1:
            raise ValueError("--out takes the rules of exactly one file")
        proved = {p.rule for p in proofs if p.status == "proved"}
        save_rules(args.out, [r.with_meta(proved="z3") if r.name in proved else r for r in rules],
                   [f"rules of {path}; proved=z3: derived by Z3 from the operator axioms"])
        print(f"wrote {args.out}")


def _collisions(args: argparse.Namespace) -> int:
    from eqsat.ir.graph import input_, node
    from rulegen.fingerprint import collision_rate

    a, c = input_("A", (4, 4)), input_("C", (4, 4))
    left, right = node("relu", c), node("ewmul", a, node("relu", c))
    for low, high in ((-2, 2), (-50, 50)):
        rate = collision_rate(left, right, low, high, args.trials, args.seed)
        print(f"ints in [{low}, {high}]: relu(C) and A*relu(C) collide on {rate:.3g} of {args.trials:,} input sets")
    return 0


ACTIONS = (
    Command("check", "parse rule files and summarize them", _files, _check),
    Command("fmt", "print rule files in canonical form", _files, _fmt),
    Command("generate", "run the TASO generator: enumerate, fingerprint, prune, verify", _add_generate, _generate,
            output_args=("out", "stats_json"), input_args=("known",)),
    Command("verify", "verify every rule of a file; exit 1 if any is unsound", _add_verify, _verify,
            output_args=("out",), input_args=("files", "axioms")),
    Command("minimize", "drop every rule the others derive by bounded equality saturation", _add_minimize,
            _minimize, output_args=("out", "json_out"), input_args=("files", "known")),
    Command("collisions", "fingerprint collision rate of relu(C) vs A*relu(C) on 4x4 ints", _add_collisions,
            _collisions),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_subcommands(p, ACTIONS, "rules_cmd")


COMMAND = Command("rules", "generate, verify, check and format rule files", add_arguments, dispatched_by_subcommand)
