"""eqsat: the shared tensor IR (op table, graphs, shapes, roofline cost, devices,
rule files) and the e-graph optimizer of eqsat-lab.

Rooms, in the order data flows: ``ir`` (the op table, graphs, shapes, evaluation), ``rules``
(patterns, the rule-file format, the shipped rule sets), ``cost`` (the cost-model interface,
devices, the roofline and the measured CPU), ``egraph`` (the e-graph search on egglog), ``onnx``
(models in and out), ``models`` (the benchmark graphs); ``search`` is the interface every
search implements, ``searches`` their registry, ``guards`` the table of reasons to keep the input,
and ``pipeline.optimize_model`` the whole optimize job (load, price, calibrate, search, verify,
guard, write, price the written file) as one call. Declarations (op rows, devices, rules) are data; the rest reads them.
"""
from __future__ import annotations

from eqsat.cost.devices import DEVICES, Device, get_device
from eqsat.cost.roofline import CostReport, RooflineCost
from eqsat.errors import EqsatError, RuleParseError, ShapeError, UnknownOpError
from eqsat.ir.domains import FLOAT, INT, Domain, modp
from eqsat.ir.evaluate import compare_graphs, evaluate, random_leaves
from eqsat.ir.graph import Graph, Node, input_, node, split, weight
from eqsat.ir.ops import OP_TABLE, OpSpec, get_op
from eqsat.rules.rulefile import Rule, format_rules, load_rules, parse_rules

__version__ = "0.1.0"

__all__ = [
    "CostReport", "RooflineCost", "DEVICES", "Device", "get_device", "FLOAT", "INT", "Domain", "modp",
    "EqsatError", "RuleParseError", "ShapeError", "UnknownOpError", "compare_graphs", "evaluate", "random_leaves",
    "Graph", "Node", "input_", "node", "split", "weight", "OP_TABLE", "OpSpec", "get_op", "Rule",
    "format_rules", "load_rules", "parse_rules",
]
