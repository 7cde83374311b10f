"""The rule-file format (docs/reference.md): one rewrite rule per line, as s-expressions.

::

    # comment lines start with '#'
    matmul-assoc: (matmul ?a (matmul ?b ?c)) <=> (matmul (matmul ?a ?b) ?c) ; origin=generated verified=float,modp
    relu-fuse: (relu (conv2d :stride ?s :pad ?p ?x ?w)) => (conv2d :stride ?s :pad ?p :act relu ?x ?w)
    merge: (matmul ?x ?a) (matmul ?x ?b) => (proj :index 0 (split :axis 1 :sizes [(dim ?a 1) (dim ?b 1)] (matmul ?x (concat :axis 1 ?a ?b)))) (proj :index 1 (split :axis 1 :sizes [(dim ?a 1) (dim ?b 1)] (matmul ?x (concat :axis 1 ?a ?b))))

A line is ``[name:] LHS (<=>|=>) RHS [; key=value ...]``. ``<=>`` is sound in both
directions, ``=>`` only left to right. A side with several patterns is a
multi-output rule (its roots pair up in order). Attributes are ``:key value``
and default to the op table's defaults; ``[a b]`` is a tuple. The metadata
records provenance: ``origin`` (``generated`` or ``hand-written``, the default)
and ``verified`` (the verification layers the rule passed). A lone word after
``;`` names an unnamed rule. Errors carry ``file:line:col``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eqsat.errors import EqsatError, RuleParseError
from eqsat.files import write_atomic
from eqsat.ir.ops import OP_TABLE, get_op
from eqsat.rules.pattern import (
    App,
    Arith,
    AttrExpr,
    Dim,
    Pattern,
    Var,
    attr_vars,
    canonical_pattern_attrs,
    pattern_default,
    tensor_vars,
)
from eqsat.rules.sexpr import Atom, Datum, read_all

ARROWS = ("<=>", "=>")


@dataclass(frozen=True)
class Rule:
    """A named rewrite rule with its provenance metadata."""

    name: str
    lhs: tuple[Pattern, ...]
    rhs: tuple[Pattern, ...]
    bidirectional: bool = True
    meta: tuple[tuple[str, str], ...] = ()

    @property
    def is_multi(self) -> bool:
        return len(self.lhs) > 1

    @property
    def origin(self) -> str:
        return dict(self.meta).get("origin", "hand-written")

    @property
    def verified(self) -> tuple[str, ...]:
        text = dict(self.meta).get("verified", "")
        return tuple(v for v in text.split(",") if v)

    @property
    def weight_vars(self) -> frozenset[str]:
        """Variables that stand for weights (the generator's ``weights=`` metadata)."""
        return frozenset(v for v in dict(self.meta).get("weights", "").split(",") if v)

    @property
    def var_dims(self) -> dict[str, tuple[int | None, ...]] | None:
        """The ``vars`` metadata (``A:?x?,W:?x?x3x3``) as {A: (None, None), W: (None, None, 3, 3)},
        or None without it."""
        text = dict(self.meta).get("vars")
        if not text:
            return None
        return {  # "a:" is a rank-0 variable (a scalar): no dims
            name: tuple(None if d == "?" else int(d) for d in dims.split("x")) if dims else ()
            for name, dims in (part.split(":") for part in text.split(","))
        }

    def with_var_dims(self, dims: dict[str, tuple[int | None, ...]], name: str | None = None) -> Rule:
        """The rule with its ``vars`` metadata replaced by ``dims`` (and renamed, if given)."""
        meta = dict(self.meta)
        meta["vars"] = ",".join(f"{k}:{'x'.join('?' if d is None else str(d) for d in v)}" for k, v in dims.items())
        return Rule(name or self.name, self.lhs, self.rhs, self.bidirectional, tuple(meta.items()))

    def constant_only(self, source: Sequence[Pattern]) -> bool:
        """True when every variable ``source`` reads is a weight: the direction only rewrites
        weight-only subgraphs, which are folded at compile time (TASO skips such rewrites too)."""
        weights = self.weight_vars
        return bool(weights) and set().union(*(tensor_vars(p) for p in source)) <= weights

    def directions(self) -> Iterator[tuple[str, tuple[Pattern, ...], tuple[Pattern, ...]]]:
        """(label, source, target) for every usable rewrite direction.

        A direction is usable when no source root is a bare variable (it would
        match every tensor) and the target reads only variables the source binds.
        """
        sides = [("forward", self.lhs, self.rhs)]
        if self.bidirectional:
            sides.append(("backward", self.rhs, self.lhs))
        for label, src, dst in sides:
            if any(isinstance(p, Var) for p in src):
                continue
            if _needed_vars(dst) <= _bound_vars(src):
                yield label, src, dst

    def with_meta(self, **updates: str) -> Rule:
        meta = dict(self.meta)
        meta.update(updates)
        return Rule(self.name, self.lhs, self.rhs, self.bidirectional, tuple(meta.items()))

    def __str__(self) -> str:
        return format_rule(self)


def _bound_vars(side: Iterable[Pattern]) -> set[str]:
    out: set[str] = set()
    for p in side:
        out |= tensor_vars(p) | attr_vars(p)[0]
    return out


def _needed_vars(side: Iterable[Pattern]) -> set[str]:
    out: set[str] = set()
    for p in side:
        attr, tensor = attr_vars(p)
        out |= tensor_vars(p) | attr | tensor
    return out


# --------------------------------------------------------------------------- printing
def format_attr(e: AttrExpr) -> str:
    if isinstance(e, Var):
        return str(e)
    if isinstance(e, Dim):
        return f"(dim {format_pattern(e.term)} {e.axis})"
    if isinstance(e, Arith):
        return f"({e.op} {format_attr(e.left)} {format_attr(e.right)})"
    if isinstance(e, tuple):
        return "[" + " ".join(format_attr(x) for x in e) + "]"
    if e is None:
        return "none"
    return str(e)


def format_pattern(p: Pattern) -> str:
    """Canonical text of a pattern: attributes equal to their defaults are left out."""
    if isinstance(p, Var):
        return str(p)
    parts = [p.op]
    for key, e in p.attrs:
        if e != pattern_default(p.op, key):
            parts.append(f":{key} {format_attr(e)}")
    parts.extend(format_pattern(a) for a in p.args)
    return "(" + " ".join(parts) + ")"


def format_rule(rule: Rule) -> str:
    arrow = "<=>" if rule.bidirectional else "=>"
    text = (
        f"{rule.name}: "
        + " ".join(map(format_pattern, rule.lhs))
        + f" {arrow} "
        + " ".join(map(format_pattern, rule.rhs))
    )
    if rule.meta:
        text += " ; " + " ".join(f"{k}={v}" for k, v in rule.meta)
    return text


def format_rules(rules: Iterable[Rule], header: Iterable[str] = ()) -> str:
    """A whole rule file: ``#`` header lines, then one rule per line."""
    lines = [f"# {h}" if h else "#" for h in header]
    lines.extend(format_rule(r) for r in rules)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- parsing
class _Parser:
    def __init__(self, filename: str, line: int):
        self.filename = filename
        self.line = line

    def error(self, message: str, col: int) -> RuleParseError:
        return RuleParseError(message, self.filename, self.line, col)

    def pattern(self, d: Datum) -> Pattern:
        if isinstance(d, Atom):
            if d.is_var:
                return self.var(d)
            raise self.error(f"expected a pattern variable ?x or (op ...), got {d.text!r}", d.col)
        if d.bracket != "(" or not d.items:
            raise self.error("expected (op ...) here", d.col)
        head = d.items[0]
        if not isinstance(head, Atom) or head.is_var or head.is_keyword or head.is_int:
            raise self.error("a pattern starts with an op name", head.col if isinstance(head, Atom) else d.col)
        if head.text not in OP_TABLE:
            raise self.error(f"unknown op {head.text!r} (known: {', '.join(sorted(OP_TABLE))})", head.col)
        spec = get_op(head.text)
        attrs: dict[str, AttrExpr] = {}
        args: list[Pattern] = []
        items = list(d.items[1:])
        i = 0
        while i < len(items):
            item = items[i]
            if isinstance(item, Atom) and item.is_keyword:
                key = item.text[1:]
                if key not in spec.attr_names:
                    known = ", ".join(spec.attr_names) or "none"
                    raise self.error(f"{spec.name} has no attribute {key!r} (known: {known})", item.col)
                if key in attrs:
                    raise self.error(f"attribute {key!r} given twice", item.col)
                if args:
                    raise self.error("attributes must come before the arguments", item.col)
                if i + 1 >= len(items):
                    raise self.error(f"attribute :{key} has no value", item.col)
                attrs[key] = self.attr(items[i + 1])
                i += 2
                continue
            args.append(self.pattern(item))
            i += 1
        if spec.arity is not None and not spec.arity <= len(args) <= spec.arity + spec.optional_inputs:
            takes = f"{spec.arity}" + (f" to {spec.arity + spec.optional_inputs}" if spec.optional_inputs else "")
            raise self.error(f"{spec.name} takes {takes} argument(s), got {len(args)}", head.col)
        if spec.arity is None and len(args) < spec.min_arity:
            raise self.error(f"{spec.name} takes at least {spec.min_arity} arguments, got {len(args)}", head.col)
        try:
            canon = canonical_pattern_attrs(spec.name, attrs)
        except EqsatError as exc:
            raise self.error(str(exc), head.col) from None
        return App(spec.name, canon, tuple(args))

    def var(self, a: Atom) -> Var:
        name = a.text[1:]
        if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c in "_-'" for c in name):
            raise self.error(f"bad variable name {a.text!r}", a.col)
        return Var(name)

    def attr(self, d: Datum) -> AttrExpr:
        if isinstance(d, Atom):
            if d.is_var:
                return self.var(d)
            if d.is_int:
                return int(d.text)
            if d.is_keyword:
                raise self.error(f"expected an attribute value, got keyword {d.text!r}", d.col)
            return d.text
        if d.bracket == "[":
            return tuple(self.attr(x) for x in d.items)
        items = d.items
        if not items or not isinstance(items[0], Atom):
            raise self.error("expected (dim PATTERN k) or (+|-|* a b) as an attribute expression", d.col)
        head = items[0].text
        if head == "dim":
            if len(items) != 3 or not isinstance(items[2], Atom) or not items[2].is_int:
                raise self.error("dim takes a tensor pattern and an axis: (dim ?x 1)", d.col)
            return Dim(self.pattern(items[1]), int(items[2].text))
        if head in ("+", "-", "*"):
            if len(items) != 3:
                raise self.error(f"({head} a b) takes two operands", d.col)
            return Arith(head, self.attr(items[1]), self.attr(items[2]))
        raise self.error(f"unknown attribute expression {head!r} (use dim, +, -, *)", items[0].col)


