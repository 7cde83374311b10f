"""Which rules can ever match in an e-graph grown from a given graph.

A rule whose source needs a node that can never exist never matches: a rank-2
matrix rule in a convolutional network, a 1x1-kernel rule where every kernel
is 3x3. egglog's load time and per-iteration work grow with the number of
rules, so :func:`relevant_rules` leaves such rules out. A node's signature is
its op and arity, attributes, and output shape with the sizes a rule leaves free shown as
``None``; split/proj pairs all count as one ``("view",)`` signature.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from typing import Any

from eqsat.egraph.infer import with_inferred_ranks
from eqsat.egraph.language import Language
from eqsat.egraph.rewrites import COMPILED, Compiled, RuleBuilder, Unsupported, compile_rule, compile_rules, parse_vars
from eqsat.errors import ShapeError
from eqsat.ir.graph import Graph
from eqsat.ir.symbolic import Sym, Undecidable, recording
from eqsat.rules.pattern import App, Pattern, Var, attr_bindings, attr_vars, bind_attrs, walk
from eqsat.rules.rulefile import Rule, format_rule

Mask = tuple[int | None, ...] | None
Signature = tuple
VIEW: Signature = ("view",)


def pattern_signatures(p: Pattern, shapes: RuleBuilder | None) -> frozenset[Signature]:
    """The signature of every node of ``p`` (``shapes`` gives symbolic output shapes, if known)."""
    if isinstance(p, Var):
        return frozenset()
    if p.op in ("split", "proj"):
        own: Signature = VIEW
    else:
        own = ((p.op, len(p.args)), p.attrs, _mask(p, shapes))
    return frozenset({own}).union(*(pattern_signatures(a, shapes) for a in p.args))


def _mask(p: Pattern, shapes: RuleBuilder | None) -> Mask:
    if shapes is None:
        return None
    try:
        with recording():
            shape = shapes.shape(p)
    except (Unsupported, Undecidable, KeyError, ValueError, TypeError, IndexError):
        return None
    return tuple(d if isinstance(d, int) else int(d) if isinstance(d, Sym) and d.is_const else None for d in shape)


@cache
def rule_signatures(rule: Rule, rewrite_constants: bool = False
                    ) -> tuple[tuple[tuple[frozenset[Signature], ...], tuple[frozenset[Signature], ...]], ...]:
    """Per direction of ``rule`` (constant-only ones left out unless ``rewrite_constants``): the
    signatures each source and each target pattern holds (memoized on disk with the compiled rules)."""
    return COMPILED.get_or_compute(("signatures", rule_text(rule), rewrite_constants),
                                   lambda: _rule_signatures(rule, rewrite_constants))


def _rule_signatures(rule: Rule, rewrite_constants: bool
                     ) -> tuple[tuple[tuple[frozenset[Signature], ...], tuple[frozenset[Signature], ...]], ...]:
    try:
        shapes: RuleBuilder | None = RuleBuilder(Language(), parse_vars(rule))
    except Unsupported:
        shapes = None
    return tuple((tuple(pattern_signatures(p, shapes) for p in src), tuple(pattern_signatures(p, shapes) for p in dst))
                 for _, src, dst in rule.directions() if rewrite_constants or not rule.constant_only(src))


def _compatible(a: Mask, b: Mask) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


class Available:
    """The signatures present (or creatable) in an e-graph, indexed by (op, attributes)."""

    def __init__(self) -> None:
        self.masks: dict[tuple, set[Mask]] = {}

    def add(self, sig: Signature) -> bool:
        """Record ``sig``; True if it was new."""
        key, mask = (sig, None) if sig == VIEW else (sig[:2], sig[2])
        masks = self.masks.setdefault(key, set())
        if mask in masks:
            return False
        masks.add(mask)
        return True

    def has(self, sig: Signature) -> bool:
        if sig == VIEW:
            return VIEW in self.masks
        return any(_compatible(sig[2], m) for m in self.masks.get(sig[:2], ()))


def _attr_var_apps(side: Sequence[Pattern]) -> list[App]:
    """The nodes of ``side`` whose own attributes hold variables."""
    return [q for p in side for q in walk(p) if isinstance(q, App) and attr_vars(App(q.op, q.attrs, ()))[0]]


def ground_rules(rules: Sequence[Rule], graph: Graph) -> list[Rule]:
    """Rules with attribute variables (``(conv2d :stride ?s ...)``: any convolution) become one
    ground rule per attribute combination the graph's nodes have; egglog constructors carry
    their attributes, so a rule must name them. A side binds its variables from the attributes
    of its ops in the graph; either side of a two-way rule may supply them. Where the ground
    rule's shapes are still undecidable symbolically (a strided conv's output size is a floor
    division of an unknown size), it is also specialized to the input shapes the graph has."""
    present: dict[str, dict[tuple, set[tuple]]] = {}
    for n in graph.nodes():
        if not n.is_leaf:
            present.setdefault(n.op, {}).setdefault(n.attrs, set()).add(tuple(x.shapes[0] for x in n.inputs))
    out: list[Rule] = []
    for rule in rules:
        if not any(attr_vars(p)[0] for p in rule.lhs + rule.rhs):
            out.append(rule)
            continue
        found: dict[tuple, set[tuple]] = {}  # attribute binding -> shape bindings seen with it
        for side in (rule.lhs, rule.rhs) if rule.bidirectional else (rule.lhs,):
            partial: list[tuple[dict[str, Any], dict[str, tuple]]] = [({}, {})]
            for app in _attr_var_apps(side):
                partial = [(merged, shapes | _arg_shapes(app, ins))
                           for b, shapes in partial for attrs, seen in sorted(present.get(app.op, {}).items(), key=repr)
                           if (c := attr_bindings(app, attrs)) is not None and (merged := _merge(b, c)) is not None
                           for ins in sorted(seen)]
            for b, shapes in partial:
                if b:
                    found.setdefault(tuple(sorted(b.items())), set()).add(tuple(sorted(shapes.items())))
        for key, shape_sets in found.items():
            b = dict(key)
            label = ",".join(f"{k}={_short(v)}" for k, v in key)
            ground = Rule(f"{rule.name}@{label}", tuple(bind_attrs(p, b) for p in rule.lhs),
                          tuple(bind_attrs(p, b) for p in rule.rhs), rule.bidirectional, rule.meta)
            try:
                skipped = compile_rule(ground).skipped
            except ShapeError:
                continue  # attributes that cannot go together (a reshape of 16 columns into 1024): never matches
            if not any(r.startswith("Undecidable") for r in skipped):
                out.append(ground)
                continue
            for shapes in sorted(shape_sets):
                sized = _with_shapes(ground, dict(shapes))
                if sized is not None:
                    out.append(sized)
    return out


def _arg_shapes(app: App, ins: tuple) -> dict[str, tuple]:
    """The shapes a node's inputs give the variables that are direct arguments of ``app``."""
    return {a.name: ins[k] for k, a in enumerate(app.args) if isinstance(a, Var) and k < len(ins)}


