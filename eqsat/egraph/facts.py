"""The shape and constness facts of a graph's nodes, sent to egglog as tables.

Each fact of :meth:`~eqsat.egraph.runner.EGraphRunner._terms` was a command of its own,
``(set (dim (ref K) j) d)``, and egglog 13.2 spends about 30 µs on a command: a node has one
for its rank, one per dimension and one if it is a weight, five of every six commands of an
insertion (NASNet-A: 3,700 commands, 120 ms). egglog's ``input`` command reads a file of rows into
a table of primitives at once (3,700 rows in 2 ms), so the facts go by the node's reference number
K into ``refrank``, ``refdim`` and ``refconst``, and one run of :data:`RULESET`'s rules copies them
onto the e-classes ``(ref K)`` names: the same ``rank``, ``dim`` and ``const`` rows as before.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eqsat.egraph.language import REF, egg_string
from eqsat.ir.graph import Node

RULESET = "ref_facts"
COMMANDS_PER_PROGRAM = 32  # as the runner sends its lines (see EGraphRunner._send_lines)

DECLARATIONS = f"""
(function refrank (i64) i64 :merge old)
(function refdim (i64 i64) i64 :merge old)
(relation refconst (i64))
(ruleset {RULESET})
(rule ((= ?e ({REF} ?k)) (= ?r (refrank ?k))) ((set (rank ?e) ?r)) :ruleset {RULESET} :name "facts:rank")
(rule ((= ?e ({REF} ?k)) (= ?d (refdim ?k ?j))) ((set (dim ?e ?j) ?d)) :ruleset {RULESET} :name "facts:dim")
(rule ((= ?e ({REF} ?k)) (refconst ?k)) ((const ?e)) :ruleset {RULESET} :name "facts:const")
"""


@dataclass
class Facts:
    """Some nodes' facts, each node by the reference number it was sent as."""

    nodes: list[tuple[int, Node]] = field(default_factory=list)

    def add(self, k: int, n: Node) -> None:
        """The rank, dimensions and (for a weight) constness of ``n``, sent as ``(ref k)``."""
        self.nodes.append((k, n))

    def rows(self) -> dict[str, list[str]]:
        """The three tables' rows, as lines of their files."""
        out: dict[str, list[str]] = {"refrank": [], "refdim": [], "refconst": []}
        for k, n in self.nodes:
            for table, values in node_facts(n):
                out[f"ref{table}"].append("\t".join(map(str, (k, *values))))
        return out

    def send(self, send: Callable[[str], Any]) -> None:
        """Read the rows into their tables and copy them onto the e-classes (``send`` runs a
        program); the files live only while egglog reads them. Where the files cannot be
        written (no writable temporary folder, a full disk), the facts go as commands, as before."""
        if not self.nodes:
            return
        folder = None
        try:
            folder = tempfile.mkdtemp(prefix="eqsat-facts-")
            lines = []
            for table, rows in self.rows().items():
                if rows:
                    path = os.path.join(folder, f"{table}.tsv")
                    with open(path, "w", encoding="utf-8") as f:
                        f.write("\n".join(rows) + "\n")
                    lines.append(f"(input {table} {egg_string(path)})")
        except OSError:
            lines = None
        try:
            if lines is not None:
                send("\n".join([*lines, f"(run {RULESET} 1)"]))
                return
            commands = [line for k, n in self.nodes for line in fact_lines(n, f"({REF} {k})")]
            for k in range(0, len(commands), COMMANDS_PER_PROGRAM):
                send("\n".join(commands[k : k + COMMANDS_PER_PROGRAM]))
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def node_facts(n: Node) -> list[tuple[str, tuple[int, ...]]]:
    """The facts of ``n``, each its table (``rank``, ``dim``, ``const``) and the values after the
    node: its rank, each dimension by axis, and constness for a weight."""
    return [("rank", (len(n.shape),)), *(("dim", (j, d)) for j, d in enumerate(n.shape)),
            *([("const", ())] if n.op == "weight" else [])]


def fact_lines(n: Node, ref: str) -> list[str]:
    """The facts of ``n``, referred to as ``ref``, as commands: for terms of another table
    (:meth:`~eqsat.egraph.runner.EGraphRunner.insert_terms`' ``(term K)``), and where the
    tables' files cannot be written."""
    out = []
    for table, values in node_facts(n):
        if table == "const":
            out.append(f"(const {ref})")
        else:
            *at, value = values
            out.append(f"(set ({table} {' '.join(map(str, (ref, *at)))}) {value})")
    return out

