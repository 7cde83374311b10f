"""eqsat: the shared tensor IR (op table, graphs, shapes, roofline cost, devices,
rule files) and the e-graph optimizer of eqsat-lab.

Rooms, in the order data flows: ``ir`` (the op table, graphs, shapes, evaluation), ``rules``
(patterns, the rule-file format, the shipped rule sets), ``cost`` (the cost-model interface,
devices, the roofline and the measured CPU), ``rewriting`` (rules matched and applied on graphs
with incremental repricing, and rewriting to a fixed point: what the searches and the runtime
baseline share), ``egraph`` (the e-graph search on egglog), ``onnx`` (models in and out),
``pytorch`` (graphs run as PyTorch modules; the ``torch.compile`` backend), ``models`` (the
benchmark graphs).

The job around the searches: ``search`` is the interface every search implements, ``searches``
their registry, ``guards`` the table of reasons to keep the input, and ``pipeline``
(``optimize_model``) the whole optimize job (load, price, calibrate, search, verify, guard, write,
price the written file) as one call. ``graph_rewrite`` holds the rewrites that code builds and
verifies (whole alternative subgraphs, such as PET's, which both searches take beside the rules),
and ``identities`` one of them (``x + 0``, ``x * 1`` and the like removed where the weight is all
zeros or ones).

Shared plumbing: ``errors`` (the exceptions, each naming what is wrong and where), ``files``
(files written whole or not at all, safe with two writers), ``diskcache`` (parsed and compiled
rules cached on disk by content, so a second process redoes no work), ``heap`` (freed memory
handed back to the operating system after large sessions close) and ``refs`` (the
``"module:name"`` references by which every table's rows name code loaded late or living above).

Declarations (op rows, devices, rules) are data; the rest reads them. ``eqsat`` is the bottom
layer: it imports none of the packages built on it (``rulegen``, ``taso_baseline``, ``pet``,
``autotune``, ``experiments``); it reaches the searches through their registry, and the cost
models built on the tuners (``hypogpu``) through the device table's ``"module:name"`` rows.
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
