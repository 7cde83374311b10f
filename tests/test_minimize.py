"""Rule-set minimization: derivable rules are dropped, others kept; the shipped minimized sets
still derive every textbook rule the generator tests look for."""
from __future__ import annotations

import pytest
from test_rule_generator import TEXTBOOK_CONV, TEXTBOOK_MATRIX

from eqsat.rules.rulefile import parse_rule, parse_rules
from eqsat.rules.rulesets import RULE_SETS, default_rules
from rulegen.minimize import MinimizeSettings, derivable, minimize
from rulegen.verify import sample_assignments

SHAPES = {"A": "?x?", "B": "?x?", "C": "?x?", "X": "?x?x?x?", "W": "?x?x3x3", "V": "?x?x3x3", "K": "?x?x1x1"}


def with_meta(text: str, world: str) -> str:
    """``text`` with generated-rule metadata naming exactly its own variables."""
    names = sorted({c for c in SHAPES if f"?{c}" in text})
    return f"{text} ; origin=generated world={world} vars=" + ",".join(f"{n}:{SHAPES[n]}" for n in names)


SMALL = parse_rules("\n".join(with_meta(line, "matrix") for line in (
    "comm: (ewadd ?B ?A) <=> (ewadd ?A ?B)",
    "assoc: (ewadd ?A (ewadd ?B ?C)) <=> (ewadd (ewadd ?A ?B) ?C)",
    "variant: (ewadd (ewadd ?C ?B) ?A) <=> (ewadd (ewadd ?A ?B) ?C)",
    "involution: (transpose :perm [1 0] (transpose :perm [1 0] ?A)) => ?A",
    "mm-assoc: (matmul ?A (matmul ?B ?C)) <=> (matmul (matmul ?A ?B) ?C)",
)))


def test_a_derivable_rule_is_dropped_and_the_rest_kept():
    report = minimize(SMALL, MinimizeSettings(iterations=3))
    assert [r.name for r in report.kept] == ["comm", "assoc", "involution", "mm-assoc"]
    assert report.derived == ("variant",)
    assert all(dict(r.meta)["checked"].endswith("iterations:3") for r in report.kept)


def test_a_rule_the_kept_set_does_not_imply_is_not_derivable():
    """The check can fail: commutativity alone does not give associativity."""
    assoc = SMALL[1]
    from numpy.random import default_rng
    sides = [s for _, s in sample_assignments(assoc, default_rng(0), want=2)]
    assert derivable(SMALL[:1], [(assoc, sides)], MinimizeSettings()) == [False]
    assert derivable(SMALL[:2], [(SMALL[2], [s for _, s in sample_assignments(SMALL[2], default_rng(0), want=2)])],
                     MinimizeSettings()) == [True]


@pytest.mark.parametrize("world,textbook", [("matrix", TEXTBOOK_MATRIX), ("conv", TEXTBOOK_CONV)])
def test_shipped_minimized_sets_derive_every_textbook_rule(world, textbook):
    kept = default_rules([f"{world}-min"])
    assert len(kept) < len(default_rules([world])) // 5
    from numpy.random import default_rng
    candidates = []
    for text in textbook.values():
        rule = parse_rule(with_meta(text, world))
        candidates.append((rule, [s for _, s in sample_assignments(rule, default_rng(0), want=2)]))
    assert all(sides for _, sides in candidates)
    assert derivable(kept, candidates, MinimizeSettings(iterations=4)) == [True] * len(candidates)


def test_the_minimized_sets_are_shipped_rows():
    assert {"matrix-min", "conv-min"} <= set(RULE_SETS)
