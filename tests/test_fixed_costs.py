"""The e-graph's fixed costs on a small model, as work counts (never wall-clock: the machine is
shared): a change that brings back a per-run cost (an extra exact extraction, rules sent to egglog
again, rules compiled again, a heavy import) fails here. Budgets are today's counts on VGG-19, whose
121 e-nodes saturate in a tenth of a second, so fixed costs are all its run is."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections import Counter

from eqsat.egraph import runner
from eqsat.egraph.rewrites import COMPILED
from eqsat.models import build
from eqsat.pipeline import _rules
from eqsat.searches import get_search

OPT = importlib.import_module("eqsat.egraph.optimize")  # the package exports a function of the same name
# VGG-19: one judge, one final proof; 25 of its 268 egglog rules loaded and 33 of its 168 triggers (the
# others dormant: a constructor they read never gets a row; 38 loads, a pop undoing some), 92 programs
# with the table-size queries the wakes send (357 when every rule was loaded, one to a program)
BUDGET = {"exact extractions": 2, "egglog programs": 100, "triggers loaded": 60}


def _counted(monkeypatch, counts: Counter, owner, name: str, key: str) -> None:
    original = getattr(owner, name)

    def counting(*args, **kwargs):
        counts[key] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)


def test_a_small_model_runs_within_its_work_budget(monkeypatch):
    counts: Counter = Counter()
    _counted(monkeypatch, counts, runner.EGraphRunner, "_send", "egglog programs")
    _counted(monkeypatch, counts, runner.RuleHost, "_send", "egglog programs")
    _counted(monkeypatch, counts, OPT, "extract", "exact extractions")
    load_triggers = runner.RuleHost.load_triggers

    def counting_triggers(host, queries, *args, **kwargs):  # those a trigger's table made live
        counts["triggers loaded"] += len(set(queries) - host.triggers.keys())
        return load_triggers(host, queries, *args, **kwargs)

    monkeypatch.setattr(runner.RuleHost, "load_triggers", counting_triggers)
    engine = get_search("eqsat")
    graph, rules, limits = build("vgg19"), _rules(None, engine), engine.limits("default", "vgg19")
    first = OPT.optimize(graph, rules, "h100", limits, isolate=False)
    assert first.best_us == OPT.optimize(graph, rules, "h100", limits, isolate=False).best_us
    misses = COMPILED.misses
    counts.clear()
    again = OPT.optimize(graph, rules, "h100", limits, isolate=False)
    assert COMPILED.misses == misses  # a rule compiled once is never compiled again
    over = {k: (counts[k], budget) for k, budget in BUDGET.items() if counts[k] > budget}
    assert not over, f"VGG-19 went past its work budget (count, budget): {over}"
    assert counts["exact extractions"] >= 1 and again.best_us < first.original_us + 1e-9


def test_a_run_imports_only_what_it_uses(tmp_path):
    # scipy.optimize took 0.24 s of every run for a solver the default (HiGHS) does not use; egglog's
    # Python package (0.13 s) belongs to the saturation worker, not to the process that starts it;
    # scipy.sparse (0.12-0.19 s) only finds the cycles of e-graphs past cycles.SCIPY_ABOVE e-classes
    code = ("import json, sys; from eqsat.pipeline import optimize_model; "
            "o = optimize_model('squeezenet', search='eqsat', device='h100'); "
            "print(json.dumps([o.result.best_us, sorted(m for m in ('scipy.optimize', 'scipy.sparse', 'egglog') "
            "if m in sys.modules)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    best_us, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert best_us < 100 and loaded == []
