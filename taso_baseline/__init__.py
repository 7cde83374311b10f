"""TASO baseline: the α-backtracking search over the graph rewrites the rules make.

``pair_move`` builds the two-output substitutions and ``search`` is TASO's Algorithm 2. Matching
rules at a node and applying a match with incremental repricing are generic rewriting, shared with
``eqsat``, and live in :mod:`eqsat.rewriting`. The rules it reads are made by :mod:`rulegen`.
Imports the IR and the rewriting machinery from ``eqsat``; ``eqsat`` never imports it and reaches
the search through its registry (:mod:`eqsat.searches`).
"""
