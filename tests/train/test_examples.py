from pathlib import Path

import pytest

from sandgym.train.config import load_config

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_config_loads_and_validates(path):
    cfg = load_config(path)
    assert cfg.domains.mix and cfg.optim.steps >= 1


def test_config_errors_name_file_key_and_fix(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[algorithm]\nname = "ppo"\n')
    with pytest.raises(Exception) as e:
        load_config(bad)
    msg = str(e.value)
    assert str(bad) in msg and "algorithm.name" in msg and "grpo" in msg
    bad.write_text("[optim]\nsteps = 'ten'\n")
    with pytest.raises(Exception, match="optim.steps"):
        load_config(bad)


def test_per_step_advantages_are_accepted_on_ray():
    cfg = load_config(None, ['algorithm.advantage_mode="per_step"', 'distributed.backend="ray"'])
    assert (cfg.algorithm.advantage_mode, cfg.distributed.backend) == ("per_step", "ray")
