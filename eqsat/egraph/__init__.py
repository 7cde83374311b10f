"""TENSAT-style equality saturation on egglog, one implementation of the ``Search`` interface.

``language`` generates the egglog language from the op table (``facts``: a graph's shape facts sent
as tables, not one command each); ``rewrites`` compiles rule files
into egglog rules whose shape conditions come from the op table's shape rules on symbolic sizes,
and ``relevance`` keeps only the rules that can match a graph; ``runner`` drives iterations under
the ``limits`` in a worker process, on egglog's compiled ``bindings`` alone, its rules in a
``host`` e-graph, where ``loading`` loads each rule once its trigger matches (and ``preload``, in a
new worker, the rules the graph's last run needed, before its job comes); ``extract``,
``ilp`` (with ``cycles``, ``program``: its rows, ``split``: the exact program solved in parts at
cut e-classes, ``twins``: a part whose program repeats another's, by its ``canonical`` form, not
solved again, and ``prune``: the e-nodes whose lower bound exceeds a known term's cost, dropped
first) and ``solvers`` pick the cheapest graph (DAG-aware greedy, exact ILP) by any
``CostModel``; ``serialize``, ``view`` and ``infer`` read and write e-graphs; ``optimize`` is the
entry point; its saturation worker (a process forked when safe, see ``process``) solves half of
the exact program's parts while idle (``part_helper``) and marks what a merge judge (``judging``)
found; ``work`` is the record of what a run did.
"""
from eqsat.egraph.limits import Limits
from eqsat.egraph.optimize import EGraphSearch, optimize
from eqsat.egraph.relevance import relevant_rules
from eqsat.egraph.work import EGraphWork

__all__ = ["EGraphSearch", "EGraphWork", "Limits", "optimize", "relevant_rules"]
