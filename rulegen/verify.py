"""Verification of rewrite rules, in layers (TASO generator, step 4).

1. ``float``: both sides evaluated in float64 on random inputs in [-1, 1] at several
   shape assignments (the fingerprint shapes and rectangular ones). A rule applies
   wherever both sides type-check with equal output shapes, so it must hold at every
   such assignment tried.
2. ``modp``: for polynomial rules (every op exact mod p: no relu, no max), t random
   tests in GF(p), p = 2^31-1 by default. By Schwartz-Zippel a wrong rule of degree d
   survives with probability at most (d/p)^t; the bound is recorded.

Rules read from a user's file carry no shapes: ranks are found by trying small
square shapes, then dimensions are randomized (attribute variables, such as a
conv's stride, are drawn from their attribute's kind).
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eqsat.errors import EqsatError
from eqsat.ir.domains import FLOAT, MERSENNE_31, Domain, modp
from eqsat.ir.evaluate import evaluate_nodes
from eqsat.ir.graph import Graph, Node, input_, topo_order
from eqsat.ir.ops import get_op
from eqsat.rules.pattern import App, Pattern, Var, instantiate, tensor_vars, walk
from eqsat.rules.rulefile import Rule

Assignment = dict[str, Any]  # tensor var -> shape, attribute var -> value
Sides = tuple[tuple[Node, ...], tuple[Node, ...]]
_LEAVES: dict[tuple[str, tuple[int, ...]], Node] = {}  # strong refs: verification rebuilds the same leaves


def _leaf(name: str, shape: tuple[int, ...]) -> Node:
    found = _LEAVES.get((name, shape))
    if found is None:
        if len(_LEAVES) > 4096:
            _LEAVES.clear()
        found = _LEAVES[(name, shape)] = input_(name, shape)
    return found


@dataclass(frozen=True)
class Verdict:
    """What verification found for one rule."""

    rule: str
    passed: tuple[str, ...]
    failed: str = ""
    counterexample: str = ""
    shapes_tested: int = 0
    bound: float | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


# --------------------------------------------------------------------------- polynomial degree
def polynomial_degree(n: Node) -> int | None:
    """Total degree of a term as a polynomial in its leaves, from the op table's linearity
    properties (jointly linear: max of inputs; multilinear in all inputs: sum), or None."""
    degree: dict[Node, int | None] = {}
    for x in topo_order([n]):
        if x.is_leaf:
            degree[x] = 1
            continue
        spec = x.spec
        ins = [degree[i] for i in x.inputs]
        if any(d is None for d in ins):
            degree[x] = None
        elif spec.jointly_linear:
            degree[x] = max(ins)  # type: ignore[type-var]
        elif set(spec.linear_inputs(x.attr_dict, len(ins))) == set(range(len(ins))):
            degree[x] = sum(ins)  # type: ignore[arg-type]
        else:
            degree[x] = None
    return degree[n]


# --------------------------------------------------------------------------- shape assignments
_ATTR_SAMPLES: dict[str, tuple[Any, ...]] = {
    "pair": ((1, 1), (2, 2), (1, 2)),
    "pad": ("same", "valid", (1, 1)),
    "int": (0, 1),
    "ints": ((0,), (1,)),
    "perm": (None,),
}
_OP_ATTR_SAMPLES: dict[tuple[str, str], tuple[Any, ...]] = {
    # a reshape's target shape must keep the element count: shapes of 3, 9, 27 and 81 elements (a
    # variable of rank 1 to 4 with the free sizes 3) in several ranks, so rules over reshape
    # chains type-check at some of them
    ("reshape", "shape"): ((3,), (1, 3), (9,), (3, 3), (1, 9), (3, 3, 1), (27,), (3, 9), (9, 3), (3, 3, 3),
                           (1, 3, 9), (81,), (9, 9), (3, 27), (3, 3, 3, 3), (1, 9, 9)),
}


def _attr_kinds(rule: Rule) -> dict[str, tuple[Any, ...]]:
    """Sample values for every attribute variable, from the kind of the attribute it stands in."""
    out: dict[str, tuple[Any, ...]] = {}
    for side in (rule.lhs, rule.rhs):
        for root in side:
            for p in walk(root):
                if isinstance(p, App):
                    for spec_attr in get_op(p.op).attrs:
                        e = dict(p.attrs).get(spec_attr.name)
                        if isinstance(e, Var) and e.name not in out:
                            samples = spec_attr.choices or _OP_ATTR_SAMPLES.get(
                                (p.op, spec_attr.name), _ATTR_SAMPLES.get(spec_attr.kind, (1,)))
                            out[e.name] = tuple(samples)
    return out


def _attr_choices(rule: Rule) -> list[dict[str, Any]]:
    """Every combination of the rule's attribute variables' values (one empty one without any)."""
    attrs = _attr_kinds(rule)
    return [dict(zip(attrs, vals)) for vals in itertools.product(*attrs.values())] or [{}]


def build_sides(rule: Rule, assignment: Assignment) -> tuple[tuple[Node, ...], tuple[Node, ...]] | None:
    """Both sides' nodes at ``assignment``, or None where a side does not type-check or shapes differ."""
    tensors = tensor_names(rule)
    bindings = {k: (_leaf(k, v) if k in tensors else v) for k, v in assignment.items()}
    try:
        left = tuple(instantiate(p, bindings) for p in rule.lhs)
        right = tuple(instantiate(p, bindings) for p in rule.rhs)
    except (EqsatError, KeyError):
        return None
    if any(len(a.shapes) != 1 or a.shapes != b.shapes for a, b in zip(left, right)):
        return None
    return left, right


