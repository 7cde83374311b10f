"""``eqsat-lab experiment case-studies``: every number of docs/reference.md's case studies, measured.

The claims are data (:data:`CLAIMS`): what the reference says, the setting that measures it, the
expected value, how close counts, and how to measure it on a :class:`Lab` (which runs each search
once and keeps it). Each is printed beside its measured value with ✔ or ✗; any ✗ exits 1, so a
drift of the searches, the cost model, PET's verifier or the tuning models shows. The α searches
run the ``case-study`` preset (single-output rules plus the pair move, as the case studies did);
the quick claims (``--quick``, a few seconds) are a test, the rest (the ResNet block's climb at
α = 1.5, the task scheduler's runs) take about a minute more.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from eqsat.cost.devices import REFERENCE_DEVICES
from experiments.command import Experiment
from experiments.output import write_json

H100, WEAK = REFERENCE_DEVICES  # the reference pair the case studies price on

PRESET = "case-study"


class Lab:
    """Runs each measurement the claims need once (searches, PET's verification, the tuning models)."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, float, str], Any] = {}

    @cached_property
    def expander(self) -> Any:
        from eqsat.rules.rulesets import default_rules
        from taso_baseline.search import AlphaSearch, Expander

        lim = AlphaSearch.presets[PRESET]
        return Expander(default_rules(AlphaSearch.default_rule_sets), multi=lim.multi, pair_move=lim.pair_move)

    def alpha(self, model: str, alpha: float, device: str = H100) -> Any:
        """The α search of ``model`` with the case-study preset at ``alpha`` on ``device``."""
        from dataclasses import replace

        from eqsat.models import build
        from taso_baseline.search import AlphaSearch, alpha_search

        key = (model, alpha, device)
        if key not in self._runs:
            limits = replace(AlphaSearch().limits(PRESET, model), alpha=alpha)
            self._runs[key] = alpha_search(build(model), cost=device, limits=limits, expander=self.expander)
        return self._runs[key]

    def price(self, graph: Any, device: str) -> float:
        from eqsat.cost.registry import cost_model

        return cost_model(device).graph_time_us(graph)

    def worst(self, model: str, alpha: float, device: str = H100) -> Any:
        """The worst step (largest ratio to the best before it) on the path to the best graph."""
        return max(self.alpha(model, alpha, device).work.path, key=lambda s: s.ratio_to_best)

    def found(self, model: str, alpha: float, device: str, target: tuple[str, float, str]) -> float:
        """Best cost at ``alpha`` over the cost on ``device`` of the best graph the ``target`` search found."""
        return self.alpha(model, alpha, device).best_us / self.price(self.alpha(*target).best, device)

    @cached_property
    def pet(self) -> Any:
        from pet.programs import ConvProblem, SpatialSplit
        from pet.verify import correction_kernels, verify

        v = verify(ConvProblem(N=2, C=3, O=4, H=6, W=8), SpatialSplit("W", 2))
        flipped = verify(ConvProblem(N=2, C=3, O=4, H=6, W=8), SpatialSplit("W", 2, flip_kernel=True))
        return v, correction_kernels(v), flipped

    def pet_overhead(self, width: int) -> float:
        from pet.programs import ConvProblem, SpatialSplit
        from pet.verify import correction_kernels, overhead, verify

        v = verify(ConvProblem(1, 2, 2, 6, width), SpatialSplit("W", 2), tests=1)
        return overhead(v, correction_kernels(v))

    @cached_property
    def square(self) -> Any:
        from autotune.landscape import summary
        from autotune.workload import SHAPES

        return summary(SHAPES["square"])

    @cached_property
    def stages(self) -> dict[int, int]:
        from autotune.landscape import best_stages, stages_vs_block_k
        from autotune.workload import SHAPES

        return {k: v for k, v in best_stages(stages_vs_block_k(SHAPES["square"])).items() if k <= 128}

    @cached_property
    def cross(self) -> list[float]:
        from autotune.landscape import cross_shape, off_diagonal
        from autotune.workload import SHAPES

        return off_diagonal(cross_shape([SHAPES[n] for n in ("square", "prefill", "decode", "wgrad", "ffn_down")]))

    @cached_property
    def dynamic_m(self) -> float:
        from autotune.landscape import dynamic_m

        last = dynamic_m()[-1]
        return last.with_m16_config_us / last.optimum_us

    @cached_property
    def fp16_error(self) -> float:
        from autotune.minitriton import check
        from autotune.space import Config

        configs = [Config(1, 64, 64, 32, 4, 2, 1), Config(4, 32, 64, 16, 4, 2, 8), Config(2, 16, 256, 128, 4, 1, 4)]
        return max(a.max_rel_error for a in check(configs))

    @cached_property
    def limited_ansor(self) -> float:
        from autotune.ansor import Ansor
        from autotune.evaluate import fraction_after
        from autotune.measure import SimulatedMeasurer
        from autotune.workload import SHAPES

        w = SHAPES["wgrad"]
        return statistics.median(fraction_after(Ansor(variant="limited").tune(w, 256, SimulatedMeasurer(seed=s),
                                                                             seed=s), 256) for s in range(3))

    @cached_property
    def tasks(self) -> Any:
        from autotune.scheduler import toy_network

        return toy_network()

    def top4_share(self) -> float:
        from autotune.evaluate import optimum_us

        cost = sorted((t.weight * optimum_us(t.workload) for t in self.tasks), reverse=True)
        return sum(cost[:4]) / sum(cost)

    def schedule(self, strategy: str, similarity: str) -> Any:
        key = ("scheduler", 0.0, f"{strategy}/{similarity}")
        if key not in self._runs:
            from autotune.ansor import Ansor
            from autotune.scheduler import TaskScheduler

            with tempfile.TemporaryDirectory() as work:
                s = TaskScheduler(self.tasks, Ansor, strategy=strategy, similarity=similarity, unit_trials=32,
                                  seed=0, workdir=Path(work))
                self._runs[key] = s.run(44)
        return self._runs[key]

    def largest_receiver(self, strategy: str, similarity: str) -> str:
        units = self.schedule(strategy, similarity).units
        return max(units, key=units.get)

    def optimism(self) -> float:
        from autotune.scheduler import winners_curse

        return statistics.mean(r.optimism for r in winners_curse(self.schedule("round-robin", "all"), self.tasks))


@dataclass(frozen=True)
class Claim:
    """One number of docs/reference.md: its name, the setting measured, the expected value, the
    check (``≈``: within ``tol``, relative when ``rel``; ``≥``/``≤``: a bound; ``in``: within the
    ``(low, high)`` of ``expected``; ``rising``: a strictly rising sequence, like ``expected``;
    ``=``: the same value, for names and sets), and how to measure
    it. ``quick`` claims run in the test."""

    name: str
    setting: str
    expected: Any
    check: str
    measure: Callable[[Lab], Any]
    tol: float = 0.0
    rel: bool = False
    quick: bool = True
    unit: str = ""

    def holds(self, value: Any) -> bool:
        if self.check == "=":
            return bool(value == self.expected)
        if self.check == "≥":
            return bool(value >= self.expected)
        if self.check == "≤":
            return bool(value <= self.expected)
        if self.check == "in":
            return bool(self.expected[0] <= value <= self.expected[1])
        if self.check == "rising":
            return all(a < b for a, b in zip(value, value[1:]))
        bound = self.tol * abs(self.expected) if self.rel else self.tol
        return bool(abs(value - self.expected) <= bound + 1e-12)

    def expected_text(self) -> str:
        if self.check == "≈":
            rel = f"{self.tol:.1%}" if self.tol >= 1e-3 else f"{self.tol:.0e} relative"
            tol = rel if self.rel else f"{self.tol:g}"
            return f"{_fmt(self.expected)}{self.unit} ± {tol}"
        if self.check == "in":
            return f"{_fmt(self.expected[0])} to {_fmt(self.expected[1])}{self.unit}"
        if self.check == "rising":
            return f"rising, like {' / '.join(map(str, self.expected))}"
        return f"{self.check} {_fmt(self.expected)}{self.unit}" if self.check != "=" else _fmt(self.expected)


def _fmt(v: Any) -> str:
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
        return " / ".join(map(str, v))
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) >= 1e-2 or v == 0 else f"{v:.2e}"
    return str(v)


