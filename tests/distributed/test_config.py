"""The [distributed] section: validated up front; the single-process path never imports Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sandgym.errors import ConfigError
from sandgym.evaluate.config import EvalConfig
from sandgym.train.config import load_config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (['distributed.backend="dask"'], "distributed.backend"),
        (["distributed.learner_processes=2"], 'need backend = "ray"'),
        (['distributed.address="auto"'], 'need backend = "ray"'),
        (['distributed.backend="ray"', "distributed.num_workers=0"], "distributed.num_workers"),
        (['distributed.backend="ray"', "distributed.max_staleness=-1"], "distributed.max_staleness"),
    ],
)
def test_bad_distributed_settings_fail_with_the_key_and_the_fix(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_defaults_keep_the_single_process_path():
    d = load_config(None, []).distributed
    assert (d.backend, d.address, d.async_mode, d.learner_processes) == ("local", "", False, 1)


def test_eval_ray_settings_are_checked():
    with pytest.raises(ConfigError, match="ray_workers"):
        EvalConfig(policy="oracle", suites=("coding:heldout",), ray_address="auto")
    with pytest.raises(ConfigError, match="ray_workers"):
        EvalConfig(policy="oracle", suites=("coding:heldout",), ray_workers=-1)


def test_train_cli_ray_address_sets_the_ray_backend(capsys):
    from sandgym.cli import main

    assert main(["train", "--ray-address", "auto", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert 'backend = "ray"' in out and 'address = "auto"' in out


def test_single_process_modules_do_not_import_ray():
    code = ("import sys, sandgym.train.loop, sandgym.train.distributed, sandgym.evaluate.distributed, "
            "sandgym.evaluate.cli, sandgym.train.cli; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
