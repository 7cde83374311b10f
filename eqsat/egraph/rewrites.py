"""Rule files compiled to egglog rules, with shape facts derived from the op table.

Each usable direction of a rule becomes one egglog ``rule``. Its query matches
the source pattern, fixes every variable's rank and fixed sizes (from the
rule's ``vars`` metadata, e.g. ``W:?x?x3x3``) and binds the free sizes. The op
table's shape rules, run on symbolic sizes (:mod:`eqsat.ir.symbolic`), give each
new right-side node its dims (set by the rule's actions) and the equalities
under which the right side type-checks (added to the query), so nothing
ill-typed enters the e-graph. Two-output rules become multi-pattern rules in
the ``multi`` ruleset, guarded so that the operands only one root reads are
weight-only.

Directions with the same query (the generated sets hold many rules that share a
source pattern: 20,900 directions, 5,389 distinct sources) become one egglog
rule with all their actions. egglog's load time and per-iteration work grow
with the number of rules, and the match count of the group is each member's.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from eqsat.diskcache import DiskMemo
from eqsat.egraph.language import Language, split_proj_attrs
from eqsat.ir.ops import get_op
from eqsat.ir.symbolic import Sym, Undecidable, recording
from eqsat.rules.pattern import App, Arith, Dim, Pattern, Var, tensor_vars
from eqsat.rules.rulefile import Rule, format_rule

SymShape = tuple[Any, ...]


class Unsupported(Exception):
    """A rule the e-graph compiler cannot express (no ``vars`` metadata, attribute variables, ...)."""


@dataclass(frozen=True)
class Direction:
    """One compiled rule direction: its query facts, actions and ruleset."""

    name: str
    facts: tuple[str, ...]
    actions: tuple[str, ...]
    ruleset: str


@dataclass
class Compiled:
    """Egglog text for a set of rules (declarations, then one ``rule`` per query), with what was
    left out and why. ``groups`` maps each egglog rule's name to the rule directions it runs;
    ``triggers`` (see :func:`trigger_query`) are per rule, in ``rules`` order."""

    declarations: str
    lang: Language = field(default_factory=Language)
    rules: list[str] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    multi_names: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join([self.declarations, *self.rules])

    def to_data(self) -> tuple:
        """Plain data for the disk cache (see :meth:`from_data`): the constructors' keys in the
        order they were declared, then the rules, triggers, groups, names and skip reasons."""
        return (tuple(self.lang.by_key), tuple(self.rules), tuple(self.triggers),
                tuple((name, tuple(ds)) for name, ds in self.groups.items()), tuple(self.names),
                tuple(self.multi_names), tuple(self.skipped.items()))

    @classmethod
    def from_data(cls, data: tuple) -> Compiled:
        """The :class:`Compiled` that :meth:`to_data` gave, its constructors declared anew in order
        (so its declarations are the same text)."""
        keys, rules, triggers, groups, names, multi_names, skipped = data
        out = cls("", rules=list(rules), triggers=list(triggers), groups={n: list(ds) for n, ds in groups},
                  names=list(names), multi_names=list(multi_names), skipped=dict(skipped))
        for key in keys:
            out.lang.ctor(*key)
        out.declarations = out.lang.take_pending()
        return out


def parse_vars(rule: Rule) -> dict[str, tuple[int | None, ...]]:
    """``A:?x?,W:?x?x3x3`` -> {A: (None, None), W: (None, None, 3, 3)}; the e-graph needs it."""
    dims = rule.var_dims
    if dims is None:
        raise Unsupported("no vars metadata (rank and fixed sizes of each variable)")
    return dims


class RuleBuilder:
    """Symbolic shapes and egglog text for one rule direction."""

    def __init__(self, lang: Language, var_dims: dict[str, tuple[int | None, ...]], prefix: str = "n"):
        self.lang = lang
        self.prefix = prefix
        self.var_dims = var_dims
        self.actions: list[str] = []
        self.constraints: list[tuple[Sym, Sym]] = []
        self.count = 0
        self.emitted: dict[str, tuple[str, SymShape]] = {}  # a term built before: its variable and shape

    def var_shape(self, name: str) -> SymShape:
        dims = self.var_dims.get(name)
        if dims is None:
            raise Unsupported(f"variable ?{name} has no vars entry")
        return tuple(Sym.atom(f"?{name}__{k}") if d is None else d for k, d in enumerate(dims))

    def shape(self, p: Pattern) -> SymShape:
        """Symbolic shape of a pattern (constraints are recorded when inside ``recording``)."""
        if isinstance(p, Var):
            return self.var_shape(p.name)
        if p.op == "proj" and isinstance(p.args[0], App) and p.args[0].op == "split":
            sp = p.args[0]
            attrs = self.attr_values(sp)
            shapes = get_op("split").shape(attrs, (self.shape(sp.args[0]),))
            return shapes[dict(p.attrs)["index"]]
        spec = get_op(p.op)
        if spec.takes_tuple or spec.is_leaf:
            raise Unsupported(f"{p.op} in a pattern")
        attrs = self.attr_values(p)
        return spec.shape(attrs, tuple(self.shape(a) for a in p.args))[0]

    def attr_values(self, p: App) -> dict[str, Any]:
        return {k: self.attr(e) for k, e in p.attrs}

    def attr(self, e: Any) -> Any:
        if isinstance(e, Var):
            raise Unsupported("attribute variables")
        if isinstance(e, Dim):
            with recording():  # the sized term is a source-side pattern: its typing already holds
                return self.shape(e.term)[e.axis]
        if isinstance(e, Arith):
            a, b = self.attr(e.left), self.attr(e.right)
            return a + b if e.op == "+" else a - b if e.op == "-" else a * b
        if isinstance(e, tuple):
            return tuple(self.attr(x) for x in e)
        return e

    # query side -------------------------------------------------------------
    def query(self, p: Pattern) -> str:
        if isinstance(p, Var):
            return f"?{p.name}"
        if p.op in ("proj", "split"):
            raise Unsupported("split/proj on a source side")
        attrs = tuple((k, v) for k, v in p.attrs)
        for _, v in attrs:
            if isinstance(v, (Var, Dim, Arith)):
                raise Unsupported("symbolic attributes on a source side")
        with recording():
            rank = len(self.shape(p))
        ctor = self.lang.ctor(p.op, get_op(p.op).canonical_attrs(dict(attrs)), len(p.args), rank=rank)
        return f"({ctor.name} {' '.join(self.query(a) for a in p.args)})"

    # action side ------------------------------------------------------------
    def build(self, p: Pattern) -> tuple[str, SymShape]:
        """Emit actions creating pattern ``p``; returns its egglog variable and symbolic shape."""
        if isinstance(p, Var):
            return f"?{p.name}", self.var_shape(p.name)
        if p.op == "proj":
            sp = p.args[0]
            if not (isinstance(sp, App) and sp.op == "split"):
                raise Unsupported("proj of something other than split")
            x, xs = self.build(sp.args[0])
            attrs = self.attr_values(sp)
            with recording() as found:
                shapes = get_op("split").shape(attrs, (xs,))
            self.constraints.extend(found)
            index = dict(p.attrs)["index"]
            ctor = self.lang.ctor("splitproj", split_proj_attrs(attrs["axis"], index), 1, len(attrs["sizes"]),
                                  len(shapes[index]))
            sizes = " ".join(Sym.lift(s).egg() for s in attrs["sizes"])
            return self.emit(f"({ctor.name} {x} {sizes})", shapes[index])
        spec = get_op(p.op)
        if spec.takes_tuple or spec.is_leaf or p.op == "split":
            raise Unsupported(f"{p.op} on a target side")
        kids = [self.build(a) for a in p.args]
        attrs = self.attr_values(p)
        if any(isinstance(v, Sym) for v in attrs.values()):
            raise Unsupported("symbolic attributes on a target node")
        with recording() as found:
            out = spec.shape(attrs, tuple(s for _, s in kids))
        self.constraints.extend(found)
        ctor = self.lang.ctor(p.op, spec.canonical_attrs(attrs), len(kids), rank=len(out[0]))
        return self.emit(f"({ctor.name} {' '.join(v for v, _ in kids)})", out[0])

    def emit(self, expr: str, shape: SymShape) -> tuple[str, SymShape]:
        """A ``let`` for ``expr`` and its shape facts, once: a term both sides of a pair rule build
        (the merged convolution of ``conv-*-pair``) is one e-node either way, and its repeated
        actions were a tenth of the rules' egglog loading on SqueezeNet."""
        if expr in self.emitted:
            return self.emitted[expr]
        name = f"?{self.prefix}{self.count}"
        self.count += 1
        self.actions.append(f"(let {name} {expr})")
        self.actions.append(f"(set (rank {name}) {len(shape)})")
        for k, d in enumerate(shape):
            self.actions.append(f"(set (dim {name} {k}) {Sym.lift(d).egg()})")
        self.emitted[expr] = (name, shape)
        return name, shape


