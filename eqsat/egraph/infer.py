"""Variable ranks for hand-written rules that carry no ``vars=`` metadata.

The e-graph needs every tensor variable's rank (its constructors carry the output rank and its
shape conditions are written per axis). A rule written by hand often has none; its ranks follow
from the op table's shape rules: every assignment of ranks 0 to 4 (sizes all equal) under which
both sides type-check with equal output shapes is one variant of the rule, named
``rule@rank=A2,B2``. Sizes stay free: the symbolic shape engine turns the shape rules into the
variant's conditions. A rule no rank assignment types is an error naming it.
"""
from __future__ import annotations

import itertools

from eqsat.errors import EqsatError, RuleCompileError
from eqsat.ir.graph import input_
from eqsat.rules.pattern import attr_vars, instantiate, tensor_vars
from eqsat.rules.rulefile import Rule

MAX_RANK = 4
SIDES = (3, 4, 1)  # cube sides tried in turn (a 1x1-kernel pattern needs 1, enlarge needs <= its size)


def _types(rule: Rule, shapes: dict[str, tuple[int, ...]]) -> bool:
    bindings = {name: input_(name, shape) for name, shape in shapes.items()}
    try:
        left = [instantiate(p, bindings) for p in rule.lhs]
        right = [instantiate(p, bindings) for p in rule.rhs]
    except (EqsatError, KeyError, ValueError, TypeError, IndexError):
        return False
    return all(len(a.shapes) == 1 and a.shapes == b.shapes for a, b in zip(left, right))


def rank_variants(rule: Rule) -> list[Rule]:
    """``rule`` itself when it has ``vars=`` metadata or attribute variables (ground those first);
    otherwise one variant per rank assignment that type-checks."""
    if rule.var_dims is not None or any(attr_vars(p)[0] for p in rule.lhs + rule.rhs):
        return [rule]
    tensors = sorted(set().union(*(tensor_vars(p) for p in rule.lhs + rule.rhs)))
    variants: list[Rule] = []
    for ranks in itertools.product(range(MAX_RANK + 1), repeat=len(tensors)):
        if any(_types(rule, {t: (side,) * r for t, r in zip(tensors, ranks)}) for side in SIDES):
            dims = {t: (None,) * r for t, r in zip(tensors, ranks)}
            label = ",".join(f"{t}{r}" for t, r in zip(tensors, ranks))
            variants.append(rule.with_var_dims(dims, f"{rule.name}@rank={label}"))
    if not variants:
        raise RuleCompileError(f"rule {rule.name}: no ranks 0-{MAX_RANK} of {', '.join(tensors)} make both sides "
                             f"type-check with equal shapes; give them with vars= (e.g. vars=A:?x?)")
    return variants


def with_inferred_ranks(rules: list[Rule]) -> list[Rule]:
    """Every rule, a metadata-free one replaced by its rank variants (order kept)."""
    return [v for r in rules for v in rank_variants(r)]
