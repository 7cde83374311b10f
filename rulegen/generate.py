"""The TASO substitution generator as one pipeline: enumerate → fingerprint → prune → verify.

``generate(world, max_ops)`` returns the verified rules (deterministic: the same
arguments give the same rules in the same order) and the statistics of every
stage. Multi-output rules are derived, not written: every verified rule with a
side ``concat(L1, L2)`` where L1 and L2 are the same op sharing an argument
turns into the two-output rule ``L1, L2 => split(other side)`` (the reference
pair move made into rules, TASO's "two same-type ops reading the same input"),
and is verified like the others.
"""
from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from eqsat.ir.graph import Node, leaves_of
from eqsat.rules.pattern import App, Dim, Pattern, Var, pattern_of, tensor_vars
from eqsat.rules.rulefile import Rule, format_pattern, format_rule, rule_key
from rulegen.enumerate import enumerate_graphs
from rulegen.fingerprint import buckets, count_pairs
from rulegen.novelty import NoveltySettings, novel_groups
from rulegen.prune import prune
from rulegen.verify import Verdict, verify_rule
from rulegen.world import WEIGHT, World


@dataclass
class GenerationStats:
    world: str
    max_ops: int
    seed: int
    graphs_per_size: list[int]
    graphs_total: int
    enumeration_attempts: int
    rejected_by_shape: int
    rejected_by_kinds: int
    buckets: int
    candidate_pairs: int
    leaf_pairs: int
    removed_renaming: int
    removed_common_root: int
    removed_common_subgraph: int
    generalized_added: int
    merged_by_variable_renaming: int
    after_pruning: int
    unusable_direction: int
    rejected_float: int
    rejected_modp: int
    rejected_typecheck: int
    single_rules: int
    multi_rules: int
    verified_modp: int
    seconds: dict[str, float] = field(default_factory=dict)
    novelty: dict[str, Any] | None = None  # with known rules: what the e-graph step kept of the buckets
    rejected_examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ops(p: Pattern) -> int:
    return 0 if isinstance(p, Var) else 1 + sum(_ops(a) for a in p.args)


def pair_to_rule(a: Node, b: Node) -> tuple[Pattern, Pattern, bool] | None:
    """Orient a candidate pair: (left, right, bidirectional), or None when neither side's
    variables cover the other's (no usable rewrite direction)."""
    pa, pb = pattern_of(a), pattern_of(b)
    va, vb = tensor_vars(pa), tensor_vars(pb)
    key = lambda p: (_ops(p), format_pattern(p))  # noqa: E731
    if va == vb and not isinstance(pa, Var) and not isinstance(pb, Var):
        left, right = (pa, pb) if key(pa) >= key(pb) else (pb, pa)
        return left, right, True
    if vb <= va and not isinstance(pa, Var):
        return pa, pb, False
    if va <= vb and not isinstance(pb, Var):
        return pb, pa, False
    return None


def derive_multi(rule: Rule) -> Rule | None:
    """The two-output rule of a concat rule whose concat merges two same-type ops sharing an argument."""
    for side, other in ((rule.lhs[0], rule.rhs[0]), (rule.rhs[0], rule.lhs[0])):
        if side is rule.rhs[0] and not rule.bidirectional:
            continue
        if not (isinstance(side, App) and side.op == "concat" and len(side.args) == 2):
            continue
        l1, l2 = side.args
        if not (isinstance(l1, App) and isinstance(l2, App) and l1.op == l2.op and l1.attrs == l2.attrs) \
                or l1 == l2 or l1.op == "concat":
            continue
        # two same-type ops reading leaves directly, at least one of them the same
        if not all(isinstance(x, Var) for x in l1.args + l2.args) or not any(x == y for x, y in zip(l1.args, l2.args)):
            continue
        if not tensor_vars(other) <= tensor_vars(l1) | tensor_vars(l2):
            continue
        axis = dict(side.attrs)["axis"]
        sizes = (Dim(l1, axis), Dim(l2, axis))
        split = App("split", (("axis", axis), ("sizes", sizes)), (other,))
        rhs = tuple(App("proj", (("index", i),), (split,)) for i in range(2))
        info = dict(rule.meta)
        meta = (("origin", "generated"), ("world", info.get("world", "")), ("vars", info.get("vars", "")),
                ("weights", info.get("weights", "")), ("from", rule.name))
        return Rule(f"{rule.name}-pair", (l1, l2), rhs, False, tuple((k, v) for k, v in meta if v))
    return None


