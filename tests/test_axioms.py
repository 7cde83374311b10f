"""Operator axioms (eqsat/rules/axioms.rules) and the Z3 prover: every axiom holds numerically,
proofs depend on the axioms, and the prover cannot be made to prove something false."""
from __future__ import annotations

import numpy as np
import pytest

from eqsat.ir.ops import OP_TABLE
from eqsat.rules.rulefile import load_rules, parse_rules
from rulegen.verify import verify_rule

z3 = pytest.importorskip("z3")
from rulegen.prove import AXIOMS_PATH, Prover  # noqa: E402

AXIOMS = load_rules(AXIOMS_PATH)


@pytest.mark.parametrize("axiom", AXIOMS, ids=lambda a: a.name)
def test_every_axiom_holds_numerically_at_small_sizes(axiom):
    """TASO checked its axioms by tests on small sizes; so does this (float64 and mod p)."""
    assert dict(axiom.meta)["op"] in OP_TABLE
    verdict = verify_rule(axiom, np.random.default_rng(0))
    assert verdict.ok, verdict.counterexample


def _prove(text, axioms=None, seconds=2.0):
    """Proofs here take milliseconds; a test that expects one allows 10 s (3 s through the CLI), so a
    slow machine cannot fail it."""
    return Prover(axioms, seconds=seconds).prove(parse_rules(text)[0])


def test_generated_rules_are_proved_from_the_axioms():
    for text in ("r: (matmul ?A (matmul ?B ?C)) <=> (matmul (matmul ?A ?B) ?C)",
                 "r: (ewmul (ewadd ?B ?B) ?A) <=> (ewmul (ewadd ?A ?A) ?B)",
                 "r: (concat :axis 1 (matmul ?A ?B) (matmul ?A ?C)) <=> (matmul ?A (concat :axis 1 ?B ?C))",
                 "r: (ewmul (concat :axis 1 ?A ?A) (concat :axis 1 ?B ?C)) <=> "
                 "(concat :axis 1 (ewmul ?A ?B) (ewmul ?A ?C))",
                 "r: (concat :axis 1 (conv2d :pad same ?X ?K) (conv2d :pad same ?X ?L)) <=> "
                 "(conv2d :pad same ?X (concat :axis 0 ?K ?L))"):
        assert _prove(text, seconds=10.0).status == "proved", text


def test_a_proof_needs_its_axiom():
    without = [a for a in AXIOMS if a.name != "matmul-assoc"]
    rule = "r: (matmul ?A (matmul ?B ?C)) <=> (matmul (matmul ?A ?B) ?C)"
    assert _prove(rule, without).status != "proved"


@pytest.mark.parametrize("text", [
    "wrong: (matmul ?A ?B) => (matmul ?B ?A)",  # matrices do not commute
    "wrong: (ewadd ?A ?B) => ?A",
    "wrong: (transpose :perm [1 0] ?A) => ?A",
    "wrong: (ewmul (concat :axis 1 ?A ?B) (concat :axis 1 ?C ?D)) => (concat :axis 1 (ewmul ?A ?D) (ewmul ?B ?C))",
    "wrong: (affine ?X ?S ?T) => (chmul (chadd ?X ?T) ?S)",  # the shift scaled too
    "wrong: (chadd (conv2d :stride ?s :pad ?p :groups ?g :dilation ?d ?X ?W ?B) ?C) => "
    "(conv2d :stride ?s :pad ?p :groups ?g :dilation ?d ?X ?W ?C)",  # the conv's own bias lost
])
def test_unsound_rules_are_never_proved(text):
    assert _prove(text).status in ("not derivable", "unknown")


def test_the_axioms_are_not_inconsistent():
    """From inconsistent axioms Z3 would prove anything, e.g. that A + B = B + B for free A, B."""
    assert _prove("false: (ewadd ?A ?B) => (ewadd ?B ?B)").status != "proved"
    solver = z3.Solver()
    solver.set("timeout", 5000)
    solver.add(*Prover().formulas)
    assert solver.check() != z3.unsat


def test_rules_with_split_sizes_are_left_to_the_random_tests():
    proof = _prove("r: (matmul ?A ?B) (matmul ?A ?C) => "
                   "(proj :index 0 (split :axis 1 :sizes [(dim ?B 1) (dim ?C 1)] (matmul ?A (concat :axis 1 ?B ?C)))) "
                   "(proj :index 1 (split :axis 1 :sizes [(dim ?B 1) (dim ?C 1)] (matmul ?A (concat :axis 1 ?B ?C))))")
    assert proof.status == "skipped" and "size" in proof.reason


def test_rules_verify_prove_marks_the_proved_rules(tmp_path, capsys):
    from experiments.cli import main

    src = tmp_path / "r.rules"
    src.write_text("assoc: (matmul ?A (matmul ?B ?C)) <=> (matmul (matmul ?A ?B) ?C) ; vars=A:?x?,B:?x?,C:?x?\n"
                   "idem: (relu (ewmul ?A ?A)) <=> (ewmul ?A ?A) ; vars=A:?x?\n")
    out = tmp_path / "proved.rules"
    assert main(["rules", "verify", str(src), "--prove", "--prove-seconds", "3", "--out", str(out)]) == 0
    assert "1 proved" in capsys.readouterr().out
    marked = {r.name: dict(r.meta).get("proved") for r in load_rules(out)}
    assert marked == {"assoc": "z3", "idem": None}


def test_every_shipped_epilogue_rule_is_proved_from_the_axioms():
    """The BN, scale and bias folds and the fused activations follow from the epilogue ops'
    axioms (bias and affine as channel ops, conv scaling, channel ops composing)."""
    from eqsat.rules.rulesets import default_rules

    prover = Prover(seconds=10.0)
    for rule in default_rules(["epilogue"]):
        assert prover.prove(rule).status == "proved", rule.name
