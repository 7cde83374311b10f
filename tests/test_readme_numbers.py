"""Every number the README states is made by a command it names (issue 39 item 11: the README
said both searches take LoRA from 39.7 to 21.4 µs; at its default α the α search does not).
Each test runs the README's own command on the README's own input and finds its output in the
README's text, so a stale number fails here."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = " ".join((ROOT / "README.md").read_text().split())  # one line: sentences wrap anywhere


def readme_rules(count: int) -> str:
    """The first ``count`` rules of the README's rule-file example, as the README shows them."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("A rule file has one rule per line"):]
    block = block[block.index("```") + 3:]
    lines = [ln for ln in block[:block.index("```")].splitlines() if ln.strip()]
    return "\n".join(lines[:count]) + "\n"


def run(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.slow  # the final numerical check of full-size LoRA takes 12-17 s per search
def test_the_readme_lora_numbers_are_what_its_commands_print(tmp_path, capsys):
    """'With the first two rules in two.rules, eqsat-lab optimize lora --search eqsat --rules
    two.rules takes LoRA from 39.7 to 21.4 µs; the α search needs α ≥ 1.3 for it (...), and at
    its default α = 1.05 it keeps 39.7 µs.'"""
    two = tmp_path / "two.rules"
    two.write_text(readme_rules(2))
    assert "`eqsat-lab optimize lora --search eqsat --rules two.rules` takes LoRA from 39.7 to 21.4 µs" in README
    assert "(`eqsat-lab optimize lora --search taso --rules two.rules --alpha 1.3`)" in README
    assert "at its default α = 1.05 it keeps 39.7 µs" in README
    costs = re.compile(r"lora on h100: ([\d.]+) -> ([\d.]+) µs")
    eqsat = costs.search(run(capsys, ["optimize", "lora", "--search", "eqsat", "--rules", str(two)]))
    taso13 = costs.search(run(capsys, ["optimize", "lora", "--search", "taso", "--rules", str(two), "--alpha", "1.3"]))
    taso = costs.search(run(capsys, ["optimize", "lora", "--search", "taso", "--rules", str(two)]))
    assert [f"{float(x):.1f}" for x in eqsat.groups()] == ["39.7", "21.4"]
    assert [f"{float(x):.1f}" for x in taso13.groups()] == ["39.7", "21.4"]
    assert [f"{float(x):.1f}" for x in taso.groups()] == ["39.7", "39.7"]


SETS = {"matrix": "matrix", "conv": "conv", "matrix-min": "matrix.min", "conv-min": "conv.min",
        "matrix4": "matrix4", "conv4": "conv4", "matrix4-min": "matrix4.min", "conv4-min": "conv4.min"}


@pytest.mark.slow  # reads the two full generated sets (10,469 rules): 8 s on 2 cores
def test_the_readme_rule_counts_are_what_rules_check_counts(capsys):
    """'`eqsat-lab rules check eqsat/rules/NAME.rules` counts a file's rules': the README's eight
    counts, in its pairs (matrix and conv, each kind)."""
    counts = {}
    for name, stem in SETS.items():
        path = f"eqsat/rules/{stem}.rules"
        out = run(capsys, ["rules", "check", str(ROOT / path)])
        counts[name] = int(re.search(r": (\d+) rules", out).group(1))
    for a, b in [("matrix", "conv"), ("matrix-min", "conv-min"), ("matrix4", "conv4"), ("matrix4-min", "conv4-min")]:
        assert re.search(rf"(?<![\d,]){counts[a]:,} and {counts[b]:,}(?![\d,])", README), (a, b, counts[a], counts[b])


def test_the_readme_minimize_times_are_the_ones_its_command_wrote():
    """'1,474 s for matrix and 505 s for conv on 2 cores, `seconds` in docs/results/minimize_*.json'."""
    seconds = {w: json.loads((ROOT / f"docs/results/minimize_{w}.json").read_text())["seconds"]
               for w in ("matrix", "conv")}
    assert f"{seconds['matrix']:,.0f} s for matrix and {seconds['conv']:,.0f} s for conv" in README