def _valid_name(name: str) -> bool:
    return bool(name) and (name[0].isalnum() or name[0] == "_") and all(c.isalnum() or c in "_-.+'" for c in name)


def parse_rule(text: str, filename: str = "<string>", line: int = 1) -> Rule:
    """Parse one rule line."""
    p = _Parser(filename, line)
    body, _, meta_text = text.partition(";")
    offset = 0
    name = ""
    stripped = body.lstrip()
    head = stripped.split(None, 1)[0] if stripped else ""
    if head.endswith(":") and not head.startswith((":", "?", "(", "[")):
        name = head[:-1]
        start = body.index(head)
        if not _valid_name(name):
            raise p.error(f"bad rule name {name!r}", start + 1)
        offset = start + len(head)
    data = read_all(body[offset:], filename, line, offset)
    arrows = [i for i, d in enumerate(data) if isinstance(d, Atom) and d.text in ARROWS]
    if len(arrows) != 1:
        col = data[arrows[1]].col if len(arrows) > 1 else len(body.rstrip()) + 1
        raise p.error("a rule needs exactly one '<=>' or '=>' between its sides", col)
    k = arrows[0]
    arrow = data[k]
    assert isinstance(arrow, Atom)
    if k == 0 or k == len(data) - 1:
        raise p.error(f"'{arrow.text}' needs a pattern on each side", arrow.col)
    lhs = tuple(p.pattern(d) for d in data[:k])
    rhs = tuple(p.pattern(d) for d in data[k + 1 :])
    if len(lhs) != len(rhs):
        raise p.error(f"the left side has {len(lhs)} root(s), the right side {len(rhs)}", arrow.col)
    meta: list[tuple[str, str]] = []
    meta_col = len(body) + 2
    for word in meta_text.split():
        if "=" in word:
            key, value = word.split("=", 1)
            if not key or not value:
                raise p.error(f"metadata must be key=value, got {word!r}", meta_col + meta_text.index(word))
            meta.append((key, value))
        elif not name:
            if not _valid_name(word):
                raise p.error(f"bad rule name {word!r}", meta_col + meta_text.index(word))
            name = word
        else:
            raise p.error(f"metadata must be key=value, got {word!r}", meta_col + meta_text.index(word))
    if dict(meta).get("origin", "hand-written") not in ("generated", "hand-written"):
        raise p.error("origin must be 'generated' or 'hand-written'", meta_col)
    rule = Rule(name or f"line{line}", lhs, rhs, arrow.text == "<=>", tuple(meta))
    _check_vars(rule, p, arrow.col)
    return rule


