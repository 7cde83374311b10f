"""One module per experiment or benchmark: each holds ``EXPERIMENTS``, rows that
``eqsat-lab experiment NAME`` runs (cells, resume, outputs come from :mod:`experiments.sweep`
and :mod:`experiments.output`), plus the cell functions those rows name. The benchmarks' rows
are in :mod:`.benchmarks`, their code in :mod:`experiments.bench` (imported only when one runs).
The code the commands run and the helpers the experiments share live outside, in ``experiments/``."""