def var_signature(world: World, shapes: dict[str, tuple[int, ...]]) -> str:
    """The rank of every variable and which of its sizes are fixed, e.g. ``A:?x?,W:?x?x3x3``: the
    world's free axes (several test sizes) print as ``?``. The e-graph compiler reads it."""
    alt = _alt_dims(world, shapes)
    parts = []
    for v in sorted(shapes):
        dims = ["?" if len(opts) > 1 else str(opts[0]) for opts in alt[v]]
        parts.append(f"{v}:{'x'.join(dims)}")
    return ",".join(parts)


def _alt_dims(world: World, base: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    return {v: world.test_dims(v, shape) for v, shape in base.items()}


Job = tuple[int, Rule, dict[str, tuple[int, ...]], dict[str, Any]]


def _verify_jobs(jobs: list[Job], seed: int) -> list[Verdict]:
    """Verify a chunk of rules; each rule's randomness comes from (seed, its index), so chunking
    and worker count do not change the result."""
    return [verify_rule(rule, np.random.default_rng((seed, i)), base, alt) for i, rule, base, alt in jobs]


def verify_all(jobs: list[Job], seed: int, workers: int = 1, progress: bool = False,
               desc: str = "verify") -> list[Verdict]:
    """Verify rules, in ``workers`` processes when more than one (same verdicts either way)."""
    chunks = [jobs[i : i + 256] for i in range(0, len(jobs), 256)]
    bar = tqdm(total=len(jobs), desc=desc, disable=not progress, leave=False)
    out: list[Verdict] = []
    if workers <= 1 or len(chunks) <= 1:
        for chunk in chunks:
            out.extend(_verify_jobs(chunk, seed))
            bar.update(len(chunk))
    else:
        ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            for verdicts in pool.map(_verify_jobs, chunks, [seed] * len(chunks)):
                out.extend(verdicts)
                bar.update(len(verdicts))
    bar.close()
    return out


def generate(
    world: World, max_ops: int, seed: int = 0, progress: bool = False, workers: int = 1,
    known: Sequence[Rule] | None = None,
) -> tuple[list[Rule], GenerationStats]:
    """Run the whole generator on ``world`` up to ``max_ops`` ops per graph (verification in
    ``workers`` processes; the output does not depend on it).

    With ``known`` rules (e.g. the minimized set at ``max_ops - 1``), only buckets that hold a
    graph of ``max_ops`` ops are paired, and only terms ``known`` cannot already prove equal
    (:mod:`.novelty`); the rules are then named ``{world}{max_ops}-NNNNN``."""
    clock: dict[str, float] = {}
    t0 = time.perf_counter()
    en = enumerate_graphs(world, max_ops, seed=seed, progress=progress)
    clock["enumerate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    groups = buckets(en)
    op_pairs, leaf_pairs = count_pairs(groups)
    clock["fingerprint"] = time.perf_counter() - t0

    novelty = None
    if known is not None:
        novelty = novel_groups(en, groups, known, max_ops, NoveltySettings(workers=workers))
        clock.update({f"novelty {k}": v for k, v in novelty.seconds.items()})
        groups = novelty.groups
    t0 = time.perf_counter()
    pruned = prune(en, groups, seed=seed)
    clock["prune"] = time.perf_counter() - t0
    prefix, width = (world.name, 4) if known is None else (f"{world.name}{max_ops}", 5)

    t0 = time.perf_counter()
    oriented: dict[str, tuple[Pattern, Pattern, bool, dict[str, tuple[int, ...]]]] = {}
    unusable = 0
    for a, b in pruned.kept:
        r = pair_to_rule(a, b)
        if r is None:
            unusable += 1
            continue
        text = format_pattern(r[0]) + (" <=> " if r[2] else " => ") + format_pattern(r[1])
        oriented.setdefault(text, r + ({leaf.attr("name"): leaf.shape for leaf in leaves_of([a, b])},))
    ordered = sorted(oriented.items(), key=lambda kv: (_ops(kv[1][0]) + _ops(kv[1][1]), kv[0]))
    # a rule's variables are just names: pairs equal up to renaming leaves of different shapes or
    # kinds (W 3x3, K 1x1, a fresh D) are one rule, which applies wherever it type-checks
    # (the variables' fixed sizes stay part of the key: the e-graph compiler matches on them)
    by_key: dict[tuple, Any] = {}
    for text, r in ordered:
        sizes = tuple(sorted(var_signature(world, r[3]).replace(",", ":").split(":")[1::2]))
        by_key.setdefault((rule_key(Rule("k", (r[0],), (r[1],), r[2])), sizes), (text, r))
    renamed = len(ordered) - len(by_key)
    ordered = list(by_key.values())
    jobs: list[Job] = []
    for i, (_text, (left, right, both, shapes)) in enumerate(ordered):
        weights = ",".join(sorted(v for v in shapes if world.kind_of(v) == WEIGHT))
        meta = (("origin", "generated"), ("world", world.name), ("vars", var_signature(world, shapes)))
        rule = Rule(
            f"{prefix}-{i:0{width}d}", (left,), (right,), both,
            meta + ((("weights", weights),) if weights else ())
        )
        jobs.append((i, rule, shapes, _alt_dims(world, shapes)))
    verdicts = verify_all(jobs, seed, workers, progress, f"verify {world.name}")
    rules: list[Rule] = []
    rejected = {"float": 0, "modp": 0, "typecheck": 0}
    examples: list[str] = []
    verified_modp = 0
    shapes_of: dict[str, dict[str, tuple[int, ...]]] = {}
    for (_, rule, shapes, _), verdict in zip(jobs, verdicts):
        if not verdict.ok:
            rejected[verdict.failed] += 1
            if len(examples) < 5:
                examples.append(f"{verdict.failed}: {format_rule(rule)}  [{verdict.counterexample[:160]}]")
            continue
        verified_modp += "modp" in verdict.passed
        shapes_of[rule.name] = shapes
        rules.append(rule.with_meta(verified=",".join(verdict.passed)))
    derived_jobs: list[Job] = []
    seen_multi: set[str] = set()
    for rule in rules:
        derived = derive_multi(rule)
        if derived is None:
            continue
        key = " ".join(map(format_pattern, derived.lhs))
        if key in seen_multi:
            continue
        seen_multi.add(key)
        shapes = shapes_of[rule.name]
        derived_jobs.append((len(jobs) + len(derived_jobs), derived, shapes, _alt_dims(world, shapes)))
    multi = [
        job[1].with_meta(verified=",".join(v.passed))
        for job, v in zip(derived_jobs, verify_all(derived_jobs, seed, 1))
        if v.ok
    ]
    clock["verify"] = time.perf_counter() - t0

    stats = GenerationStats(
        world=world.name,
        max_ops=max_ops,
        seed=seed,
        graphs_per_size=en.counts(),
        graphs_total=len(en.terms),
        enumeration_attempts=en.attempts,
        rejected_by_shape=en.rejected_shape,
        rejected_by_kinds=en.rejected_kind,
        buckets=len(groups),
        candidate_pairs=op_pairs,
        leaf_pairs=leaf_pairs,
        removed_renaming=pruned.removed_renaming,
        removed_common_root=pruned.removed_common_root,
        removed_common_subgraph=pruned.removed_common_subgraph,
        generalized_added=pruned.generalized_added,
        merged_by_variable_renaming=renamed,
        after_pruning=len(pruned.kept),
        unusable_direction=unusable,
        rejected_float=rejected["float"],
        rejected_modp=rejected["modp"],
        rejected_typecheck=rejected["typecheck"],
        single_rules=len(rules),
        multi_rules=len(multi),
        verified_modp=verified_modp,
        seconds={k: round(v, 3) for k, v in clock.items()},
        rejected_examples=examples,
        novelty=None if novelty is None else {
            "buckets_in": novelty.buckets_in, "terms_in": novelty.terms_in, "names": novelty.names,
            "enodes": novelty.enodes,
            "pairs_before": novelty.pairs_before, "pairs_after": novelty.pairs_after,
            "buckets_out": len(novelty.groups)},
    )
    return rules + multi, stats


def header_lines(stats: GenerationStats, command: str, world: World) -> list[str]:
    """The comment header of a generated rule file: how it was made and what the generator saw."""
    return [
        f"generated by: {command}",
        f"world {world.name}: {world.note}",
        f"graphs per size {stats.graphs_per_size} ({stats.graphs_total} in all); candidate pairs "
        f"{stats.candidate_pairs} (+{stats.leaf_pairs} with a leaf)",
        f"pruned: {stats.removed_renaming} by renaming, {stats.removed_common_root} by common root, "
        f"{stats.removed_common_subgraph} by generalizable common subgraphs "
        f"(+{stats.generalized_added} general forms); "
        f"{stats.merged_by_variable_renaming} equal to another rule up to variable names",
        f"verification rejected {stats.rejected_float} (float), {stats.rejected_modp} (mod p), "
        f"{stats.rejected_typecheck} (no valid shapes); kept {stats.single_rules} single-output rules "
        f"({stats.verified_modp} also mod p) and {stats.multi_rules} two-output rules",
        "a rule applies wherever both sides type-check with equal output shapes",
    ] + ([] if stats.novelty is None else [
        f"known rules ran on the {stats.novelty['buckets_in']} buckets holding a {stats.max_ops}-op graph "
        f"({stats.novelty['terms_in']} terms, {stats.novelty['names']} names of {stats.max_ops}-op graphs, "
        f"{stats.novelty['enodes']} e-nodes): {stats.novelty['pairs_before']} pairs -> "
        f"{stats.novelty['pairs_after']} pairs of terms they do not prove equal",
    ])
