"""Proving rules from operator axioms with Z3 (TASO's verifier), next to the random tests.

Each op with its attributes is an uninterpreted function over one sort of tensors; each axiom
(``eqsat/rules/axioms.rules``) is a universally quantified equality, triggered on its sides, and
an axiom with ``when=A.1=C.1`` holds only where those sizes agree. Sizes are an uninterpreted
``dim(tensor, axis)``; :data:`SHAPES` gives, per op, the sizes of its result and the conditions
under which it is well typed (the op table's shape rules, for the ops the axioms speak of). A
rule is proved when Z3 shows the axioms make its two sides equal (the negation is unsatisfiable)
assuming every subterm of both sides is well typed, as every rewrite the searches make is,
within a time limit per rule. Z3 answers ``sat`` when it finds a model of the
axioms where the sides differ (not derivable from them) and ``unknown`` when it gives up; both
leave the rule to the random tests. Rules whose attributes are size expressions (a split's part
sizes) are not encoded: the axioms know nothing of shapes. ``z3-solver`` is an optional extra.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.errors import EqsatError
from eqsat.rules.pattern import App, Arith, Dim, Pattern, Var, tensor_vars
from eqsat.rules.rulefile import Rule
from eqsat.rules.rulesets import RULES_DIR, default_rules

AXIOMS_PATH = RULES_DIR / "axioms.rules"


RANK = 4  # dim(t, k) is stated for k < RANK (a 2-D tensor's sizes past its rank are unconstrained)


def _same(dim: Any, t: Any, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """Elementwise ops: equal sizes in, the same size out."""
    return ([dim(a, k) == dim(args[0], k) for a in args[1:] for k in range(RANK)],
            [dim(t, k) == dim(args[0], k) for k in range(RANK)])


def _concat(dim: Any, t: Any, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    axis = attrs["axis"]
    return ([dim(a, k) == dim(args[0], k) for a in args[1:] for k in range(RANK) if k != axis],
            [dim(t, k) == (sum(dim(a, k) for a in args) if k == axis else dim(args[0], k)) for k in range(RANK)])


def _matmul(dim: Any, t: Any, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    a, b = args
    return [dim(a, 1) == dim(b, 0)], [dim(t, 0) == dim(a, 0), dim(t, 1) == dim(b, 1)]


def _transpose(dim: Any, t: Any, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    perm = attrs["perm"] or (1, 0)
    return [], [dim(t, k) == dim(args[0], p) for k, p in enumerate(perm)]


def _conv(dim: Any, t: Any, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    x, w = args[:2]  # stride 1, SAME: the spatial sizes stay
    return ([dim(x, 1) == dim(w, 1)],
            [dim(t, 0) == dim(x, 0), dim(t, 1) == dim(w, 0), dim(t, 2) == dim(x, 2), dim(t, 3) == dim(x, 3)])


def _enlarge(dim: Any, t: Any, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    h, w = attrs["size"]
    return [], [dim(t, 0) == dim(args[0], 0), dim(t, 1) == dim(args[0], 1), dim(t, 2) == h, dim(t, 3) == w]


SHAPES = {"ewadd": _same, "ewmul": _same, "relu": _same, "concat": _concat, "matmul": _matmul,
          "transpose": _transpose, "conv2d": _conv, "enlarge": _enlarge}
"""op -> (well-typedness conditions, result sizes) of an application, as Z3 facts over ``dim``."""


class Unencodable(Exception):
    """A rule the prover cannot state (why is the message)."""


@dataclass(frozen=True)
class Proof:
    """What Z3 said of one rule: ``proved``, ``not derivable`` (Z3 found a countermodel of the
    axioms), ``unknown`` (time limit or incompleteness) or ``skipped`` (with the reason)."""

    rule: str
    status: str
    seconds: float
    reason: str = ""


def _z3() -> Any:
    try:
        import z3
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise EqsatError("proving rules needs the optional extra: pip install 'eqsat-lab[prove]'") from exc
    return z3


class Prover:
    """The axioms as Z3 formulas over one tensor sort; :meth:`prove` checks one rule."""

    def __init__(self, axioms: Sequence[Rule] | None = None, seconds: float = 2.0):
        self.z3 = _z3()
        z3 = self.z3
        self.sort = z3.DeclareSort("T")
        self.dim = z3.Function("dim", self.sort, z3.IntSort(), z3.IntSort())
        self.functions: dict[tuple[str, str, int], Any] = {}
        self.size_axioms: list[Any] = []
        self.seconds = seconds
        self.axioms = list(default_rules([AXIOMS_PATH]) if axioms is None else axioms)
        self.formulas = [self._axiom(a) for a in self.axioms]

    def _function(self, p: App) -> Any:
        for _, value in p.attrs:
            if _has_size(value):
                raise Unencodable(f"{p.op} has a size expression attribute")
        key = (p.op, repr(p.attrs), len(p.args))
        if key not in self.functions:
            z3 = self.z3
            f = self.functions[key] = z3.Function(f"{p.op}{len(self.functions)}", *([self.sort] * len(p.args)),
                                                  self.sort)
            if p.op in SHAPES:  # the sizes of every application of f, wherever it appears
                xs = [z3.Const(f"x{i}", self.sort) for i in range(len(p.args))]
                _, sizes = SHAPES[p.op](self.dim, f(*xs), xs, dict(p.attrs))
                self.size_axioms.append(z3.ForAll(xs, z3.And(sizes), patterns=[f(*xs)]))
        return self.functions[key]

    def _typed(self, p: Pattern, env: dict[str, Any]) -> list[Any]:
        """The conditions under which every application in ``p`` is well typed."""
        if not isinstance(p, App):
            return []
        out = [c for a in p.args for c in self._typed(a, env)]
        if p.op in SHAPES:
            args = [self._term(a, env) for a in p.args]
            out += SHAPES[p.op](self.dim, self._term(p, env), args, dict(p.attrs))[0]
        return out

    def _term(self, p: Pattern, env: dict[str, Any]) -> Any:
        if isinstance(p, Var):
            return env[p.name]
        if not isinstance(p, App):
            raise Unencodable(f"pattern {p!r}")
        if p.op in ("split", "proj"):
            raise Unencodable("a split's parts are sized by shape expressions")
        return self._function(p)(*(self._term(a, env) for a in p.args))

    def _env(self, rule: Rule) -> dict[str, Any]:
        names = sorted(set().union(*(tensor_vars(p) for p in rule.lhs + rule.rhs)))
        return {n: self.z3.Const(f"{rule.name}.{n}", self.sort) for n in names}

    def _axiom(self, rule: Rule) -> Any:
        z3 = self.z3
        if len(rule.lhs) != 1 or len(rule.rhs) != 1:
            raise EqsatError(f"axiom {rule.name}: an axiom is one equality (one term each side)")
        env = self._env(rule)
        left, right = self._term(rule.lhs[0], env), self._term(rule.rhs[0], env)
        triggers = [t for t, p in ((left, rule.lhs[0]), (right, rule.rhs[0])) if isinstance(p, App)]
        guards = []
        for cond in filter(None, dict(rule.meta).get("when", "").split(",")):
            (a, ka), (b, kb) = (side.split(".") for side in cond.split("="))
            guards.append(self.dim(env[a], int(ka)) == self.dim(env[b], int(kb)))
        body = z3.Implies(z3.And(guards), left == right) if guards else left == right
        return z3.ForAll(list(env.values()), body, patterns=triggers)

    def prove(self, rule: Rule) -> Proof:
        z3 = self.z3
        start = time.perf_counter()
        try:
            if len(rule.lhs) != len(rule.rhs):
                raise Unencodable("sides with different numbers of outputs")
            env = self._env(rule)
            goal = z3.And([self._term(a, env) == self._term(b, env) for a, b in zip(rule.lhs, rule.rhs)])
            typed = [c for p in rule.lhs + rule.rhs for c in self._typed(p, env)]
        except Unencodable as exc:
            return Proof(rule.name, "skipped", time.perf_counter() - start, str(exc))
        solver = z3.Solver()
        solver.set("timeout", int(self.seconds * 1000))
        solver.add(*self.formulas, *self.size_axioms, *typed)
        solver.add(z3.Not(goal))
        answer = solver.check()
        status = "proved" if answer == z3.unsat else "not derivable" if answer == z3.sat else "unknown"
        reason = solver.reason_unknown() if status == "unknown" else ""
        return Proof(rule.name, status, time.perf_counter() - start, reason)


def _has_size(value: Any) -> bool:
    if isinstance(value, (Dim, Arith)):
        return True
    return isinstance(value, tuple) and any(_has_size(v) for v in value)


def prove_rules(rules: Sequence[Rule], axioms_path: str | Path | None = None, seconds: float = 2.0) -> list[Proof]:
    """A :class:`Proof` for every rule (the axioms from ``axioms_path`` or the shipped file)."""
    prover = Prover(default_rules([axioms_path]) if axioms_path else None, seconds)
    return [prover.prove(r) for r in rules]
