"""An egglog e-graph that holds compiled rules, each in a ruleset of its own, and loads only the
ones it lacks (:class:`RuleHost`), and the few a saturation worker keeps for small graphs
(:class:`HostPool`)."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from eqsat.egraph.bindings import load_bindings
from eqsat.egraph.facts import DECLARATIONS as FACT_TABLES
from eqsat.egraph.language import HEADER
from eqsat.egraph.limits import MemoryLimitError, rss_gb
from eqsat.egraph.rewrites import Compiled

KINDS = ("rw", "multi", "best")  # rewrites; multi-pattern merges; the same merges on the best graph's ops
MEMORY_EVERY = 16  # rules (or triggers) loaded between two checks of the memory cap
LOAD_MS_PER_RULE = 0.7  # egglog 13.2 loading one compiled rule (measured: 0.6-0.8 ms, VGG-19's 153 in 0.11 s)
COPY_MS_PER_RULE = 0.12  # one run's saves and restores (2 pushes, 2 pops) per rule a host holds (450: 55 ms)
TRIGGERS_PER_PROGRAM = MEMORY_EVERY  # short programs: egglog 13.2 parses a long one in superlinear time
HOST_MAX_NODES = 2_000  # a larger graph gets an e-graph of its own, its rules planned on its sizes

Member = tuple[str, str] | None  # a loaded rule's kind and its own ruleset; None for a rule not loaded

egglog = load_bindings()


class RuleHost:
    """One egglog e-graph that keeps every rule and constructor any run loaded into it, each rule
    in a ruleset of its own; a run loads only what is new, saves the e-graph (push), names its
    rules' rulesets as ``rw``/``multi``/``best`` and is popped at the end. Rules of other runs sit
    in rulesets that are never run, but egglog copies them at every push. Its rules are loaded
    before a run's graph, and egglog plans a rule's joins by the table sizes at loading (see
    :meth:`EGraphRunner._load_rules`): on a large graph a rule planned on an empty e-graph can
    match in time quadratic in its size, so only small graphs run in hosts (:class:`HostPool`)."""

    def __init__(self) -> None:
        self.egraph = egglog.EGraph()
        self._send(HEADER + FACT_TABLES)
        self.lines: set[str] = set()  # declarations sent
        self.rulesets: dict[str, str] = {}  # rule text (with ``:ruleset KIND``) -> its own ruleset
        self.triggers: dict[str, str] = {}  # trigger query -> its own ruleset (and rule name)
        self.unkept = 0  # rulesets sent with ``keep=False`` (their names are not reused before a pop)

    def _send(self, text: str) -> list:
        return self.egraph.run_program(*self.egraph.parse_program(text))

    def declare(self, compiled: Compiled | str) -> None:
        """Send the declarations (constructors, the constness rules) ``compiled`` (or a text of
        them) needs and this e-graph lacks."""
        text = compiled if isinstance(compiled, str) else compiled.declarations
        new = [line for line in text.splitlines() if line.strip() and line not in self.lines]
        if new:
            self._send("\n".join(new))
            self.lines.update(new)

    def held(self, compiled: Compiled) -> set[int]:
        """The indices of ``compiled``'s rules this e-graph holds already."""
        return {i for i, rule in enumerate(compiled.rules) if rule in self.rulesets}

    def load(self, compiled: Compiled, memory_gb: float = math.inf, only: Sequence[int] | None = None,
             keep: bool = True) -> list[Member]:
        """Send what ``compiled`` needs and this e-graph lacks; the kind and ruleset of each of its
        rules, in ``compiled.rules`` order (None for a rule ``only`` leaves out). With ``keep``
        False the rules go into rulesets this host does not remember (sent after a save that the
        run pops). Past ``memory_gb`` (checked every ``MEMORY_EVERY`` rules) it stops with
        :class:`MemoryLimitError`."""
        self.declare(compiled)
        members: list[Member] = [None] * len(compiled.rules)
        for n, i in enumerate(range(len(compiled.rules)) if only is None else only):
            if n % MEMORY_EVERY == MEMORY_EVERY - 1:
                check_loading_memory(memory_gb, f"{n} of {len(compiled.rules)} e-graph rules")
            members[i] = self._load_rule(compiled.rules[i], keep)
        return members

    def _load_rule(self, rule: str, keep: bool = True) -> tuple[str, str]:
        """A rule's kind and its own ruleset, sent unless this e-graph holds it (see :meth:`load`)."""
        kind = next(k for k in KINDS if f":ruleset {k} :name" in rule)
        name = self.rulesets.get(rule)
        if name is None:
            name = f"q{len(self.rulesets)}" if keep else f"p{self.unkept}"
            self.unkept += not keep
            self._send(f"(ruleset {name}) " + rule.replace(f":ruleset {kind} :name", f":ruleset {name} :name"))
            if keep:
                self.rulesets[rule] = name
        return kind, name

    def preload(self, declarations: str, rules: Sequence[str], triggers: Sequence[str],
                stop: Callable[[], bool] = lambda: False) -> None:
        """Load what a run left in another e-graph's host (``RunRules.left``) into this one, rule
        by rule, then the triggers, until ``stop()``."""
        self.declare(declarations)
        for rule in rules:
            if stop():
                return
            self._load_rule(rule)
        if not stop():
            self.load_triggers(triggers)

    def table_sizes(self) -> dict[str, int]:
        """Rows per egglog table (constructor, function, relation) now."""
        return dict(self._send("(print-size)")[0].sizes)

    def empty_tables(self) -> set[str]:
        """The egglog tables that hold no row now."""
        return {name for name, size in self.table_sizes().items() if size == 0}

    def load_triggers(self, queries: Sequence[str], memory_gb: float = math.inf) -> list[str]:
        """The ruleset (and rule name) of a rule with each of ``queries`` (see
        :func:`~eqsat.egraph.rewrites.trigger_query`) and no actions, loaded once per e-graph,
        :data:`TRIGGERS_PER_PROGRAM` to a program: running one changes nothing, and its matches
        say whether the rules it stands for can match."""
        lines = []
        for query in dict.fromkeys(queries):
            if query not in self.triggers:
                name = self.triggers[query] = f"w{len(self.triggers)}"
                lines.append(f"(ruleset {name}) (rule ({query}) () :ruleset {name} :name \"{name}\")")
        for k in range(0, len(lines), TRIGGERS_PER_PROGRAM):
            if k:  # as for rules: checked after each MEMORY_EVERY loaded
                check_loading_memory(memory_gb, f"{k} of {len(lines)} triggers")
            self._send("\n".join(lines[k : k + TRIGGERS_PER_PROGRAM]))
        return [self.triggers[q] for q in queries]


