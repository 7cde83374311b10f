"""Kernel auto-tuning of one 7-knob matmul schedule space, on a simulated GPU (HypoGPU) or this CPU.

``space``, ``resources`` and ``workload`` declare what can be tuned; ``hypogpu`` is the hidden
performance model and ``measure`` its noisy measurer (``cpu`` times a real tiled kernel, run by
``minitriton``, behind the same interface); ``tuners`` is the incremental tuner interface with
Triton-style autotune, grid and random search, and ``autotvm``, ``ansor`` (with ``sketch``) and
``robust`` are the learned tuners, helped by ``features``, ``cost_model`` and the datasheet
estimate in ``analytic``; ``registry`` names every tuner; ``scheduler`` shares a budget across
tasks; ``oracle``, ``evaluate``, ``landscape`` and ``model_quality`` read the hidden model to
judge tuners, never to tune. ``tuned_cost`` is the ``hypogpu`` device of ``eqsat``'s device table
(its row names it): every GEMM priced by the kernel a tuner finds, kept by shape in
``tuned_records``. ``tvm/`` (the ``tvm`` extra) holds real kernels: the knobs compiled
by TVM for this CPU and timed, and TVM's own MetaSchedule as a tuner.
"""
