"""Experiments and the ``eqsat-lab`` command line: scripts that build the benchmark
graphs, run the searches and tuners, and write CSV/JSON and PNG results."""
