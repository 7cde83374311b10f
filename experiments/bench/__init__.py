"""The benchmarks' code: one module per benchmark row of :mod:`experiments.runs.benchmarks`.

``caps`` (do the e-graph's caps hold), ``chain`` (a world's rules from scratch to k ops),
``extraction`` (extraction on large e-graphs), ``fuzz`` (the hypothesis suite at scale),
``novelty`` (the incremental generator's e-graph step), ``rulegen`` (rule-generation time),
``soundness`` (can the verifier be fooled), ``walltime`` (what ``optimize`` costs a user, and how
it grows with depth, fitted in ``growth``). The rows name these modules lazily, so the CLI starts
without importing the generator, the verifier or the ILP solvers.
"""