def compile_direction(lang: Language, name: str, src: Sequence[Pattern], dst: Sequence[Pattern],
                      var_dims: dict[str, tuple[int | None, ...]], prefix: str = "n") -> Direction:
    """One rewrite direction (raises Unsupported or Undecidable); its new nodes are ``?{prefix}k``."""
    b = RuleBuilder(lang, var_dims, prefix)
    roots = [f"?root{i}" for i in range(len(src))]
    facts = [f"(= {r} {b.query(p)})" for r, p in zip(roots, src)]
    used = set().union(*(tensor_vars(p) for p in src))
    ranked = set().union(*(_same_rank_children(p) for p in src))
    with recording() as typed:  # what every match guarantees: the matched nodes are well typed
        src_shapes = [b.shape(p) for p in src]
    implied = _merge_equal_sizes(_egg_pairs(typed))
    for v in sorted(used):
        dims = b.var_dims.get(v)
        if dims is None:
            raise Unsupported(f"variable ?{v} has no vars entry")
        if v not in ranked:  # otherwise its parent's constructor already fixes its rank
            facts.append(f"(= (rank ?{v}) {len(dims)})")
        for k, d in enumerate(dims):
            if d is None and f"?{v}__{k}" in implied:  # a size the source's typing equates with another:
                continue  # no check of it (a dim atom), and it is read through the one it equals
            facts.append(f"(= (dim ?{v} {k}) {'?' + v + '__' + str(k) if d is None else d})")
    outs = [b.build(p) for p in dst]
    for (_var, shape), want in zip(outs, src_shapes):
        if len(shape) != len(want):
            raise Unsupported("sides of different ranks")
        for x, y in zip(shape, want):
            if Sym.lift(x).egg() != Sym.lift(y).egg():
                b.constraints.append((Sym.lift(x), Sym.lift(y)))
    constraints = [(x, y) for x, y in (_substitute(pair, implied) for pair in _egg_pairs(b.constraints)) if x != y]
    rename = _merge_equal_sizes(constraints)
    for x, y in constraints:
        facts.append(f"(= {x} {y})")
    facts = _substitute(facts, rename)
    b.actions = _substitute(_substitute(b.actions, implied), rename)
    needed = {m for a in b.actions for m in _SIZE.findall(a)}
    facts = [f for i, f in enumerate(facts) if f not in facts[:i] and not _trivial(f)
             and not (_defines_size(f) and _SIZE.search(f).group(0) not in needed)]
    facts = [f if _defines_size(f) else _as_comparison(_as_lookups([f])[0]) for f in facts]
    ruleset = "rw"
    if len(src) > 1:
        ruleset = "multi"
        facts.append(f"(!= {roots[0]} {roots[1]})")
        own = [tensor_vars(p) for p in src]
        for i, vars_i in enumerate(own):
            for v in sorted(vars_i - set().union(*(o for j, o in enumerate(own) if j != i))):
                facts.append(f"(const ?{v})")  # only weight-only operands merge: no feeding on own output
    actions = b.actions + [f"(union {r} {v})" for r, (v, _) in zip(roots, outs)]
    return Direction(name, tuple(facts), tuple(actions), ruleset)


