"""What one equality-saturation run did, as the search interface reports it (:class:`EGraphWork`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from eqsat.egraph.limits import Limits, RunReport
from eqsat.graph_rewrite import RewritesUsed


@dataclass(frozen=True)
class EGraphWork:
    """What equality saturation did: the runner's report (iterations, stop reason, rules loaded),
    the e-graph's size, the extraction (method, greedy cost, ILP gap and status) and the limits."""

    limits: Limits
    report: RunReport
    eclasses: int
    greedy_us: float
    extract: str
    gap: float | None  # None: greedy only
    ilp_status: str
    rewrites: RewritesUsed = RewritesUsed()  # graph-level alternatives offered and taken

    @property
    def enodes(self) -> int:
        return self.report.enodes

    def summary(self) -> str:
        detail = (f" (gap {self.gap:.2g})" if self.gap is not None else
                  "" if self.ilp_status == "not run" else f" ({self.ilp_status})")
        used = f", {self.rewrites.summary()}" if self.rewrites.offered else ""
        return (f"{self.enodes} e-nodes, {len(self.report.iterations)} iterations, "
                f"extraction {self.extract}{detail}{used}")

    def detail_lines(self) -> list[str]:
        """One line per iteration: e-nodes, seconds and the rules that matched most."""
        lines = []
        for it in self.report.iterations:
            top = ", ".join(f"{k} {v}" for k, v in _most(it.matches, 3))
            lines.append(f"iteration {it.index:2d}: {it.enodes:7d} e-nodes {it.seconds:6.2f} s  top matches: {top}")
        return lines + self.rewrites.detail_lines()

    def to_dict(self) -> dict[str, Any]:
        rep, lim = self.report, self.limits
        return {"enodes": rep.enodes, "eclasses": self.eclasses, "greedy_us": self.greedy_us,
                "extract": self.extract, "gap": self.gap, "ilp_status": self.ilp_status,
                "iteration_limit": lim.iterations, "node_limit": lim.nodes, "time_limit": lim.seconds,
                "ilp_nodes": lim.ilp_nodes, "k_multi": lim.k_multi,
                "multi_by_need": lim.multi_by_need,
                "rules_compiled": rep.rules_compiled, "multi_compiled": rep.multi_compiled,
                "egglog_rules": rep.egglog_rules,
                "egglog_rules_loaded": rep.egglog_rules_loaded, "rules_skipped": rep.rules_skipped,
                "iterations": [asdict(it) | {"matches": dict(_most(it.matches, 15))}
                               for it in rep.iterations], **self.rewrites.to_dict()}


def _most(matches: dict[str, int], n: int) -> list[tuple[str, int]]:
    """The ``n`` rules that matched most, ties by name: the same list whatever order the rules
    were loaded in (a host may hold them from an earlier run)."""
    return sorted(matches.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