def tensor_names(rule: Rule) -> set[str]:
    """Variables of the rule that stand for tensors."""
    return set().union(*(tensor_vars(p) for p in rule.lhs + rule.rhs))


UNIFORM_SIZES = (4, 5, 2, 1, 6)  # the free sizes tried all at once by rules without a world


def sample_assignments(rule: Rule, rng: np.random.Generator, base: Mapping[str, tuple[int, ...]] | None = None,
                       alt_dims: Mapping[str, Sequence[Sequence[int]]] | None = None,
                       want: int = 3, tries: int = 24) -> list[tuple[Assignment, Sides]]:
    """Up to ``want`` distinct assignments (with both sides built) at which both sides type-check
    with equal shapes.

    With ``base`` (e.g. a world's fingerprint shapes) that assignment comes first and
    ``alt_dims`` gives per-axis sizes to randomize; without, ranks are searched first.
    """
    tensors = sorted(tensor_names(rule))
    found: list[tuple[Assignment, Sides]] = []
    keys: set[tuple] = set()

    def add(a: Assignment) -> None:
        key = tuple(sorted((k, repr(v)) for k, v in a.items()))
        if key in keys:
            return
        keys.add(key)
        sides = build_sides(rule, a)
        if sides is not None:
            found.append((a, sides))

    attr_choices = _attr_choices(rule)
    uniform: list[dict[str, tuple[int, ...]]] = []
    if base is None or any(t not in base for t in tensors):
        # a rule's own vars= must type it (wrong metadata is an error, not a reason to guess)
        base = _vars_shapes(rule, tensors, attr_choices) if rule.var_dims is not None else \
            _find_ranks(rule, tensors, attr_choices)
        if base is None:
            return []
        alt_dims = {t: [(2, 3, 4, 5)] * len(s) for t, s in base.items()}
        # every free size at once even, odd, 1 and above a 3x3 kernel: independent random sizes rarely
        # type-check where sizes are coupled, and strides and SAME padding treat parities differently
        dims = rule.var_dims or {t: (None,) * len(s) for t, s in base.items()}
        uniform = [{t: tuple(v if d is None else d for d in dims.get(t, (None,) * len(base[t]))) for t in tensors}
                   for v in UNIFORM_SIZES]
        want += len(UNIFORM_SIZES)
    for extra in attr_choices:  # the base shapes at the first two attribute choices that type-check
        if len(found) >= 2:
            break
        add({**{t: tuple(base[t]) for t in tensors}, **extra})
    for shapes in uniform:
        for extra in attr_choices:
            before = len(found)
            add({**shapes, **extra})
            if len(found) > before:
                break
    alt_dims = alt_dims or {}
    for _ in range(tries):
        if len(found) >= want:
            break
        a: Assignment = {}
        for t in tensors:
            dims = alt_dims.get(t)
            a[t] = tuple(int(d[rng.integers(len(d))]) for d in dims) if dims else tuple(base[t])
        a.update(attr_choices[int(rng.integers(len(attr_choices)))])
        add(a)
    return found


def _vars_shapes(rule: Rule, tensors: Sequence[str], attr_choices: Sequence[dict]) -> dict[str, tuple[int, ...]] | None:
    """The shapes the rule's ``vars`` metadata gives (free sizes 3), if both sides type-check there."""
    dims = rule.var_dims
    if dims is None or any(t not in dims for t in tensors):
        return None
    shapes = {t: tuple(3 if d is None else d for d in dims[t]) for t in tensors}
    return shapes if any(build_sides(rule, {**shapes, **extra}) is not None for extra in attr_choices) else None


