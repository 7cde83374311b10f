"""The rules of one saturation run in its egglog e-graph: those loaded, those asleep until their
trigger matches, and the rulesets that name them for the runner's passes (:class:`RunRules`).

egglog 13.2 takes 0.4-1.1 ms to load one compiled rule (most of it planning the query and
compiling the actions that set each new node's sizes), and VGG-19's 268 relevant rules took 0.21 s
to load while 25 of them ever match. A rule the e-graph does not hold sleeps: only its *trigger*
is loaded, a rule with its source patterns alone (:func:`~eqsat.egraph.rewrites.trigger_query`)
and no actions, about a tenth of the rule's load time. Before each pass the triggers run (they
change nothing) and the rules of those that match are loaded; every match of a rule is a match
of its trigger, so each pass matches exactly what it would with every rule loaded. A trigger
itself is loaded only once every table it reads (its constructors, ``chosen``) has a row: until
then it is *dormant* (VGG-19: 33 of its 168 triggers are ever loaded).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from eqsat.egraph.host import KINDS, MEMORY_EVERY, Member, RuleHost, check_loading_memory
from eqsat.egraph.rewrites import Compiled, trigger_tables

BATCHES = 16  # rulesets per rule kind: the granularity at which a cap can stop an iteration (see runner)


class RunRules:
    """One run's rules in ``host``'s e-graph. ``keep`` False: rules woken during the run go into
    rulesets the host does not remember (the run's save is popped at the end; :meth:`keep_woken`
    loads them into the host again). ``lazy`` False loads every rule at once."""

    def __init__(self, host: RuleHost, compiled: Compiled, memory_gb: float = math.inf, keep: bool = True,
                 lazy: bool = True):
        self.host, self.compiled, self.memory_gb, self.keep = host, compiled, memory_gb, keep
        held = host.held(compiled) if lazy else set(range(len(compiled.rules)))
        self.held = held  # the rules loaded from the start (see left)
        self.members: list[Member] = host.load(compiled, memory_gb, only=sorted(held))
        self.sleeping: dict[str, list[int]] = {}  # a loaded trigger's ruleset -> the rules it wakes
        self.dormant: dict[str, list[int]] = {}  # a trigger not loaded (a table it reads is empty) -> its rules
        for i in range(len(compiled.rules)):
            if i not in held:
                self.dormant.setdefault(compiled.triggers[i], []).append(i)
        self._rouse()
        self.roused = 0  # triggers loaded after these, once a table they read got its first row
        self.base_triggers = dict(host.triggers)  # the host's triggers before this run's save (see keep_woken)
        if len(compiled.rules) >= MEMORY_EVERY:  # whatever the e-graph held already: the same answer in any host
            check_loading_memory(memory_gb, f"{len(held)} of {len(compiled.rules)} e-graph rules")
        self.woken: list[int] = []  # rules loaded by wake
        self.generation = 0  # the rulesets below are named anew each time rules are loaded
        self.sets: dict[str, str] = {}  # kind -> the ruleset of its loaded rules
        self.batch_sets: dict[str, list[str]] = {}  # kind -> its BATCHES rulesets, once named (see batches)
        self.wake_set = ""  # the sleeping rules' triggers

    @property
    def asleep(self) -> bool:
        """Whether some rule is not loaded yet."""
        return bool(self.sleeping or self.dormant)

    def _rouse(self) -> int:
        """Load the dormant triggers whose tables all have rows now; how many."""
        if not self.dormant:
            return 0
        empty = self.host.empty_tables()
        live = [query for query in self.dormant if trigger_tables(query).isdisjoint(empty)]
        for query, name in zip(live, self.host.load_triggers(live, self.memory_gb)):
            self.sleeping.setdefault(name, []).extend(self.dormant.pop(query))
        return len(live)

    @property
    def loaded(self) -> int:
        return sum(m is not None for m in self.members)

    def name_sets(self) -> list[str]:
        """The commands naming the loaded rules' ruleset of each kind and the sleeping rules'
        triggers (the caller sends them); a kind's ``BATCHES`` rulesets are named on demand
        (:meth:`batches`)."""
        self.generation += 1
        g = self.generation
        self.batch_sets = {}
        lines = []
        for kind in KINDS:
            members = " ".join(m[1] for m in self.members if m is not None and m[0] == kind)
            self.sets[kind] = f"{kind}{g}"
            lines.append(f"(unstable-combined-ruleset {kind}{g} {members})" if members else f"(ruleset {kind}{g})")
        if self.sleeping:
            self.wake_set = f"wake{g}"
            lines.append(f"(unstable-combined-ruleset {self.wake_set} {' '.join(self.sleeping)})")
        return lines

    def batches(self, kind: str) -> tuple[list[str], list[str]]:
        """The commands naming the ``BATCHES`` rulesets of ``kind``'s loaded rules (none when
        named already in this generation) and their names: a stepped iteration runs them in turn."""
        if kind in self.batch_sets:
            return [], self.batch_sets[kind]
        batches: dict[int, list[str]] = {}
        for k, member in enumerate(self.members):
            if member is not None and member[0] == kind:
                batches.setdefault(k % BATCHES, []).append(member[1])
        names = [f"{kind}{self.generation}_{b}" for b in range(BATCHES)]
        lines = [f"(unstable-combined-ruleset {name} {' '.join(batches[b])})" if b in batches else f"(ruleset {name})"
                 for b, name in enumerate(names)]
        self.batch_sets[kind] = names
        return lines, names

    def wake(self, send: Callable[[str], list[Any]], everything: bool = False) -> list[str]:
        """Load the sleeping rules whose triggers match now (every one, with ``everything``);
        the commands renaming the rulesets when some were loaded (the caller sends them)."""
        if not self.asleep:
            return []
        if everything:
            rules = sorted(i for group in (*self.sleeping.values(), *self.dormant.values()) for i in group)
            self.sleeping, self.dormant = {}, {}
        else:
            roused = self._rouse()
            self.roused += roused
            if roused:  # the wake set takes in the triggers just loaded
                send("\n".join(self.name_sets()))
            if not self.sleeping:
                return []
            counts: dict[str, int] = {}
            for out in send(f"(run-schedule (run {self.wake_set}))"):
                report = getattr(out, "report", None)
                for name, count in (report.num_matches_per_rule.items() if report is not None else ()):
                    counts[name] = counts.get(name, 0) + count
            woke = [name for name in self.sleeping if counts.get(name)]
            rules = sorted(i for name in woke for i in self.sleeping.pop(name))
        if not rules:
            return []
        loaded = self.host.load(self.compiled, self.memory_gb, only=rules, keep=self.keep)
        for i in rules:
            self.members[i] = loaded[i]
        self.woken.extend(rules)
        return self.name_sets()

    def save(self) -> tuple:
        """The state an egglog push saves (see :meth:`restore`)."""
        return (list(self.members), {t: list(r) for t, r in self.sleeping.items()},
                {q: list(r) for q, r in self.dormant.items()}, list(self.woken), dict(self.sets),
                dict(self.batch_sets), self.wake_set, self.generation, dict(self.host.rulesets),
                dict(self.host.triggers))

    def restore(self, saved: tuple) -> None:
        """Back to :meth:`save`'s state after the matching pop, which took away the rules woken
        since and their rulesets, and the triggers loaded since."""
        (self.members, self.sleeping, self.dormant, self.woken, self.sets, self.batch_sets, self.wake_set,
         self.generation, self.host.rulesets, self.host.triggers) = saved

    def left(self) -> tuple[list[str], list[str]]:
        """What this run leaves for a later one (see :mod:`eqsat.egraph.preload`), known before the
        host is put back: the rules of its rule set the host will hold after :meth:`keep_woken`
        (those held from the start and those woken), and the triggers of its rule set loaded now
        (the host keeps fewer: a pop takes those loaded after a save; a trigger loaded early
        changes no match, see the module's docstring)."""
        rules = [self.compiled.rules[i] for i in sorted(self.held | set(self.woken))]
        triggers = [query for query in dict.fromkeys(self.compiled.triggers) if query in self.host.triggers]
        return list(dict.fromkeys(rules)), triggers

    def keep_woken(self, woken: Sequence[int]) -> None:
        """After the pop of the run's save, which took away what the run loaded: load ``woken``
        into the host for later runs, and the triggers the run loaded whose rules still sleep."""
        still = [query for query, name in self.host.triggers.items()
                 if query not in self.base_triggers and name in self.sleeping]
        self.host.triggers = dict(self.base_triggers)
        if still:
            self.host.load_triggers(still, self.memory_gb)
        if woken:
            self.host.load(self.compiled, self.memory_gb, only=sorted(woken))
