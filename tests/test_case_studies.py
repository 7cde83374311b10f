"""The case studies' claims (docs/reference.md) hold: the quick part of ``experiment case-studies``,
so a drift of the searches, the cost model, PET or the tuning models fails CI; the α search's two
presets behave as the reference and docs/results say."""
from __future__ import annotations

from dataclasses import replace

import pytest

from eqsat.models import build
from experiments.cli import main
from experiments.runs.case_studies import CLAIMS, Claim, check_claims
from taso_baseline.search import AlphaSearch, alpha_search


def test_every_quick_claim_holds():
    rows = check_claims(quick=True)
    assert len(rows) >= 30
    failed = [f"{r.claim.name}: expected {r.claim.expected_text()}, measured {r.value}" for r in rows if not r.ok]
    assert not failed, failed


def test_a_drifted_claim_is_marked_and_exits_1(monkeypatch, capsys):
    drifted = replace(CLAIMS[1], expected=60.0)  # the ResNet block's greedy result, moved
    assert CLAIMS[1].quick and "greedy" in CLAIMS[1].name
    monkeypatch.setattr("experiments.runs.case_studies.CLAIMS", (CLAIMS[0], drifted))
    assert main(["experiment", "case-studies", "--quick"]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 claims hold; 1 do not" in out and "62.22" in out


def test_checks_and_ascii_fallback(monkeypatch):
    import io
    import sys

    from experiments.runs.case_studies import Checked, report

    row = Checked(Claim("LoRA at α=1.3", "h100", 21.4, "≈", lambda lab: 0, 0.005, True, unit=" µs"), 21.37, True, 0)
    assert "✔" in report([row]) or not sys.stdout.encoding.lower().startswith("utf")
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    text = report([row])
    assert text.isascii() and "alpha=1.3" in text and "21.37 us  ok" in text
    rising = Claim("x", "s", (3, 33, 150), "rising", lambda lab: (3, 653, 1000))
    assert rising.holds((3, 653, 1000)) and not rising.holds((3, 653, 653))
    band = Claim("x", "s", (10, 60), "in", lambda lab: 33)
    assert band.holds(33) and not band.holds(61)
    assert Claim("x", "s", 1.31, "≈", lambda lab: 0, 0.01).holds(1.305)


@pytest.mark.parametrize("preset,best,expanded", [("taso-paper", 57.84, 5), ("case-study", 62.22, 3)])
def test_the_two_presets_on_greedy_resnet(preset, best, expanded):
    """TASO's two-output rules merge the convs in one improving step; the case studies' single-output
    rules need the 1.31x pair move, which greedy α = 1.0 does not take."""
    engine = AlphaSearch()
    r = engine.run(build("resnet_block"), _rules(), "h100", replace(engine.limits(preset, "resnet_block"), alpha=1.0))
    assert r.best_us == pytest.approx(best, abs=0.01) and r.work.expanded == expanded


def test_lora_at_alpha_13_needs_the_case_study_preset():
    """With two-output rules the search first finds 34.49 µs, and α = 1.3 of that prunes the 1.27x step."""
    for preset, best in (("case-study", 21.37), ("taso-paper", 34.49)):
        r = alpha_search(build("lora"), _rules(), "h100", replace(AlphaSearch.presets[preset], alpha=1.3))
        assert r.best_us == pytest.approx(best, abs=0.01), preset


def _rules():
    from eqsat.rules.rulesets import default_rules

    return default_rules(AlphaSearch.default_rule_sets)


def test_preset_reaches_the_experiments_and_compare(tmp_path, capsys):
    from experiments import compare
    from experiments.runs import alpha, budget

    assert "preset" not in alpha.cells(["lora"], "h100", 0, 10, (1.3,))[0].kwargs  # old cells keep their keys
    assert alpha.cells(["lora"], "h100", 0, 10, (1.3,), "case-study")[0].kwargs["preset"] == "case-study"
    assert {c.kwargs.get("preset") for c in budget.cells(["lora"], "h100", 0, 10, "case-study")} == {"case-study", None}
    table = compare.tables()[0]
    by = {c.kwargs["search"]: c.kwargs.get("preset") for c in compare.cells(["lora"], "h100", 0, False, table,
                                                                             "case-study")}
    assert by == {"taso": "case-study", "eqsat": None}
    for argv in (["experiment", "alpha"], ["experiment", "budget"], ["compare"]):
        assert main([*argv, "--models", "lora", "--preset", "nope", "--out", str(tmp_path)]) == 2
        assert "no preset 'nope'" in capsys.readouterr().err


def test_an_experiment_cell_runs_the_named_preset():
    from experiments.searches import run_search

    row = run_search("lora", "taso", alpha=1.3, preset="case-study")
    assert row["preset"] == "case-study" and row["best_us"] == pytest.approx(21.37, abs=0.01)
    assert run_search("lora", "taso", alpha=1.3)["preset"] == "taso-paper"