def _find_ranks(rule: Rule, tensors: Sequence[str], attr_choices: Sequence[dict]) -> dict[str, tuple[int, ...]] | None:
    """Smallest-effort rank search: every tensor variable a cube of side 3 of rank 0 to 4."""
    ranks = (2, 4, 3, 1, 0)
    combos = sorted(itertools.product(ranks, repeat=len(tensors)), key=lambda c: sum(r != 2 for r in c))
    for combo in combos[:4096]:
        shapes = {t: (3,) * r for t, r in zip(tensors, combo)}
        for extra in attr_choices:
            if build_sides(rule, {**shapes, **extra}) is not None:
                return shapes
    return None


# --------------------------------------------------------------------------- numeric tests
def _values(sides: tuple[tuple[Node, ...], tuple[Node, ...]], domain: Domain,
            rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray], dict[str, np.ndarray]]:
    left, right = sides
    g = Graph(left + right)
    leaves = {n.attr("name"): domain.random(n.shape, rng) for n in g.leaves()}
    vals = evaluate_nodes(g, leaves, domain)
    return [vals[n] for n in left], [vals[n] for n in right], leaves


ZERO_REDRAWS = 8  # fresh inputs drawn when every output came out all zero (a relu chain can kill all)


def float_test(rule: Rule, assignments: Sequence[tuple[Assignment, Sides]], rng: np.random.Generator,
               trials: int = 2, rtol: float = 1e-6) -> tuple[bool, str]:
    """Compare both sides in float64 (``trials`` times at the first assignment, once at the others);
    the first failure is returned as a readable counterexample.

    Outputs that are all zero on both sides say nothing (three relu convolutions with two
    channels often give zeros, and so let ``conv-0896``, which drops a kernel, through): such a
    draw is repeated with fresh inputs up to :data:`ZERO_REDRAWS` times. Sides that are zero at
    every draw (``A - A`` and ``B - B``) are compared as they are: they are equal."""
    for k, (a, sides) in enumerate(assignments):
        for _ in range(trials if k == 0 else 1):
            for _redraw in range(ZERO_REDRAWS + 1):
                lv, rv, leaves = _values(sides, FLOAT, rng)
                if any(np.any(x) or np.any(y) for x, y in zip(lv, rv)):
                    break
            for i, (x, y) in enumerate(zip(lv, rv)):
                err = float(np.max(np.abs(x - y))) / max(1.0, float(np.max(np.abs(x))))
                if not err <= rtol:
                    return False, _describe(a, leaves, i, x, y, err)
    return True, ""


def _describe(a: Assignment, leaves: Mapping[str, np.ndarray], i: int, x: np.ndarray, y: np.ndarray, err: float) -> str:
    shapes = ", ".join(f"?{k}: {v}" for k, v in sorted(a.items(), key=lambda kv: kv[0]))
    text = f"at {shapes}: output {i} differs, relative error {err:.3g}"
    if sum(v.size for v in leaves.values()) <= 48:
        text += "; inputs " + "; ".join(f"?{k}={np.round(v, 3).tolist()}" for k, v in sorted(leaves.items()))
        text += f"; left={np.round(x, 3).tolist()} right={np.round(y, 3).tolist()}"
    return text


def modp_test(rule: Rule, assignments: Sequence[tuple[Assignment, Sides]], rng: np.random.Generator,
              t: int = 3, p: int = MERSENNE_31) -> tuple[bool | None, float | None, str]:
    """Schwartz-Zippel tests in GF(p): (passed, bound (d/p)^t, counterexample), or (None, None, '')
    when a side is not a polynomial (relu, max pool, sigmoid, ...)."""
    domain = modp(p)
    first = assignments[0][1]
    nodes = first[0] + first[1]
    for n in topo_order(nodes):
        if not n.is_leaf and not n.spec.defined_in(n.attr_dict, domain):
            return None, None, ""
    degrees = [polynomial_degree(n) for n in nodes]
    if any(d is None for d in degrees):
        return None, None, ""
    d = max(degrees)  # type: ignore[type-var]
    for a, sides in assignments[:1]:
        for _ in range(t):
            lv, rv, _ = _values(sides, domain, rng)
            for i, (x, y) in enumerate(zip(lv, rv)):
                if not np.array_equal(x, y):
                    return False, None, f"at {a}: output {i} differs mod {p}"
    return True, (d / p) ** t, ""


