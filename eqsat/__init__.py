"""eqsat: the shared tensor IR (op table, graphs, shapes, roofline cost, devices,
rule files) and the e-graph optimizer of eqsat-lab.

The IR is layered like egglog-python's API: declarations (``ops``, ``devices``,
``rules``) are data; ``graph``, ``evaluate`` and ``cost`` are the runtime that
reads them.
"""
from __future__ import annotations

from .cost import CostReport, RooflineCost, cost
from .devices import DEVICES, Device, get_device
from .domains import FLOAT, INT, Domain, modp
from .errors import EqsatError, RuleParseError, ShapeError, UnknownOpError
from .evaluate import compare_graphs, evaluate, random_leaves
from .graph import Graph, Node, input_, node, split, weight
from .ops import OP_TABLE, OpSpec, get_op
from .rules import Rule, format_rules, load_rules, parse_rules

__version__ = "0.1.0"

__all__ = [
    "CostReport", "RooflineCost", "cost", "DEVICES", "Device", "get_device", "FLOAT", "INT", "Domain", "modp",
    "EqsatError", "RuleParseError", "ShapeError", "UnknownOpError", "compare_graphs", "evaluate", "random_leaves",
    "Graph", "Node", "input_", "node", "split", "weight", "OP_TABLE", "OpSpec", "get_op", "Rule",
    "format_rules", "load_rules", "parse_rules",
]