def _same_rank_children(p: Pattern) -> set[str]:
    """Variables read directly by a ``same_rank`` op: the matched constructor fixes their rank."""
    if isinstance(p, Var):
        return set()
    spec = get_op(p.op)
    required = p.args[:spec.arity] if spec.arity is not None else p.args
    own = {a.name for a in required if isinstance(a, Var)} if spec.same_rank else set()
    return own.union(*(_same_rank_children(a) for a in p.args))


_SIZE = re.compile(r"\?[A-Za-z][A-Za-z0-9_]*__\d+")


def _egg_pairs(constraints: Sequence[tuple[Any, Any]]) -> list[tuple[str, str]]:
    """Equalities between sizes as egglog expressions."""
    return [(Sym.lift(x).egg(), Sym.lift(y).egg()) for x, y in constraints]


def _merge_equal_sizes(constraints: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Sizes a constraint equates directly (``?B__0 = ?A__0``, ``?K__1 = 3``) become one name
    (or the constant): a query then checks ``(dim ?B 0)`` against ``?A__0`` instead of joining two
    size variables, which egglog's planner may do as a cross product of the ``dim`` table.

    Applied first to the equalities the source pattern's own typing assumes (a match's nodes are
    well typed, so they hold): a size they equate with another needs no ``dim`` atom at all.
    egglog matches a rule again for every atom with new rows, and each node a rule makes sets its
    ``dim`` rows: on a synthetic e-graph, the pass after the first took 0.5-1.1 ms with no ``dim``
    atoms, 6-8 ms with four and 11-18 ms with seven."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in constraints:
        simple = [t for t in (a, b) if _SIZE.fullmatch(t) or t.lstrip("-").isdigit()]
        if len(simple) != 2:
            continue
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        if ra.lstrip("-").isdigit() and rb.lstrip("-").isdigit():
            continue  # two different constants: leave the (false) fact in the query
        keep, drop = sorted((ra, rb), key=lambda t: (not t.lstrip("-").isdigit(), t))
        parent[drop] = keep
    return {x: find(x) for x in parent}


