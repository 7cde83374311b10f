"""Tuner settings are frozen config values with named presets; keywords still override a field."""
from __future__ import annotations

import dataclasses

import pytest

from autotune.ansor import ANSOR_PRESETS, Ansor, AnsorConfig
from autotune.autotvm import AUTOTVM_PRESETS, AutoTVM, AutoTVMConfig
from autotune.registry import make_tuner
from autotune.robust import ROBUST_PRESETS, RobustConfig, RobustTuner


@pytest.mark.parametrize("tuner, config, presets", [(Ansor, AnsorConfig, ANSOR_PRESETS),
                                                     (AutoTVM, AutoTVMConfig, AUTOTVM_PRESETS),
                                                     (RobustTuner, RobustConfig, ROBUST_PRESETS)])
def test_configs_are_frozen_values_and_presets_make_tuners(tuner, config, presets):
    default = config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.batch = 1  # type: ignore[misc]
    assert tuner().config == default
    for name, preset in presets.items():
        made = tuner(preset)
        assert made.config == preset
        if tuner is Ansor:  # an Ansor preset is named by the tuner it makes (the others by their registry row)
            assert made.name == name


def test_a_keyword_overrides_one_field_of_the_config():
    assert Ansor(variant="limited").config == AnsorConfig(variant="limited") == ANSOR_PRESETS["ansor-limited"]
    assert Ansor(ANSOR_PRESETS["ansor-no-prior"], lines=2).config == AnsorConfig(prior="none", lines=2)
    assert AutoTVM(transfer=["a.jsonl"]).config.transfer == ("a.jsonl",)
    assert make_tuner("autotvm-b16").config == AutoTVMConfig(plan_size=16, restart_from_best=16)
    assert make_tuner("autotvm-b16", plan_size=8).config.plan_size == 8
    assert RobustTuner(n_estimators=20).n_estimators == 20 and RobustTuner(radius=3).config.radius == 3


def test_bad_settings_fail_when_the_config_is_made():
    with pytest.raises(ValueError, match="unknown Ansor variant"):
        AnsorConfig(variant="greedy")
    with pytest.raises(ValueError, match="epsilon"):
        AutoTVMConfig(epsilon=2.0)
    with pytest.raises(ValueError, match="radius"):
        RobustConfig(radius=0)
    with pytest.raises(TypeError):
        Ansor(generation=3)  # a misspelt field is no silent default


def test_every_registered_tuner_and_bound_is_set_by_one_frozen_config():
    """One mechanism for every row: a frozen config value, its fields read as attributes, a
    keyword overriding one field, a misspelt one refused."""
    from autotune.evaluate import BOUNDS
    from autotune.registry import TUNERS

    for name, row in {**TUNERS, **BOUNDS}.items():
        tuner = row.build()
        assert dataclasses.is_dataclass(tuner.config) and tuner.config.__dataclass_params__.frozen, name
        field = dataclasses.fields(tuner.config)[0].name
        assert getattr(tuner, field) == getattr(tuner.config, field), name
        with pytest.raises(TypeError):
            row.build(no_such_field=1)
    assert make_tuner("grid", batch=16).config.batch == 16 and make_tuner("triton", key=["M"]).key == ("M",)