def check_loading_memory(memory_gb: float, done: str) -> None:
    """Stop with :class:`MemoryLimitError` when this process is past ``memory_gb`` after ``done``."""
    if rss_gb() > memory_gb:
        raise MemoryLimitError(f"loading the rules into egglog passed the {memory_gb:g} GB memory cap after {done}; "
                               f"give fewer rules or a larger --memory-gb")


class HostPool:
    """The hosts of one saturation worker, at most ``size``, for graphs of at most
    :data:`HOST_MAX_NODES` nodes: a run takes the host that saves the most (rules it holds
    already, less the copies of the rules it holds and the run does not need, at the measured
    costs above), or a new one when none saves anything. A host's rules were planned on the
    e-graph of the run that loaded them (see ``EGraphRunner._load_rules``): harmless on graphs of
    a few hundred nodes, and in a sweep of the benchmark models it saves each model its rule
    loading (0.1-0.2 s); a larger graph (none of the benchmark models has 600) is run in an
    e-graph of its own (:meth:`pick` gives None), where a plan made on other sizes made a
    30,000-node chain quadratic."""

    def __init__(self, size: int = 4):
        self.size = size
        self.hosts: list[RuleHost] = []  # most recently used last
        self.spare: RuleHost | None = None  # a new e-graph made while the worker waited (see prepare)
        self.preloaded: dict[str, RuleHost] = {}  # a preload's key -> the host that holds its rules

    def prepare(self) -> None:
        """Make the next new host's e-graph now, while the worker waits for a job (egglog's e-graph
        and the language header: 4-7 ms of a small model's run)."""
        if self.spare is None:
            self.spare = RuleHost()

    @staticmethod
    def saving_ms(host: RuleHost, compiled: Compiled) -> float:
        held = sum(rule in host.rulesets for rule in set(compiled.rules))
        return LOAD_MS_PER_RULE * held - COPY_MS_PER_RULE * (len(host.rulesets) - held)

    def pick(self, compiled: Compiled, nodes: int, key: str | None = None) -> RuleHost | None:
        """The host for a run of ``compiled`` on a graph of ``nodes`` nodes, or None (its own e-graph).
        A host preloaded under the run's ``key`` holds what the graph's last run needed and nothing
        else: it is taken (``compare``'s VGG-19 took SqueezeNet's host, which held more of VGG-19's
        relevant rules but not those it wakes, and loaded them again: 18 ms)."""
        if nodes > HOST_MAX_NODES:
            return None
        best = self.preloaded.get(key) if key is not None else None
        if best not in self.hosts:
            best = max(self.hosts, key=lambda h: self.saving_ms(h, compiled), default=None)
            if best is None or self.saving_ms(best, compiled) <= 0:
                best = self._new_host()
        self._keep(best)
        return best

    def _new_host(self) -> RuleHost:
        """The spare e-graph (see :meth:`prepare`), or a new one."""
        host, self.spare = self.spare or RuleHost(), None
        return host

    def _keep(self, host: RuleHost) -> None:
        """Keep ``host`` as the most recently used, forgetting the least recently used past ``size``."""
        if host in self.hosts:
            self.hosts.remove(host)
        elif len(self.hosts) >= self.size:
            self.hosts.pop(0)
        self.hosts.append(host)
        self._forget_gone()

    def _forget_gone(self) -> None:
        """No key names a host no longer kept (its e-graph is freed with it)."""
        self.preloaded = {k: h for k, h in self.preloaded.items() if h in self.hosts}

    def preload(self, declarations: str, rules: Sequence[str], triggers: Sequence[str],
                stop: Callable[[], bool] = lambda: False, key: str | None = None) -> None:
        """Load ``rules`` and ``triggers`` into a host now (see :meth:`RuleHost.preload`), unless one
        holds all the rules (a run in this process left them), for a run that will need them (see
        :mod:`eqsat.egraph.preload`); that host is the one :meth:`pick` gives a run under ``key``.
        Under a key, a host that holds other rules too is not reused: every save of the run would
        copy them (VGG-19 in SqueezeNet's host: 14 ms of loading, 7 ms in a host of its own)."""
        needed = set(rules)
        held = next((h for h in self.hosts if needed <= h.rulesets.keys()
                     and (key is None or len(h.rulesets) == len(needed))), None)
        if held is not None:  # (its triggers may be fewer: those a run loaded after a save were popped; a few ms)
            if key is not None:
                self.preloaded[key] = held
            return
        host = self._new_host()
        if key is not None:
            self.preloaded[key] = host
        host.preload(declarations, rules, triggers, stop)  # an error leaves no host; a job's arrival a
        # partial one, kept (the job takes it: what it holds need not load again)
        self._keep(host)

    def drop(self, host: RuleHost | None) -> None:
        """Forget a host a failed run may have left in any state."""
        if host in self.hosts:
            self.hosts.remove(host)
            self._forget_gone()