def _substitute(texts: Sequence[str], rename: dict[str, str]) -> list[str]:
    if not rename:
        return list(texts)
    return [_SIZE.sub(lambda m: rename.get(m.group(0), m.group(0)), t) for t in texts]


_DEFINES = re.compile(r"\(= \(dim \?([A-Za-z][A-Za-z0-9_]*) (\d+)\) \?\1__\2\)")


def _defines_size(fact: str) -> bool:
    """``(= (dim ?A 0) ?A__0)``: only names a size, which :func:`_as_lookups` reads in place."""
    return _DEFINES.fullmatch(fact) is not None


def _as_lookups(texts: Sequence[str]) -> list[str]:
    """Every size name ``?A__0`` read as the lookup ``(dim ?A 0)``. Queries bind a size variable
    only when an action needs it (egglog 13 allows no lookups in actions); a condition between
    sizes is checked by lookups instead of joining the ``dim`` table with itself."""
    return [_SIZE.sub(lambda m: "(dim {} {})".format(*m.group(0).rsplit("__", 1)), t) for t in texts]


def _as_comparison(fact: str) -> str:
    """A condition between two size expressions, ``(= (dim ?B 0) (dim ?A 0))``, as
    ``(= 0 (- X Y))``. Written as an equality, both lookups return one shared variable, and
    egglog's planner may join the ``dim`` table with itself on it (every pair of tensors with
    equal sizes) before the pattern binds ``?A`` and ``?B``; the difference is a primitive
    computed once both are bound, which makes an iteration on a large e-graph several times
    faster. Facts that match a pattern, fix a rank, bind a variable or compare with a
    constant keep their form."""
    if not fact.startswith("(= (") or fact.startswith("(= (rank "):
        return fact
    terms = _top_level_terms(fact[3:-1])
    if len(terms) != 2 or not all(t.startswith("(") for t in terms):
        return fact
    return f"(= 0 (- {terms[0]} {terms[1]}))"


def _top_level_terms(text: str) -> list[str]:
    """``"(dim ?A 0) (+ (dim ?B 1) 2)"`` -> its two s-expressions (atoms count as terms)."""
    terms: list[str] = []
    depth, current = 0, []
    for ch in text:
        if ch == " " and depth == 0:
            if current:
                terms.append("".join(current))
                current = []
            continue
        depth += (ch == "(") - (ch == ")")
        current.append(ch)
    if current:
        terms.append("".join(current))
    return terms


def _trivial(fact: str) -> bool:
    """``(= X X)`` for one size name or constant."""
    parts = fact[1:-1].split(" ")
    return len(parts) == 3 and parts[0] == "=" and parts[1] == parts[2] and "(" not in fact[1:]


def trigger_query(facts: Sequence[str]) -> str:
    """The part of a rule's query that only matches its source patterns: the ops and how they
    nest (``(= ?root0 (ewadd (reshape ?X) ?Y))``), the two roots of a merge being two e-classes
    and marked ``chosen``; no sizes, no weight-only checks. Every match of the rule is a match of
    this query, so a rule whose trigger matches nothing would match nothing either; a trigger is a
    join of one to three atoms, and egglog loads one in about a tenth of the rule's time (see
    :meth:`~eqsat.egraph.runner.EGraphRunner._wake`). Its variables are renamed in order of
    appearance (``?v0``, ``?v1``, ...), so rules whose patterns differ only in their names share
    one trigger (VGG-19: 237 distinct triggers, 168 after renaming)."""
    query = " ".join(f for f in facts if f.startswith(("(= ?root", "(!= ?root", "(chosen ?root")))
    names: dict[str, str] = {}
    return _VARIABLE.sub(lambda m: names.setdefault(m.group(0), f"?v{len(names)}"), query)


_VARIABLE = re.compile(r"\?[^\s()]+")


@cache
def trigger_tables(query: str) -> frozenset[str]:
    """The egglog tables (constructors, ``chosen``) the atoms of a trigger ``query`` read: it can
    match only once every one of them has a row (memoized: every wake asks it of each dormant one)."""
    return frozenset(_HEAD.findall(query)) - {"=", "!="}


_HEAD = re.compile(r"\((\S+)")


