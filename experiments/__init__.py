"""The ``eqsat-lab`` command line and the experiments it runs.

``cli`` builds the command line from the ``COMMAND`` rows in ``commands/`` (one module per
subcommand, on :mod:`experiments.command`); ``runs/`` holds one module per experiment or
benchmark; ``searches`` is the search registry; ``sweep`` runs an experiment's cells in parallel
and resumes them, ``output`` writes its tables and figures; ``onnx_io``, ``exporter_models``,
``cost_table``, ``memory`` and ``blas`` serve the commands.
"""