def _check_vars(rule: Rule, p: _Parser, col: int) -> None:
    tensor_l = set().union(*(tensor_vars(x) for x in rule.lhs))
    tensor_r = set().union(*(tensor_vars(x) for x in rule.rhs))
    attr_l = set().union(*(attr_vars(x)[0] for x in rule.lhs))
    attr_r = set().union(*(attr_vars(x)[0] for x in rule.rhs))
    both = (tensor_l | tensor_r) & (attr_l | attr_r)
    if both:
        raise p.error(
            f"variable(s) {', '.join('?' + v for v in sorted(both))} used both as a tensor and an attribute", col
        )
    need_r = _needed_vars(rule.rhs) - _bound_vars(rule.lhs)
    if need_r:
        raise p.error(
            f"the right side uses {', '.join('?' + v for v in sorted(need_r))}, which the left side does not bind", col
        )
    if rule.bidirectional:
        need_l = _needed_vars(rule.lhs) - _bound_vars(rule.rhs)
        if need_l:
            raise p.error(
                f"'<=>' but the left side uses {', '.join('?' + v for v in sorted(need_l))}, "
                f"which the right side does not bind; write '=>'",
                col,
            )
    if not any(True for _ in rule.directions()):
        raise p.error("no usable direction: a rewrite cannot start from a bare variable", col)
    _check_vars_meta(rule, tensor_l | tensor_r, p, col)


