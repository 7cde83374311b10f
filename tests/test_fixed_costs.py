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

from eqsat.egraph import judging, runner
from eqsat.egraph.rewrites import COMPILED, Compiled
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
    _counted(monkeypatch, counts, judging, "extract", "exact extractions")  # the judges' and the final one
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
    from eqsat.egraph.preload import HOST_RULES, preload_key

    recorded = HOST_RULES.shard_path(preload_key(build("squeezenet"), True)[:12])
    assert recorded is None or recorded.exists(), "the worker did not record the rules its host kept"


def _host_run(compiled, graph, limits, host):
    """One run in ``host`` as the saturation worker makes it (no merge judges): its iterations (a
    loaded rule that matched nothing is listed, one asleep is not: only matches count) and what it
    leaves in the host, as known before the host is put back. ``compiled`` as a job brings it,
    fresh (its language sends the graph's own constructors)."""
    r = runner.EGraphRunner(Compiled.from_data(compiled.to_data()), host=host)
    r.insert(graph)
    report = r.run(limits)
    left = r.run_rules.left()
    r.release()
    return [(it.enodes, {k: n for k, n in it.matches.items() if n}) for it in report.iterations], left


def _holds(host, compiled) -> tuple[set, set]:
    return ({rule for rule in compiled.rules if rule in host.rulesets},
            {query for query in compiled.triggers if query in host.triggers})


def test_a_graphs_rules_are_loaded_again_before_its_next_run(monkeypatch):
    """A fresh worker loads the rules the graph's last run left in its host while the parent parses
    the rules (egglog: 0.4-1.1 ms a rule; SqueezeNet's 37, 45 ms of its 0.11 s search): recorded
    as the run answers (before the host is put back: the parent may exit first), loaded into a new
    host before the next, which then loads none of them itself and saturates exactly as before; a
    job that comes stops the loading between two rules."""
    from eqsat.egraph.host import HostPool, RuleHost
    from eqsat.egraph.limits import Limits
    from eqsat.egraph.preload import HOST_RULES, preload, preload_key, remember
    from eqsat.egraph.relevance import relevant_compiled

    monkeypatch.setattr(HOST_RULES, "save", lambda: None)  # this process's memo only
    engine = get_search("eqsat")
    graph = build("squeezenet")
    compiled = relevant_compiled(_rules(None, engine), graph)
    limits = Limits(iterations=4, multi_by_need=0)
    first = RuleHost()
    before, (rules, triggers) = _host_run(compiled, graph, limits, first)
    assert rules and triggers  # the rules the run woke, the triggers of those still asleep
    kept_rules, kept_triggers = _holds(first, compiled)
    assert kept_rules == set(rules) and kept_triggers <= set(triggers), "left() is not what the host kept"
    key = preload_key(graph, True)
    remember(key, compiled.declarations, rules, triggers)

    pool = HostPool()
    preload(key, pool)
    (host,) = pool.hosts
    assert _holds(host, compiled) == (set(rules), set(triggers))
    assert pool.pick(compiled, len(graph.nodes())) is host
    sent: list[str] = []
    send = host._send
    monkeypatch.setattr(host, "_send", lambda text: sent.append(text) or send(text))
    assert _host_run(compiled, graph, limits, host)[0] == before
    assert not [t for t in sent if t.startswith("(ruleset q")], "a preloaded rule was loaded again"

    asked = iter([False, False, True])
    partial = HostPool()
    preload(key, partial, lambda: next(asked, True))
    assert len(partial.hosts[0].rulesets) == 2  # the job came after two rules
    preload("no such graph", partial)
    assert len(partial.hosts) == 1


def test_the_worker_is_forked_with_the_heap_frozen_and_this_process_unfrozen(monkeypatch):
    """A collection after the fork wrote to every object it walked, copying the pages the two
    processes shared (the rule parse took 0.085-0.098 s, 0.020 s with the heap frozen)."""
    import gc

    frozen: list[int] = []
    start = OPT.multiprocessing.process.BaseProcess.start

    def starting(proc):
        frozen.append(gc.get_freeze_count())
        return start(proc)

    monkeypatch.setattr(OPT.multiprocessing.process.BaseProcess, "start", starting)
    worker = OPT.SaturationWorker()
    try:
        assert frozen and frozen[0] > 0 and gc.get_freeze_count() == 0
    finally:
        worker.close()


def test_extraction_modules_load_while_the_worker_loads_rules():
    # networkx took 0.15-0.2 s of every command's start-up, before the saturation worker was
    # started; the e-graph search's prepare imported it while the worker loaded the graph's rules.
    # Now the parts and cycle components are walks of the search's own: it needs networkx no more,
    # and the prepare imports the solver's binding alone
    code = ("import json, sys; import experiments.commands.optimize, experiments.commands.compare; "
            "before = 'networkx' in sys.modules; from eqsat import pipeline; from eqsat.models import build; "
            "from eqsat.search import prepare; from eqsat.searches import get_search; e = get_search('eqsat'); "
            "e.warm(); prepare(e, build('vgg19'), pipeline.search_limits(e, 'vgg19', None, {}, {})); "
            "print(json.dumps([before, 'networkx' in sys.modules, 'highspy' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False, True]


def test_a_rules_text_is_formatted_once_and_never_taken_for_another_rules(monkeypatch):
    """The relevance key formats each rule once per rule object (3-8 ms a run before); a memo entry
    left by a dead rule whose id a new rule reuses is not that rule's text."""
    import dataclasses

    import eqsat.egraph.relevance as relevance
    from eqsat.rules.rulefile import format_rule
    from eqsat.rules.rulesets import default_rules

    rule = default_rules()[0]
    other = dataclasses.replace(rule, name=rule.name + "-other")
    monkeypatch.setattr(relevance, "_TEXTS", {id(other): (rule, format_rule(rule))})  # as if ``rule`` had died
    assert relevance.rule_text(other) == format_rule(other) != format_rule(rule)
    calls = []
    monkeypatch.setattr(relevance, "format_rule", lambda r: calls.append(r) or format_rule(r))
    assert relevance.rule_text(rule) == relevance.rule_text(rule) == format_rule(rule) and calls == [rule]
