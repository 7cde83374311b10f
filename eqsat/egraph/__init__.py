"""TENSAT-style equality saturation on egglog: language (generated from the op table),
rewrites (rule files with symbolic shape conditions), runner (iterations under limits),
extract (DAG greedy and exact ILP by the roofline cost) and the optimize entry point."""
from eqsat.egraph.limits import Limits
from eqsat.egraph.optimize import EGraphSearch, EGraphWork, optimize, relevant_rules

__all__ = ["EGraphSearch", "EGraphWork", "Limits", "optimize", "relevant_rules"]
