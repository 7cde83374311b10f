"""An egglog e-graph that holds compiled rules, each in a ruleset of its own, and loads only the
ones it lacks: where a run's rules and their declarations go before its rulesets are named."""
from __future__ import annotations

import math

from eqsat.egraph.bindings import load_bindings
from eqsat.egraph.language import HEADER
from eqsat.egraph.limits import MemoryLimitError, rss_gb
from eqsat.egraph.rewrites import Compiled

KINDS = ("rw", "multi", "best")  # rewrites; multi-pattern merges; the same merges on the best graph's ops
MEMORY_EVERY = 16  # rules loaded between two checks of the memory cap

egglog = load_bindings()


class RuleHost:
    """One egglog e-graph that keeps every rule and constructor any run loaded into it, each rule
    in a ruleset of its own; a run loads only what is new, saves the e-graph (push), names its
    rules' rulesets as ``rw``/``multi``/``best`` and is popped at the end. Rules of other runs sit
    in rulesets that are never run, but egglog copies them at every push. Its rules are loaded
    before a run's graph, and egglog plans a rule's joins by the table sizes at loading (see
    :meth:`EGraphRunner._load_rules`): on a large graph a rule planned on an empty e-graph can
    match in time quadratic in its size, so the saturation worker no longer keeps hosts (it kept
    four and saved 0.7 ms per rule and model)."""

    def __init__(self) -> None:
        self.egraph = egglog.EGraph()
        self._send(HEADER)
        self.lines: set[str] = set()  # declarations sent
        self.rulesets: dict[str, str] = {}  # rule text (with ``:ruleset KIND``) -> its own ruleset

    def _send(self, text: str) -> None:
        self.egraph.run_program(*self.egraph.parse_program(text))

    def declare(self, compiled: Compiled) -> None:
        """Send the declarations (constructors, the constness rules) ``compiled`` needs and this
        e-graph lacks."""
        new = [line for line in compiled.declarations.splitlines() if line.strip() and line not in self.lines]
        if new:
            self._send("\n".join(new))
            self.lines.update(new)

    def load(self, compiled: Compiled, memory_gb: float = math.inf) -> list[tuple[str, str]]:
        """Send what ``compiled`` needs and this e-graph lacks; the kind and ruleset of each of its
        rules, in ``compiled.rules`` order. Past ``memory_gb`` (checked every ``MEMORY_EVERY``
        rules) it stops with :class:`MemoryLimitError`."""
        self.declare(compiled)
        members: list[tuple[str, str]] = []
        for i, rule in enumerate(compiled.rules):
            if i % MEMORY_EVERY == MEMORY_EVERY - 1 and rss_gb() > memory_gb:
                raise MemoryLimitError(f"loading the rules into egglog passed the {memory_gb:g} GB memory cap after "
                                       f"{i} of {len(compiled.rules)} e-graph rules; give fewer rules or a larger "
                                       f"--memory-gb")
            kind = next(k for k in KINDS if f":ruleset {k} :name" in rule)
            name = self.rulesets.get(rule)
            if name is None:
                name = f"q{len(self.rulesets)}"
                self._send(f"(ruleset {name}) " + rule.replace(f":ruleset {kind} :name", f":ruleset {name} :name"))
                self.rulesets[rule] = name
            members.append((kind, name))
        return members