def _cost(model: str, device: str = H100) -> Callable[[Lab], float]:
    def measure(lab: Lab) -> float:
        from eqsat.models import build

        return lab.price(build(model), device)
    return measure


def _expansions(lab: Lab) -> tuple[int, ...]:
    return tuple(lab.alpha("resnet_block", a).work.expanded for a in (1.0, 1.3, 1.5))


H100_15 = ("resnet_block", 1.5, H100)
US = " µs"
RESNET, QKV, LORA = "ResNet block", "QKV", "LoRA"
CLAIMS: tuple[Claim, ...] = (
    Claim(f"{RESNET}: input", "roofline h100", 85.6, "≈", _cost("resnet_block"), 0.005, True, unit=US),
    Claim(f"{RESNET}: greedy stops at fused convs", "α=1.0 h100", 62.2, "≈",
          lambda lab: lab.alpha("resnet_block", 1.0).best_us, 0.005, True, unit=US),
    Claim(f"{RESNET}: greedy expansions", "α=1.0 h100", 3, "=",
          lambda lab: lab.alpha("resnet_block", 1.0).work.expanded),
    Claim(f"{RESNET}: α=1.05 misses the merge", "α=1.05 h100", 62.2, "≈",
          lambda lab: lab.alpha("resnet_block", 1.05).best_us, 0.005, True, quick=False, unit=US),
    Claim(f"{RESNET}: α=1.3 misses the merge", "α=1.3 h100", 62.2, "≈",
          lambda lab: lab.alpha("resnet_block", 1.3).best_us, 0.005, True, quick=False, unit=US),
    Claim(f"{RESNET}: α=1.5 reaches the merged conv", "α=1.5 h100", 57.8, "≈",
          lambda lab: lab.alpha(*H100_15).best_us, 0.005, True, quick=False, unit=US),
    Claim(f"{RESNET}: the worse step", "α=1.5 h100, worst step", 81.6, "≈",
          lambda lab: lab.worst(*H100_15).cost_us, 0.005, True, quick=False, unit=US),
    Claim(f"{RESNET}: the worse step's ratio", "α=1.5 h100, worst step", 1.31, "≈",
          lambda lab: lab.worst(*H100_15).ratio_to_best, 0.01, quick=False, unit="x"),
    Claim(f"{RESNET}: the worse step is the pair move", "α=1.5 h100, worst step", "pair-move(conv2d)", "=",
          lambda lab: lab.worst(*H100_15).rule, quick=False),
    Claim(f"{RESNET}: graphs expanded grow with α (the shape)", "α=1.0/1.3/1.5 h100", (3, 33, 150), "rising",
          _expansions, quick=False),
    Claim(f"{RESNET}: h100's best on weak over weak's best", "α=1.5 h100 vs α=1.05 weak", 1.34, "≈",
          lambda lab: lab.price(lab.alpha(*H100_15).best, WEAK) / lab.alpha("resnet_block", 1.05, WEAK).best_us,
          0.02, quick=False, unit="x"),
    Claim(f"{QKV}: input", "roofline h100", 42.3, "≈", _cost("qkv"), 0.005, True, unit=US),
    Claim(f"{QKV}: α=1.05 misses the merge on h100", "α=1.05 h100", 42.3, "≈",
          lambda lab: lab.alpha("qkv", 1.05).best_us, 0.005, True, unit=US),
    Claim(f"{QKV}: three matmuls merged", "α=1.5 h100", 34.2, "≈", lambda lab: lab.alpha("qkv", 1.5).best_us,
          0.005, True, unit=US),
    Claim(f"{QKV}: the worse step's ratio on h100", "α=1.5 h100, worst step", 1.11, "≈",
          lambda lab: lab.worst("qkv", 1.5).ratio_to_best, 0.005, unit="x"),
    Claim(f"{QKV}: α=1.05 suffices on weak", "α=1.05 weak / h100's merged graph on weak", 1.0, "≈",
          lambda lab: lab.found("qkv", 1.05, WEAK, ("qkv", 1.5, H100)), 1e-9, True, unit="x"),
    Claim(f"{QKV}: the worse step's ratio on weak", "α=1.05 weak, worst step", 1.017, "≈",
          lambda lab: lab.worst("qkv", 1.05, WEAK).ratio_to_best, 0.002, unit="x"),
    Claim(f"{LORA}: input", "roofline h100", 39.7, "≈", _cost("lora"), 0.005, True, unit=US),
    Claim(f"{LORA}: α=1.05 misses the fold", "α=1.05 h100", 39.7, "≈", lambda lab: lab.alpha("lora", 1.05).best_us,
          0.005, True, unit=US),
    Claim(f"{LORA}: α=1.3 folds the adapter", "α=1.3 h100", 21.4, "≈", lambda lab: lab.alpha("lora", 1.3).best_us,
          0.005, True, unit=US),
    Claim(f"{LORA}: associativity step", "α=1.3 h100, worst step", 50.5, "≈",
          lambda lab: lab.worst("lora", 1.3).cost_us, 0.005, True, unit=US),
    Claim(f"{LORA}: associativity ratio on h100 (α > 1.27)", "α=1.3 h100, worst step", 1.27, "≈",
          lambda lab: lab.worst("lora", 1.3).ratio_to_best, 0.005, unit="x"),
    Claim(f"{LORA}: α=1.5 misses on weak", "α=1.5 weak / the folded graph on weak", 1.01, "≥",
          lambda lab: lab.found("lora", 1.5, WEAK, ("lora", 1.3, H100)), unit="x"),
    Claim(f"{LORA}: α=2.0 folds on weak", "α=2.0 weak / the folded graph on weak", 1.0, "≈",
          lambda lab: lab.found("lora", 2.0, WEAK, ("lora", 1.3, H100)), 1e-9, True, unit="x"),
    Claim(f"{LORA}: associativity ratio on weak (α > 1.92)", "α=2.0 weak, worst step", 1.92, "≈",
          lambda lab: lab.worst("lora", 2.0, WEAK).ratio_to_best, 0.01, unit="x"),
    Claim("PET: width boxes, original", "conv N2 C3 O4 6x8, split W in 2", "[(0, 0), (1, 6), (7, 7)]", "=",
          lambda lab: str(lab.pet[0].axis_boxes["W"]["original"])),
    Claim("PET: width boxes, transformed", "same", "[(0, 0), (1, 2), (3, 3), (4, 4), (5, 6), (7, 7)]", "=",
          lambda lab: str(lab.pet[0].axis_boxes["W"]["transformed"])),
    Claim("PET: regions", "same", 18, "=", lambda lab: len(lab.pet[0].regions)),
    Claim("PET: positions checked", "same", "66 of 384", "=",
          lambda lab: f"{lab.pet[0].positions_checked} of {lab.pet[0].positions_total}"),
    Claim("PET: non-equivalent regions, in columns", "same", "6 in [(3, 3), (4, 4)]", "=",
          lambda lab: f"{len(lab.pet[0].non_equivalent)} in {sorted({r.box[3] for r in lab.pet[0].non_equivalent})}"),
    Claim("PET: a flipped kernel is wrong in", "same, kernel flipped", "18 of 18", "=",
          lambda lab: f"{len(lab.pet[2].non_equivalent)} of {len(lab.pet[2].regions)}"),
    Claim("PET: the correction kernel", "same", "reads W (2, 5), writes W (3, 4)", "=",
          lambda lab: "; ".join(f"reads W {k.in_box[1]}, writes W {k.out_box[1]}" for k in lab.pet[1])),
    Claim("PET: overhead at width 8", "conv N1 C2 O2 6x8", 0.25, "≈", lambda lab: lab.pet_overhead(8), 1e-9),
    Claim("tuning: median legal config over the optimum (reference 5x)", "HypoGPU square; band of tests/test_autotune",
          3.0, "≥", lambda lab: lab.square.median_slowdown, unit="x"),
    Claim("tuning: configs within 5% (reference 24)", "HypoGPU square; band of tests/test_autotune", (10, 60), "in",
          lambda lab: lab.square.within_5pct),
    Claim("tuning: best num_stages per BLOCK_K", "HypoGPU square", "{16: 3, 32: 2, 64: 2, 128: 1}", "=",
          lambda lab: str(lab.stages)),
    Claim("tuning: best configs across shapes, least", "5 named shapes", 1.06, "≈", lambda lab: min(lab.cross),
          0.05, unit="x"),
    Claim("tuning: best configs across shapes, median (reference 2.35x)", "5 named shapes; band of tests/test_autotune",
          (1.8, 3.5), "in", lambda lab: statistics.median(lab.cross), unit="x"),
    Claim("tuning: best configs across shapes, most (reference 6.66x)", "5 named shapes; band of tests/test_autotune",
          5.0, "≥", lambda lab: max(lab.cross), unit="x"),
    Claim("tuning: M=16's config at M=256", "dynamic M", 3.05, "≈", lambda lab: lab.dynamic_m, 0.1, unit="x"),
    Claim("tuning: FP16 rounding of the CPU kernel", "3 configs, 3.6e-4 to 3.8e-4", 3.7e-4, "≈",
          lambda lab: lab.fp16_error, 0.1e-4),
    Claim("tuning: Ansor's limited space on wgrad", "256 trials, median of 3 seeds", 0.566, "≈",
          lambda lab: lab.limited_ansor, 0.05, quick=False),
    Claim("scheduler: toy network tasks", "toy_network()", 11, "=", lambda lab: len(lab.tasks)),
    Claim("scheduler: share of the top 4 tasks (reference 75%)", "at each task's optimum", 0.75, "≥",
          lambda lab: lab.top4_share()),
    Claim("scheduler: all-similar sends most units to", "gradient, all matmuls, 44 units", "decode_ffn_up", "=",
          lambda lab: lab.largest_receiver("gradient", "all"), quick=False),
    Claim("scheduler: intensity similarity sends most units to a prefill task", "gradient, within 4x intensity",
          "yes", "=", lambda lab: "yes" if lab.largest_receiver("gradient", "intensity").startswith("prefill")
          else lab.largest_receiver("gradient", "intensity"), quick=False),
    Claim("scheduler: winner's curse, measured bests optimistic by", "round-robin, 44 units", 0.024, "≈",
          lambda lab: lab.optimism(), 0.01, quick=False),
)


