"""One module per experiment or benchmark: each holds ``EXPERIMENTS``, rows that
``eqsat-lab experiment NAME`` runs (cells, resume, outputs come from :mod:`experiments.sweep`
and :mod:`experiments.output`), plus the cell functions those rows name. The benchmarks' rows
are in :mod:`.benchmarks`, their code in :mod:`experiments.bench` (imported only when one runs).
The code the commands run and the helpers the experiments share live outside, in ``experiments/``.

The searches, on the benchmark graphs and a cost model:

- ``alpha`` — graphs expanded and final cost against α on the case studies
- ``budget`` — best cost found against search time, per model
- ``case_studies`` — every number of the reference's case studies, measured against its claim
- ``hardware`` — the best graph per device, and what it costs on the others
- ``tuned_pricing`` — the best graph under roofline pricing and under tuned kernels (HypoGPU)
- ``pet_searches`` — TASO, TENSAT, PET and TENSAT with PET on PET's models

Real files on real runtimes:

- ``real`` — optimize for this CPU with measured costs, and measure the gain
- ``onnx_roundtrip`` — every benchmark model through ONNX and back (``experiment onnx``)
- ``onnx_suite`` — ONNX's own backend test cases through import and write
- ``zoo`` — a folder of ONNX files through both searches on both kinds of device
- ``zoo_runtime`` — what onnxruntime already does to each model, beside what the searches did
- ``ort_fusions`` — the ceiling of onnxruntime's contrib fusions on this CPU
- ``attention_ceiling`` — what fusing attention would be worth on this CPU
- ``peers`` — eqsat-lab's searches beside the tools a user would pick instead (onnxsim, ...)
- ``pytorch`` — whether the rewrites pay in PyTorch eager on this CPU
- ``gpu_check`` — the GPU check's searching half (its measuring half is ``eqsat.pytorch.gpu_check``)

Tuning:

- ``tuning`` — tuner curves, cost-model quality and transfer on HypoGPU
- ``tuning_budget`` — every tuner at small budgets, held to the bound
- ``tvm_llvm`` — our tuners against TVM's MetaSchedule on kernels compiled for this CPU
- ``tune`` — the ``eqsat-lab tune`` command's work (no experiment rows): one matmul, its landscape, curves
"""