def _with_shapes(rule: Rule, shapes: dict[str, tuple]) -> Rule | None:
    """``rule`` with the sizes of some variables fixed in its ``vars`` metadata (None when a
    shape contradicts a fixed size or rank there)."""
    dims = rule.var_dims
    if dims is None:
        return None
    for name, shape in shapes.items():
        old = dims.get(name)
        if old is None or len(old) != len(shape) or any(d is not None and d != s for d, s in zip(old, shape)):
            return None
        dims[name] = tuple(shape)
    label = ";".join(f"{k}={'x'.join(map(str, v))}" for k, v in sorted(shapes.items()))
    return rule.with_var_dims(dims, f"{rule.name}@{label}")


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    if any(k in a and a[k] != v for k, v in b.items()):
        return None
    return a | b


def _short(v: Any) -> str:
    return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


_TEXTS: dict[int, tuple[Rule, str]] = {}  # id(rule) -> the rule (alive, so its id is not reused) and its text
_TEXTS_MOST = 200_000


def rule_text(rule: Rule) -> str:
    """``format_rule(rule)``, once per rule object: every search of a process passes the same
    parsed rules, and formatting 334 of them was 3-8 ms of each run's key (VGG-19's whole search: 60 ms)."""
    hit = _TEXTS.get(id(rule))
    if hit is None or hit[0] is not rule:
        if len(_TEXTS) >= _TEXTS_MOST:
            _TEXTS.clear()
        hit = _TEXTS[id(rule)] = (rule, format_rule(rule))
    return hit[1]


def graph_signature(graph: Graph) -> list[str]:
    """What of ``graph`` decides which rules are relevant: each distinct operator node's op,
    attributes and input and output shapes, sorted (names and weights do not count)."""
    return sorted({repr((n.op, n.attrs, len(n.inputs), tuple(n.shapes), tuple(x.shapes[0] for x in n.inputs)))
                   for n in graph.nodes() if not n.is_leaf})


def relevant_compiled(rules: Sequence[Rule], graph: Graph, multi: bool = True, rewrite_constants: bool = False
                      ) -> Compiled:
    """``compile_rules(relevant_rules(rules, graph, rewrite_constants), multi, rewrite_constants)``,
    memoized on disk by what the two read: the rules' texts and each operator node's op,
    attributes and input and output shapes. A fresh process's first model then reads one small
    cache file instead of every rule's signatures and compiled directions (VGG-19: 33 ms -> 6 ms)."""
    text = "\n".join([repr((multi, rewrite_constants)), *map(rule_text, rules), "", *graph_signature(graph)])
    key = ("relevant", hashlib.sha256(text.encode()).hexdigest())
    found = COMPILED.get(key)
    if found is not None:
        return Compiled.from_data(found)
    compiled = compile_rules(relevant_rules(rules, graph, rewrite_constants), multi=multi,
                             rewrite_constants=rewrite_constants)
    COMPILED.put(key, compiled.to_data())
    return compiled


def relevant_rules(rules: Sequence[Rule], graph: Graph, rewrite_constants: bool = False) -> list[Rule]:
    """The rules whose source signatures can all exist: start from the graph's nodes, add what
    usable target sides create, repeat until nothing changes. Order is kept. Rules with attribute
    variables are first grounded on the graph's attributes (:func:`ground_rules`); rules without
    ``vars=`` metadata get their ranks inferred (:mod:`eqsat.egraph.infer`)."""
    rules = with_inferred_ranks(ground_rules(rules, graph))
    have = Available()
    have.add(VIEW)
    for n in graph.nodes():
        if not n.is_leaf:
            have.add(VIEW if len(n.shapes) != 1 else ((n.op, len(n.inputs)), n.attrs, tuple(n.shape)))
    sigs = [rule_signatures(r, rewrite_constants) for r in rules]
    chosen: list[int] = []
    left = list(range(len(rules)))
    changed = True
    while changed:
        changed = False
        rest: list[int] = []
        for i in left:
            usable = [dst for src, dst in sigs[i] if all(have.has(s) for side in src for s in side)]
            if not usable:
                rest.append(i)
                continue
            chosen.append(i)
            for side in (side for dst in usable for side in dst):
                for s in side:
                    changed |= have.add(s)
        left = rest
    return [rules[i] for i in sorted(chosen)]
