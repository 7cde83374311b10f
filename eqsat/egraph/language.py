"""The tensor language in egglog, generated from the op table.

Every (op, attributes, arity, output rank) that occurs becomes one egglog
constructor over the sort ``T``: attributes and rank are part of the
constructor, so matching compares them for free (a rule needs no rank facts for
the inputs of ``same_rank`` ops) and extraction knows them. A projection of a split is one
constructor ``splitproj`` whose extra i64 arguments are the part sizes (a
rewrite can compute them from shapes). Shapes live in egglog as
``(rank T) -> i64`` and ``(dim T i64) -> i64``; weight-only constness is the
relation ``const``, propagated by one generated rule per constructor; ``chosen`` marks the
e-classes of the best graph extracted so far (merges by need pair only those).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from eqsat.ir.ops import get_op

REF = "ref"  # (ref K): node K of the graphs a run sent, in the order sent (see EGraphRunner._terms)
NAMED = "named"  # (named N): an output of a graph a run sent, by its let_name N (read back as the view's lets)

HEADER = f"""
(sort T)
(constructor leaf (String) T)
(function {REF} (i64) T :merge old)
(function {NAMED} (String) T :merge old)
(function rank (T) i64 :merge old)
(function dim (T i64) i64 :merge old)
(relation const (T))
(relation chosen (T))
(ruleset analysis)
"""


@dataclass(frozen=True)
class Ctor:
    """One generated constructor: the IR op and attributes it stands for."""

    name: str
    op: str
    attrs: tuple[tuple[str, Any], ...]
    arity: int
    sizes: int = 0  # i64 arguments after the tensors (split part sizes)
    rank: int | None = None  # output rank: matching a constructor fixes its node's rank


@dataclass
class Language:
    """The constructors declared so far and the program text that declares them."""

    ctors: dict[str, Ctor] = field(default_factory=dict)
    by_key: dict[tuple, Ctor] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)

    def ctor(self, op: str, attrs: tuple[tuple[str, Any], ...], arity: int, sizes: int = 0,
             rank: int | None = None) -> Ctor:
        """The constructor for ``op`` with these (canonical) attributes and output rank, declared
        on first use."""
        key = (op, attrs, arity, sizes, rank)
        found = self.by_key.get(key)
        if found is not None:
            return found
        get_op(op if op != "splitproj" else "split")
        code = hashlib.blake2b(repr(key).encode(), digest_size=4).hexdigest()
        c = Ctor(f"{op}_{code}", op, attrs, arity, sizes, rank)
        self.ctors[c.name] = c
        self.by_key[key] = c
        args = " ".join(["T"] * arity + ["i64"] * sizes)
        self.pending.append(f"(constructor {c.name} ({args}) T)")
        if arity:
            kids = [f"?c{i}" for i in range(arity)]
            extra = [f"?s{i}" for i in range(sizes)]
            facts = " ".join(f"(const {k})" for k in kids)
            self.pending.append(f"(rule ((= ?e ({c.name} {' '.join(kids + extra)})) {facts}) ((const ?e)) "
                                f":ruleset analysis :name \"const:{c.name}\")")
        return c

    def take_pending(self) -> str:
        """Declarations not yet sent to the e-graph."""
        text = "\n".join(self.pending)
        self.pending.clear()
        return text


def split_proj_attrs(axis: int, index: int) -> tuple[tuple[str, Any], ...]:
    return (("axis", axis), ("index", index))


def egg_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def let_name(prefix: str, i: int) -> str:
    """The name of node ``i`` (in topological order) of a graph sent under ``prefix``: an output's
    row of the ``named`` table (it was an egglog global per node, see ``EGraphRunner._terms``).

    It ends in ``_``, so no name is a prefix of another: egglog 13.2 can read a global whose name
    extends another's as that other one (``(chadd $b1_101 $b1_10)`` built ``chadd($b1_10, $b1_10)``
    after a few earlier uses of ``$b1_10``), an e-node of no valid shape with no shape facts."""
    return f"{prefix}{i}_"


def alternative_prefix(k: int) -> str:
    """The prefix of the let names of graph-level alternative ``k``'s nodes."""
    return f"$a{k}_"


def alternative_let(k: int, i: int) -> str:
    """The let name of node ``i`` (in topological order) of graph-level alternative ``k``."""
    return let_name(alternative_prefix(k), i)
