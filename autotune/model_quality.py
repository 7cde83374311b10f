"""How well a cost model ranks configs it has not seen (docs/reference.md).

Train on n random measured configs of a shape, score 3000 other legal configs, and report
Spearman's ρ between predicted and true throughput and recall@30 (how many of the model's top
30 are among the true top 30). Reads the hidden model: this is evaluation, not tuning.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from autotune import hypogpu
from autotune.cost_model import XGBCostModel, normalized_throughput
from autotune.features import featurize
from autotune.resources import legal
from autotune.space import SPACE
from autotune.workload import Workload


@dataclass(frozen=True)
class Quality:
    workload: str
    features: str
    objective: str
    samples: int
    spearman: float
    recall_at_30: float


def model_quality(workload: Workload, features: str, objective: str, samples: int, test: int = 3000,
                  seed: int = 0) -> Quality:
    rng = np.random.default_rng(seed)
    allv = SPACE.all_values()
    pool = np.flatnonzero(legal(allv))
    picked = rng.choice(pool, size=samples + test, replace=False)
    train, held = picked[:samples], picked[samples:]
    t = hypogpu.time_us(workload, allv[picked])
    t_train, t_test = t[:samples], t[samples:]
    model = XGBCostModel(objective, random_state=seed).fit(
        featurize(features, workload, allv[train]), normalized_throughput(t_train, np.zeros(samples)))
    pred = model.predict(featurize(features, workload, allv[held]))
    rho = float(spearmanr(pred, -t_test).correlation)
    top_pred, top_true = set(np.argsort(-pred)[:30]), set(np.argsort(t_test)[:30])
    return Quality(workload.name or workload.key, features, objective, samples, rho, len(top_pred & top_true) / 30)


def quality_table(
    workloads: Sequence[Workload], samples: Sequence[int] = (64, 256, 1024), seed: int = 0
) -> list[Quality]:
    return [
        model_quality(w, f, o, n, seed=seed)
        for w in workloads
        for n in samples
        for f in ("knob", "program")
        for o in ("rank", "reg")
    ]


@dataclass(frozen=True)
class PartialQuality:
    workload: str
    decided: int  # knobs decided, in the order split-K, BLOCK_M, ..., GROUP_M
    pairwise_accuracy: float  # P(model orders two programs as their final times do); 0.5 is chance
    recall_at_10: float


def partial_program_quality(
    workload: Workload, train: int = 2000, test: int = 1000, pairs: int = 20000, seed: int = 0
) -> list[PartialQuality]:
    """Ansor's argument against pruning partial programs (OSDI'20 §2): a model
    trained on complete programs scores programs with only the first k decisions made (the rest
    at "not done yet" defaults) against how fast they end up."""
    from autotune.ansor import PARTIAL_DEFAULTS

    rng = np.random.default_rng(seed)
    allv = SPACE.all_values()
    pool = np.flatnonzero(legal(allv))
    picked = rng.choice(pool, size=train + test, replace=False)
    t = hypogpu.time_us(workload, allv[picked])
    model = XGBCostModel("reg", random_state=seed).fit(
        featurize("program", workload, allv[picked[:train]]), normalized_throughput(t[:train], np.zeros(train))
    )
    final, t_test = allv[picked[train:]], t[train:]
    i, j = rng.integers(0, test, size=(2, pairs))
    keep = t_test[i] != t_test[j]
    i, j = i[keep], j[keep]
    defaults = np.array([PARTIAL_DEFAULTS[k.name] for k in SPACE.knobs])
    out = []
    for k in range(len(SPACE.knobs) + 1):
        partial = final.copy()
        partial[:, k:] = defaults[k:]
        p = model.predict(featurize("program", workload, partial))
        acc = float(np.mean((p[i] > p[j]) == (t_test[i] < t_test[j])))
        top_pred = set(np.argsort(-p, kind="stable")[:10])
        top_true = set(np.argsort(t_test)[:10])
        out.append(PartialQuality(workload.name or workload.key, k, acc, len(top_pred & top_true) / 10))
    return out
