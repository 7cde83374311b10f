"""Real kernels: the tuners' knobs compiled by TVM for this CPU and timed, and TVM's own tuner.

``compiled`` is the builder/runner measurer over a compiled :class:`~autotune.tvm.compiled.Target`
(its ``TARGETS`` table); ``target`` is the ``tvm-llvm`` target, the knobs as the classic CPU GEMM
schedule, restricted to this CPU's register file by ``cpu_tiles``; ``kernels`` holds the kernels it
compiles as data (matmul, batched matmul, 3x3 conv); ``metaschedule`` is TVM's MetaSchedule as a
tuner row; ``budgets`` reads any tuner at several trial budgets with its best re-measured, each
reading a ``checkpoint``. TVM itself (the ``'.[tvm]'`` extra) is imported only inside the functions
that compile, so every module here imports without it.
"""
