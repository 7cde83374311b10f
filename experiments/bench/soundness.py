"""``eqsat-lab experiment soundness``: can ``rules verify`` be fooled? Corrupt every shipped rule,
then compare the verifier's verdict with brute force (target: it rejects 100% of the corrupted
rules that are wrong).

Each rule is corrupted in small ways, one at a time, on either side: two operands swapped, an op
dropped (replaced by its first operand), an attribute changed (another choice, a number +-1), a
tensor variable replaced by another, a size expression changed. A corrupted rule is *wrong* when
brute force finds a counterexample: both sides evaluated in float64 at every uniform size 1..7
and at many random sizes 1..7 per free axis, under every attribute choice, independently of the
verifier's own shape sampler. Rows: per set, corrupted rules, how many are wrong, how many of
those the verifier rejected (the rate), and how many correct ones it rejected (conservative).
"""
from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.ir.domains import FLOAT
from eqsat.ir.ops import get_op
from eqsat.rules.pattern import App, Arith, Dim, Var
from eqsat.rules.rulefile import Rule, format_rule
from eqsat.rules.rulesets import DEFAULT_RULE_SETS, RULE_SETS, default_rules
from experiments.command import split_list
from experiments.output import write_table
from rulegen.verify import _attr_kinds, _values, build_sides, tensor_names, verify_rule

Path_ = tuple[int, ...]


def _apps(p: Any, path: Path_ = ()) -> list[tuple[Path_, App]]:
    if not isinstance(p, App):
        return []
    out = [(path, p)]
    for k, a in enumerate(p.args):
        out += _apps(a, path + (k,))
    return out


def _at(p: Any, path: Path_) -> Any:
    for k in path:
        p = p.args[k]
    return p


def _put(p: Any, path: Path_, new: Any) -> Any:
    if not path:
        return new
    args = list(p.args)
    args[path[0]] = _put(args[path[0]], path[1:], new)
    return replace(p, args=tuple(args))


def _vars_in(p: Any, path: Path_ = ()) -> list[tuple[Path_, Var]]:
    if isinstance(p, Var):
        return [(path, p)]
    if isinstance(p, App):
        return [x for k, a in enumerate(p.args) for x in _vars_in(a, path + (k,))]
    return []


def _attr_variants(op: str, name: str, value: Any) -> list[Any]:
    spec = {a.name: a for a in get_op(op).attrs}.get(name)
    if spec is not None and spec.choices:
        return [c for c in spec.choices if c != value]
    if isinstance(value, int) and not isinstance(value, bool):
        return [v for v in (value + 1, value - 1) if v >= 0]
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        return [(value[0] + 1,) + value[1:]]
    if isinstance(value, Arith):
        other = {"+": "-", "-": "+", "*": "+"}[value.op]
        return [replace(value, op=other)]
    if isinstance(value, Dim):
        return [replace(value, axis=value.axis + 1), replace(value, axis=max(value.axis - 1, 0))]
    return []


def corruptions(rule: Rule) -> list[tuple[str, Rule]]:
    """Every single small corruption of ``rule`` (kind, rule), on either side, deduplicated."""
    out: list[tuple[str, Rule]] = []
    seen = {format_rule(rule)}
    tensors = sorted(tensor_names(rule))
    for side_name in ("lhs", "rhs"):
        side = getattr(rule, side_name)
        for r, root in enumerate(side):
            def emit(kind: str, new_root: Any, side: tuple = side, r: int = r, side_name: str = side_name) -> None:
                roots = list(side)
                roots[r] = new_root
                bad = replace(rule, **{side_name: tuple(roots)}, name=f"{rule.name}~{kind}{len(out)}")
                text = format_rule(replace(bad, name=rule.name))
                if text not in seen:
                    seen.add(text)
                    out.append((kind, bad))

            for path, app in _apps(root):
                if len(app.args) >= 2 and app.args[0] != app.args[1]:
                    args = (app.args[1], app.args[0]) + app.args[2:]
                    emit("swap", _put(root, path, replace(app, args=args)))
                if app.args and path:
                    emit("drop", _put(root, path, app.args[0]))
                for k, (name, value) in enumerate(app.attrs):
                    for v in _attr_variants(app.op, name, value):
                        attrs = app.attrs[:k] + ((name, v),) + app.attrs[k + 1:]
                        emit("size" if isinstance(value, (Arith, Dim)) else "attr",
                             _put(root, path, replace(app, attrs=attrs)))
            for path, var in _vars_in(root):
                for other in tensors:
                    if other != var.name:
                        emit("var", _put(root, path, Var(other)))
    return out