def egglog_rule(name: str, directions: Sequence[Direction]) -> str:
    """One egglog rule running the actions of ``directions`` (which share one query); each
    direction's new nodes get their own names."""
    first = directions[0]
    actions = " ".join(a.replace("?@", f"?n{i}_") for i, d in enumerate(directions) for a in d.actions)
    return f"(rule ({' '.join(first.facts)})\n      ({actions})\n      :ruleset {first.ruleset} :name \"{name}\")"


@dataclass(frozen=True)
class CompiledRule:
    """A rule's usable directions, why the others were skipped, and the constructors they use."""

    directions: tuple[Direction, ...]
    skipped: tuple[str, ...]
    ctors: tuple[tuple, ...]


@cache
def compile_rule(rule: Rule, rewrite_constants: bool = False) -> CompiledRule:
    """Compile every direction of ``rule`` (memoized: the shipped sets are compiled once per process).

    Directions that only rewrite weight-only subgraphs are skipped unless ``rewrite_constants``:
    those subgraphs are folded at compile time and cost nothing in any form (the α search skips
    them too), and they are half of the conv world's directions."""
    return COMPILED.get_or_compute(("compile", format_rule(rule), rewrite_constants),
                                   lambda: _compile_rule(rule, rewrite_constants))


def ground_shard(key: tuple[str, str, bool]) -> str:
    """The cache file of a rule's entry: a rule grounded on a graph's attributes or shapes (its name
    ``base@binding``, :func:`eqsat.egraph.relevance.ground_rules`) goes to its binding's own file, so
    a model reads the rules grounded on its own attributes, not every model's; a graph's compiled
    relevant rules (:func:`eqsat.egraph.relevance.relevant_compiled`) go to a file of their own."""
    if key[0] == "relevant":
        return "graph-" + key[1][:12]
    name = key[1].split(" ", 1)[0]
    if "@" not in name:
        return ""
    return hashlib.sha256(name.split("@", 1)[1].encode()).hexdigest()[:12]


# compile_rule and rule_signatures results, by rule text; relevant_compiled's, by graph and rules
COMPILED = DiskMemo("compiled-rules", types=(CompiledRule, Direction, App, Var, Dim, Arith), shard=ground_shard)


def _compile_rule(rule: Rule, rewrite_constants: bool) -> CompiledRule:
    lang = Language()
    try:
        var_dims = parse_vars(rule)
    except Unsupported as exc:
        return CompiledRule((), (str(exc),), ())
    directions: list[Direction] = []
    skipped: list[str] = []
    for label, src, dst in rule.directions():
        name = rule.name + ("" if label == "forward" else "~")
        if not rewrite_constants and rule.constant_only(src):
            skipped.append("constant-only source (weights only)")
            continue
        try:
            directions.append(compile_direction(lang, name, src, dst, var_dims, prefix="@"))
        except (Unsupported, Undecidable) as exc:
            skipped.append(type(exc).__name__ + ": " + str(exc).split("?")[0].strip())
    return CompiledRule(tuple(directions), tuple(skipped), tuple(lang.by_key))


def compile_rules(rules: Sequence[Rule], multi: bool = True, rewrite_constants: bool = False) -> Compiled:
    """Every usable direction of ``rules`` as egglog rules; ``multi=False`` leaves out multi-pattern
    rules (see :func:`compile_rule` for ``rewrite_constants``). The result's ``lang`` holds the
    constructors the declarations create."""
    by_query: dict[tuple[str, tuple[str, ...]], list[Direction]] = {}
    out = Compiled("")
    lang = out.lang
    for rule in rules:
        if rule.is_multi and not multi:
            continue
        compiled = compile_rule(rule, rewrite_constants)
        for key in compiled.ctors:
            lang.ctor(*key)
        for reason in compiled.skipped:
            out.skipped[reason] = out.skipped.get(reason, 0) + 1
        for d in compiled.directions:
            by_query.setdefault((d.ruleset, d.facts), []).append(d)
            (out.multi_names if d.ruleset == "multi" else out.names).append(d.name)
            if d.ruleset == "multi":  # merges by need: the same rule, on two ops of the best graph
                best = Direction(d.name, d.facts + ("(chosen ?root0)", "(chosen ?root1)"), d.actions, "best")
                by_query.setdefault((best.ruleset, best.facts), []).append(best)
    for (ruleset, facts), group in by_query.items():
        name = group[0].name + ("@best" if ruleset == "best" else "")
        out.groups[name] = [d.name for d in group]
        out.rules.append(egglog_rule(name, group))
        out.triggers.append(trigger_query(facts))
    out.declarations = lang.take_pending()
    return out
