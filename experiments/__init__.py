"""The ``eqsat-lab`` command line and the experiments it runs.

``cli`` builds the command line from the ``COMMAND`` rows in ``commands/`` (one module per
subcommand, on :mod:`experiments.command`); ``runs/`` holds one module per experiment
(its ``EXPERIMENTS`` rows), ``bench/`` the benchmarks' code (their rows are in ``runs/benchmarks``);
``searches`` is the search registry; ``sweep`` runs an experiment's cells in parallel and resumes
them, ``output`` writes its tables and figures; ``compare`` is the ``compare`` command's job and
the model check the experiments share, ``pet_demo`` the ``pet demo|verify`` commands'; ``onnx_io``,
``cost_table``, ``memory`` and ``blas`` serve the commands; ``zoo/`` holds the zoo's models.
"""