_DIMS = re.compile(r"^((\?|\d+)(x(\?|\d+))*)?$")  # empty: rank 0


def _check_vars_meta(rule: Rule, tensors: set[str], p: _Parser, col: int) -> None:
    """``vars=`` names each tensor variable once with its dims (``?`` or a size, joined by ``x``)."""
    text = dict(rule.meta).get("vars")
    if not text:
        return
    seen: set[str] = set()
    for part in text.split(","):
        name, colon, dims = part.partition(":")
        if not colon or not _DIMS.match(dims):
            raise p.error(f"vars= entry {part!r}: write NAME:DIMS with DIMS like ?x?x3x3 (NAME: for a scalar)", col)
        if name not in tensors:
            raise p.error(f"vars= names {name!r}, which is not a tensor variable of the rule", col)
        if name in seen:
            raise p.error(f"vars= names {name!r} twice", col)
        seen.add(name)
    missing = tensors - seen
    if missing:
        raise p.error(f"vars= leaves out {', '.join('?' + v for v in sorted(missing))}", col)


def parse_rules(text: str, filename: str = "<string>") -> list[Rule]:
    """Parse a whole rule file. Rule names must be unique."""
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        rule = parse_rule(raw, filename, lineno)
        if rule.name in seen:
            raise RuleParseError(f"rule name {rule.name!r} already used on line {seen[rule.name]}", filename, lineno, 1)
        seen[rule.name] = lineno
        rules.append(rule)
    return rules


def merge_duplicates(rules: Iterable[Rule]) -> tuple[list[Rule], dict[str, str]]:
    """The rules less exact repeats (the same sides, arrow, ``vars=`` and ``weights=``; the name
    and provenance aside), and {dropped name: the kept rule's name}. A repeated rule adds nothing
    but e-graph rules that match the same terms: 1,000 copies of one rule took 4 GB to load."""
    kept: dict[tuple, Rule] = {}
    dropped: dict[str, str] = {}
    for r in rules:
        meta = dict(r.meta)
        key = (r.lhs, r.rhs, r.bidirectional, meta.get("vars"), meta.get("weights"))
        if key in kept:
            dropped[r.name] = kept[key].name
        else:
            kept[key] = r
    return list(kept.values()), dropped


def load_rules(path: str | Path) -> list[Rule]:
    """Read a rule file (see the module docstring for the format)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RuleParseError(f"not UTF-8 text (byte 0x{data[exc.start]:02x}); rule files are UTF-8", str(path),
                             line, col) from None
    return parse_rules(text, str(path))


def save_rules(path: str | Path, rules: Iterable[Rule], header: Iterable[str] = ()) -> None:
    """Write a rule file atomically (a temp file renamed into place: no partial output)."""
    write_atomic(path, format_rules(rules, header))


_VAR = re.compile(r"\?[A-Za-z_][\w\-']*")


def rule_key(rule: Rule) -> str:
    """A canonical text of a rule up to renaming its variables (and, for ``<=>``, swapping sides).

    Variables are renamed in order of first appearance, which is canonical for a fixed side order.
    """
    arrow = " <=> " if rule.bidirectional else " => "
    orders = [(rule.lhs, rule.rhs)] + ([(rule.rhs, rule.lhs)] if rule.bidirectional else [])
    keys = []
    for left, right in orders:
        text = " ".join(map(format_pattern, left)) + arrow + " ".join(map(format_pattern, right))
        names: dict[str, str] = {}
        for m in _VAR.finditer(text):
            names.setdefault(m.group(), f"?v{len(names)}")
        keys.append(_VAR.sub(lambda m, names=names: names[m.group()], text))
    return min(keys)
