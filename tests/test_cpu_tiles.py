"""The knobs read as a CPU GEMM schedule and their restriction to this CPU's register file (no TVM)."""
from __future__ import annotations

import numpy as np

from autotune.registry import make_tuner
from autotune.resources import allowed
from autotune.space import Config
from autotune.tvm.cpu_tiles import CpuTiles
from autotune.workload import Workload


def cfg(**kw) -> Config:
    base = dict(split_k=4, block_m=64, block_n=32, block_k=256, num_warps=4, num_stages=2, group_m=1)
    return Config(**(base | kw))


AVX2 = CpuTiles(8, 16)
W512 = Workload(512, 512, 512)


def fits(config: Config, workload: Workload = W512, cpu: CpuTiles = AVX2) -> bool:
    return bool(cpu.fits(np.array([config.as_tuple()]), workload)[0])


def test_register_tiles_that_spill_or_leave_a_tail_are_hopeless():
    assert fits(cfg()) and fits(cfg(num_stages=3, split_k=1), Workload(512, 768, 512))
    assert not fits(cfg(num_warps=8, num_stages=2))  # 16 accumulators + 2 + 1 > 16 ymm registers
    assert fits(cfg(num_warps=8, num_stages=2), cpu=CpuTiles(16, 32))  # AVX-512 has 32
    assert not fits(cfg(num_stages=3))  # 24 floats do not divide 512 columns
    assert not fits(cfg(), Workload(514, 512, 512))  # 4 rows do not divide 514
    assert not fits(cfg(num_warps=2, num_stages=4, block_n=16))  # a 32-float register tile in a 16-column tile
    assert not fits(cfg(num_warps=32, num_stages=1, block_m=16))  # more register rows than the row tile
    assert not fits(cfg(split_k=16), Workload(512, 512, 24))  # a k unroll of 16 in 24
    assert AVX2.registers_needed(np.array([cfg().as_tuple()]))[0] == 4 * 2 + 2 + 1


def test_tiles_read_the_knobs_and_clamp_them_to_the_problem():
    t = AVX2.tiles(cfg(group_m=2).as_tuple(), 512, 512, 512)
    assert (t.block_m, t.block_n, t.block_k, t.rows, t.vectors, t.unroll_k, t.width, t.fuse_columns) == (
        64, 32, 256, 4, 2, 4, 16, True)
    small = AVX2.tiles(cfg(block_m=256, block_n=256, num_stages=7, split_k=16).as_tuple(), 40, 24, 8)
    assert (small.block_m, small.vectors, small.width, small.block_n, small.block_k, small.unroll_k) == (
        40, 3, 24, 24, 8, 8)


def test_the_space_drops_duplicate_values_and_tuners_only_propose_fitting_configs():
    w = Workload(128, 64, 32)
    space = AVX2.space(w)
    names = [k.name for k in space.knobs]
    values = dict(zip(names, (k.values for k in space.knobs)))
    assert values["block_m"] == (16, 32, 64, 128) and values["block_n"] == (16, 32, 64)
    assert values["block_k"] == (16, 32) and values["group_m"] == (1, 2)
    mask = allowed(space, space.all_values())
    assert 0 < mask.sum() < len(space) and (mask == AVX2.fits(space.all_values(), w)).all()
    for name in ("random", "autotvm", "ansor"):
        batch = make_tuner(name, space=space).start(w, seed=1).next_batch(16)
        assert batch and fits_all(batch, w), name


def fits_all(configs: list[Config], w: Workload) -> bool:
    return bool(AVX2.fits(np.array([c.as_tuple() for c in configs]), w).all())
