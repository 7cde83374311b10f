"""The ``eqsat-lab`` subcommands, one module each.

Every module holds a ``COMMAND`` row (:class:`experiments.command.Command`: name, help, arguments,
the function to run) and is listed in ``experiments.cli.COMMAND_MODULES``; the command line is
built from those rows, so a command is added by adding a module, not by editing a parser.

- ``optimize`` — one search on a benchmark graph or an ONNX model
- ``compare`` — the main job: both searches on the benchmark suite
- ``experiment`` — ``experiment NAME``: the rows of the experiment modules in ``experiments/runs/``
- ``models`` — the benchmark graphs and their size parameters
- ``cost`` — what a graph costs on a device, per op
- ``table`` — the roofline cost of every benchmark graph on several devices
- ``dot`` — a benchmark graph as Graphviz DOT
- ``extract`` — our extractors on an egraph-serialize e-graph
- ``rules`` — ``rules check|fmt|generate|verify|collisions``: rule files and the TASO generator
- ``pet`` — ``pet demo|verify|optimize``: partially-equivalent transformations
- ``tune`` — ``tune [run|landscape|curves]``: auto-tuning a matmul, its space, tuner curves
"""