def verify_rule(rule: Rule, rng: np.random.Generator, base: Mapping[str, tuple[int, ...]] | None = None,
                alt_dims: Mapping[str, Sequence[Sequence[int]]] | None = None,
                float_trials: int = 8, modp_trials: int = 3, p: int = MERSENNE_31) -> Verdict:
    """Run the verification layers on ``rule``; the first failing layer stops it.

    Eight float draws at the first shape assignment: at k = 4 the generator's buckets hold pairs
    such as ``relu(conv(conv(R, L), L)) = conv(conv(R, L), L)`` for a non-negative R, true whenever
    the 2x2 product ``L L`` happens to be non-negative; with two draws 5 of 403 conv-world rules
    passed that lottery (``rules verify`` refuted them). A wrong pair fails at its first draw
    mostly, so the extra draws cost little (the shipped k <= 3 sets are unchanged)."""
    assignments = sample_assignments(rule, rng, base, alt_dims)
    if not assignments:
        return Verdict(rule.name, (), "typecheck", "no shape assignment makes both sides type-check with equal shapes")
    ok, detail = float_test(rule, assignments, rng, float_trials)
    if not ok:
        return Verdict(rule.name, (), "float", detail, len(assignments))
    passed, bound, detail = modp_test(rule, assignments, rng, modp_trials, p)
    if passed is False:
        return Verdict(rule.name, ("float",), "modp", detail, len(assignments))
    layers = ("float", "modp") if passed else ("float",)
    return Verdict(rule.name, layers, "", "", len(assignments), bound)


def world_shapes(world: Any, rule: Rule, fresh_shapes: bool = False
                 ) -> tuple[dict[str, tuple[int, ...]] | None, dict[str, Any] | None]:
    """Base shapes and alternative dims for a rule's variables from a world (None if they cannot
    all be given one). With ``fresh_shapes``, a variable that is no leaf of the world (the
    generator's fresh ``D``, which stands for a generalized subterm) takes the first shape, among
    those of the world's leaves and of the rule's subterms over leaves, at which both sides
    type-check; without, such a rule gets None (the minimizer's choice, which the shipped
    minimized sets were made with)."""
    names = tensor_names(rule)
    by_name = {leaf.name: leaf for leaf in world.leaves}
    base = {v: by_name[v].shape for v in names if v in by_name}
    fresh = sorted(names - set(base))
    if fresh and not fresh_shapes:
        return None, None
    if fresh:
        attr_choices = _attr_choices(rule)
        leaves = {v: _leaf(v, shape) for v, shape in base.items()}
        shapes = list(dict.fromkeys([leaf.shape for leaf in world.leaves] +
                                    [s for p in rule.lhs + rule.rhs for s in _subterm_shapes(p, leaves)]))
        trials = ({**base, **dict(zip(fresh, choice))} for choice in itertools.product(shapes, repeat=len(fresh)))
        base = next((t for t in trials if any(build_sides(rule, {**t, **extra}) is not None
                                                for extra in attr_choices)), None)
        if base is None:
            return None, None
    alt = {v: world.test_dims(v, shape) for v, shape in base.items()}
    return base, alt


def _subterm_shapes(p: Pattern, leaves: Mapping[str, Node]) -> list[tuple[int, ...]]:
    """The shapes of ``p``'s subterms whose variables are all in ``leaves`` (that type-check)."""
    out: list[tuple[int, ...]] = []
    for q in walk(p):
        if isinstance(q, App) and tensor_vars(q) <= set(leaves):
            try:
                n = instantiate(q, dict(leaves))
            except (EqsatError, KeyError):
                continue
            if len(n.shapes) == 1:
                out.append(n.shape)
    return out


@dataclass(frozen=True)
class FileReport:
    """Verification of every rule of a file."""

    path: str
    verdicts: tuple[Verdict, ...]

    @property
    def unsound(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if not v.ok)


def verify_rules(rules: Sequence[Rule], seed: int = 0, path: str = "<rules>") -> FileReport:
    """Verify rules from any source; generated rules use their world's leaf shapes when they can."""
    from rulegen.world import WORLDS

    verdicts = []
    for i, rule in enumerate(rules):
        world = WORLDS.get(dict(rule.meta).get("world", ""))
        base = alt = None
        if world is not None:
            base, alt = world_shapes(world, rule, fresh_shapes=True)
        verdicts.append(verify_rule(rule, np.random.default_rng((seed, i)), base, alt))
    return FileReport(path, tuple(verdicts))
