"""The configs ``tasks from-repo`` writes beside its tasks: they load as they are, train on the train split and
evaluate the trained run against its base model on the held-out split, in the training's own rollout."""

from __future__ import annotations

from pathlib import Path

from sandgym.evaluate.config import load_eval_config
from sandgym.private.recipe import EVAL_NAME, TRAIN_NAME, write_recipe
from sandgym.train.config import load_config


def test_the_recipe_trains_on_train_and_scores_heldout(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    out.mkdir()
    written = write_recipe(out, model="my-model", n_train=9, n_heldout=4)
    assert [p.name for p in written] == [TRAIN_NAME, EVAL_NAME]
    train = load_config(out / TRAIN_NAME)
    (domain,) = train.domains.mix
    assert domain.suite == f"{out.as_posix()}/tasks.jsonl:train" and domain.n_tasks == 9
    assert train.model.name == "my-model" and train.init == "sft"
    assert train.out_dir == f"{out.as_posix()}/train"
    assert train.optim.activation_checkpointing  # repository episodes are thousands of tokens: ~1.5 GB, not ~10
    ev = load_eval_config(out / EVAL_NAME)
    assert ev.policy == train.out_dir and ev.baseline == "my-model" and ev.out == f"{out.as_posix()}/eval"
    assert ev.suites == (f"{out.as_posix()}/tasks.jsonl:heldout",)
    for key in ("max_turns", "max_new_tokens", "max_total_tokens", "code_action", "tools"):
        assert getattr(ev.rollout, key) == getattr(train.rollout, key), key


def test_a_training_folder_of_its_own_is_where_both_configs_point(tmp_path: Path) -> None:
    write_recipe(tmp_path, model="m", n_train=3, n_heldout=2, train_dir="elsewhere/train")
    assert load_config(tmp_path / TRAIN_NAME).out_dir == load_eval_config(tmp_path / EVAL_NAME).policy == "elsewhere/train"


def test_a_split_with_no_tasks_gets_no_config(tmp_path: Path) -> None:
    assert [p.name for p in write_recipe(tmp_path, model="m", n_train=3, n_heldout=0)] == [TRAIN_NAME]
    assert not (tmp_path / EVAL_NAME).exists()
    assert write_recipe(tmp_path / "x", model="m", n_train=0, n_heldout=0) == []