def brute_force_wrong(rule: Rule, rng: np.random.Generator, draws: int = 150) -> bool | None:
    """True when some shape assignment (vars= ranks, free sizes 1..7) and attribute choice gives a
    counterexample in float64; False when none does; None when no assignment type-checks."""
    dims = rule.var_dims or {}
    tensors = sorted(tensor_names(rule))
    if any(t not in dims for t in tensors):
        return None
    attrs = _attr_kinds(rule)
    choices = [dict(zip(attrs, vals)) for vals in itertools.product(*attrs.values())] or [{}]
    shapes_list = [{t: tuple(v if d is None else d for d in dims[t]) for t in tensors} for v in range(1, 8)]
    for _ in range(draws):
        shapes_list.append({t: tuple(int(rng.integers(1, 8)) if d is None else d for d in dims[t]) for t in tensors})
    typed = False
    for shapes in shapes_list:
        for extra in choices:
            sides = build_sides(rule, {**shapes, **extra})
            if sides is None:
                continue
            typed = True
            left, right, _ = _values(sides, FLOAT, rng)
            for x, y in zip(left, right):
                scale = max(1.0, float(np.max(np.abs(x)))) if x.size else 1.0
                if x.shape != y.shape or (x.size and float(np.max(np.abs(x - y))) / scale > 1e-5):
                    return True
    return False if typed else None


def study(set_name: str, per_rule: int, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rules = default_rules([set_name])
    rng = np.random.default_rng(seed)
    row = {"set": set_name, "rules": len(rules), "corrupted": 0, "ill_typed": 0, "wrong": 0, "wrong_rejected": 0,
           "correct": 0, "correct_rejected": 0}
    misses: list[dict] = []
    for i, rule in enumerate(rules):
        bad = corruptions(rule)
        picks = rng.permutation(len(bad))[:per_rule] if per_rule else range(len(bad))
        for k in picks:
            kind, corrupted = bad[int(k)]
            row["corrupted"] += 1
            truth = brute_force_wrong(corrupted, np.random.default_rng((seed, i, int(k))))
            verdict = verify_rule(corrupted, np.random.default_rng((seed + 1, i, int(k))))
            if truth is None:
                row["ill_typed"] += 1
            elif truth:
                row["wrong"] += 1
                row["wrong_rejected"] += not verdict.ok
                if verdict.ok:
                    misses.append({"set": set_name, "kind": kind, "rule": format_rule(corrupted)})
            else:
                row["correct"] += 1
                row["correct_rejected"] += not verdict.ok
    row["rejection_rate"] = row["wrong_rejected"] / row["wrong"] if row["wrong"] else 1.0
    return row, misses


def run(sets: Sequence[str], per_rule: int, seed: int, out: Path) -> list[dict[str, Any]]:
    """One row per rule set; writes ``bench_soundness.csv``/``.json`` (with every accepted wrong rule)."""
    unknown = [s for s in sets if s not in RULE_SETS]
    if unknown:
        raise ValueError(f"--sets: unknown rule set(s) {', '.join(unknown)}; choose from {', '.join(RULE_SETS)}")
    rows, misses = [], []
    for name in sets:
        start = time.perf_counter()
        row, missed = study(name, per_rule, seed)
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        misses += missed
        print(f"{name:11s} {row['rules']:4d} rules, {row['corrupted']:5d} corrupted: {row['wrong']:5d} wrong, "
              f"{row['wrong_rejected']} rejected ({row['rejection_rate']:.1%}); {row['correct']} still correct "
              f"({row['correct_rejected']} rejected), {row['ill_typed']} ill-typed; {row['seconds']} s", flush=True)
    for m in misses:
        print(f"  accepted but wrong ({m['kind']}): {m['rule']}")
    write_table(out, "bench_soundness", rows, {"misses": misses, "per_rule": per_rule, "seed": seed})
    return rows


def main(args: argparse.Namespace) -> int:
    run(split_list(args.sets) or list(DEFAULT_RULE_SETS), args.per_rule, args.seed, Path(args.out))
    return 0
