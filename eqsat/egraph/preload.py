"""A graph's rules, loaded into egglog by a new saturation worker before its first job comes.

egglog takes 0.4-1.1 ms to load one rule, and a fresh process loads every rule a model wakes
(SqueezeNet: 37, 45 ms of its 0.11 s search; NASNet-A: 0.10 s). A run in a host leaves the rules
it woke loaded there (``RuleHost``), so a later run in the same process pays nothing; a new
process had to load them all again. Now, as soon as a run in a host answers, the saturation
worker records what the run will leave there (``RunRules.left``; the parent may exit before the
host is put back) under a key of the graph's signature (:func:`remember`, :func:`preload_key`);
the next ``optimize`` of that graph sends the key as soon as the model is built
(``EGraphSearch.prepare``), and the worker, once its imports are done, loads those rules and
triggers into a host (:func:`preload`), rule by rule, until the job comes: a preload never holds
a job back by more than one rule's load. The parent imports the extraction's modules meanwhile
(``EGraphSearch.prepare``: 0.12-0.16 s, once a process), so the preload is done before the
job comes: a fresh run's rule loading (medians of two runs, twice, before → after) went 0.046 →
0.011 s on SqueezeNet, 0.038 → 0.012 s on ResNeXt-50, 0.098 → 0.030 s on NASNet-A, 0.063 →
0.034 s on NasRNN, 0.077 → 0.015 s on Inception-v3, 0.018 → 0.008 s on VGG-19. Which rules are
loaded changes no result: a rule's loading is invisible to the matches (see :mod:`.loading`),
and an entry for another rule set only leaves rules the run does not read.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from eqsat.diskcache import DiskMemo
from eqsat.egraph.relevance import graph_signature
from eqsat.ir.graph import Graph

HOST_RULES = DiskMemo("host-rules", shard=lambda key: key[:12])  # one small file per graph


def preload_key(graph: Graph, multi: bool) -> str:
    """The key of what runs on ``graph`` (with multi-pattern rules or not) leave in a host."""
    text = "\n".join([repr(multi), *graph_signature(graph)])
    return hashlib.sha256(text.encode()).hexdigest()


def remember(key: str, declarations: str, rules: list[str], triggers: list[str]) -> None:
    """Record the rules and triggers a run leaves in its host (``RunRules.left``), with the
    declarations they need, under ``key``."""
    entry = [declarations, rules, triggers]
    if HOST_RULES.get(key) != entry:
        HOST_RULES.put(key, entry)
        HOST_RULES.save()


def preload(key: str, hosts: Any, stop: Callable[[], bool] = lambda: False) -> None:
    """Load what the last run under ``key`` left in its host into one of ``hosts`` (a ``HostPool``),
    rule by rule until ``stop()`` (a job came: the rest load as the run wakes them)."""
    entry = HOST_RULES.get(key)
    if entry is not None:
        declarations, rules, triggers = entry
        hosts.preload(declarations, rules, triggers, stop, key)