@dataclass(frozen=True)
class Checked:
    """A claim with its measured value, whether it holds, and the seconds its measurement took."""

    claim: Claim
    value: Any
    ok: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        return {"claim": c.name, "setting": c.setting, "expected": c.expected_text(), "measured": _fmt(self.value),
                "ok": self.ok, "quick": c.quick, "seconds": round(self.seconds, 3)}


def check_claims(claims: Sequence[Claim] | None = None, quick: bool = False, lab: Lab | None = None) -> list[Checked]:
    """Each claim (default :data:`CLAIMS`; only the quick ones with ``quick``) measured on one shared :class:`Lab`."""
    lab = lab or Lab()
    out = []
    for c in CLAIMS if claims is None else claims:
        if quick and not c.quick:
            continue
        t0 = time.perf_counter()
        value = c.measure(lab)
        out.append(Checked(c, value, c.holds(value), time.perf_counter() - t0))
    return out


def marks() -> tuple[str, str]:
    """✔ and ✗, or ASCII where stdout cannot encode them."""
    try:
        "✔✗≈≥≤±µ".encode(sys.stdout.encoding or "ascii")
        return "✔", "✗"
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL"


def report(rows: Sequence[Checked]) -> str:
    good, bad = marks()
    w = max(len(r.claim.name) for r in rows)
    s = max(len(r.claim.setting) for r in rows)
    e = max(len(r.claim.expected_text()) for r in rows)
    lines = [f"{'claim':{w}s}  {'setting':{s}s}  {'expected':{e}s}  measured"]
    for r in rows:
        lines.append(f"{r.claim.name:{w}s}  {r.claim.setting:{s}s}  {r.claim.expected_text():{e}s}  "
                     f"{_fmt(r.value) + r.claim.unit if isinstance(r.value, float) else _fmt(r.value)}  "
                     f"{good if r.ok else bad}")
    failed = sum(not r.ok for r in rows)
    lines.append(f"{len(rows) - failed} of {len(rows)} claims hold" + (f"; {failed} do not" if failed else ""))
    if not good.isascii():
        return "\n".join(lines)
    ascii_for = {"≈": "~", "≥": ">=", "≤": "<=", "±": "+-", "µ": "u", "α": "alpha"}
    text = "\n".join(lines).translate(str.maketrans(ascii_for))
    return text.encode("ascii", "replace").decode()


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="only the quick claims (a few seconds; the CI test)")
    p.add_argument("--out", default=None, help="also write case_studies.json into this folder")


def _run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    rows = check_claims(quick=args.quick)
    print(report(rows))
    print(f"alpha searches: preset {PRESET}; {time.perf_counter() - t0:.1f} s")
    if args.out:
        write_json(Path(args.out) / "case_studies.json", {"preset": PRESET, "claims": [r.to_dict() for r in rows]})
    return 0 if all(r.ok for r in rows) else 1


EXPERIMENTS = (Experiment("case-studies", "every number of docs/reference.md's case studies beside its measured "
                          "value (✔/✗, exit 1 on any ✗)", _add_arguments, _run, outputs=("case_studies.json",),
                          doc="README.md#case-studies-claim-by-claim"),)
