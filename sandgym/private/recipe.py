"""The recipe from a repository's tasks to a scored adapter: ``tasks from-repo`` writes ``train.toml`` and
``eval.toml`` beside ``tasks.jsonl``, so the next two commands need no editing::

    sandgym tasks from-repo PATH --out DIR       # DIR/tasks.jsonl, DIR/train.toml, DIR/eval.toml
    sandgym train DIR/train.toml                 # SFT on oracle demonstrations, then GRPO on the train split
    sandgym eval DIR/eval.toml                   # the adapter against the base model on the held-out split

Both are ordinary configs (every key: docs/CONFIG.md), written as text so a user can read and edit them; the
settings are those of ``examples/from_repo.toml`` (multi-file workspaces edited with tools, then submitted). The
evaluation rolls out with the training's own rollout settings, so the adapter is scored in the loop it learned.
"""

from __future__ import annotations

import json
from pathlib import Path

TRAIN_NAME = "train.toml"
EVAL_NAME = "eval.toml"
TOOLS = ("list_files", "read_file", "grep", "edit_file", "write_file", "submit")

_ROLLOUT = f"""max_new_tokens = 384
max_turns = 6
max_total_tokens = 4096
code_action = "none"       # multi-file workspaces: the agent edits files with tools, then submits
tools = {json.dumps(list(TOOLS))}"""


def train_toml(out: str, model: str, n_train: int, run_dir: str) -> str:
    """The training config for the suite in ``out``, training into ``run_dir`` (paths as given, relative to where
    the commands run)."""
    return f"""# RL on the train split of the tasks `sandgym tasks from-repo` made in {out}.
# Run: sandgym train {out}/{TRAIN_NAME}   (any key from the CLI: --set optim.steps=20; every key: docs/CONFIG.md)
out_dir = {json.dumps(run_dir)}
seed = 0
init = "sft"               # a warm start on oracle demonstrations (tool calls), then RL

[model]
name = {json.dumps(model)}    # any causal LM: a local directory or a cached hub id
lora_r = 16
lora_alpha = 32

[algorithm]
name = "grpo"
group_size = 4

[rollout]
{_ROLLOUT}
temperature = 1.0

[[domains.mix]]
suite = {json.dumps(f"{out}/tasks.jsonl:train")}
name = "coding"
n_tasks = {max(1, n_train)}

[optim]
lr = 5e-5
steps = 4
tasks_per_step = 4
micro_batch = 4
activation_checkpointing = true   # episodes run to thousands of tokens: without it a micro-batch needs ~10 GB

[checkpoint]
every = 2
keep_last = 2

[sft]
source = "oracle"
oracle_style = "tools"
episodes = 16
epochs = 1
lr = 2e-4
"""


def eval_toml(out: str, model: str, run_dir: str, eval_dir: str) -> str:
    """The evaluation config: the run in ``run_dir`` against its base model on the held-out split."""
    return f"""# The adapter trained by {out}/{TRAIN_NAME} against its base model, on the held-out split: tasks on source
# files no training task targeted. Run: sandgym eval {out}/{EVAL_NAME}   (every key: docs/CONFIG.md)
policy = {json.dumps(run_dir)}       # the run directory: its newest whole checkpoint
baseline = {json.dumps(model)}
suites = [{json.dumps(f"{out}/tasks.jsonl:heldout")}]
samples = 2
out = {json.dumps(eval_dir)}

[rollout]                  # the training's own rollout settings
{_ROLLOUT}
temperature = 0.7
"""


def write_recipe(out: str | Path, *, model: str, n_train: int, n_heldout: int,
                 train_dir: str | None = None) -> list[Path]:
    """Write ``train.toml`` (when there are train tasks) and ``eval.toml`` (when there are held-out ones) into
    ``out``; returns the paths written. The training goes to ``train_dir`` (default ``out/train``; ``sandgym recipe
    repo`` trains in ``out/run/train``), the evaluation to ``out/eval``."""
    folder = Path(out)
    name = folder.as_posix()
    run_dir = train_dir or f"{name}/train"
    written = []
    if n_train:
        (folder / TRAIN_NAME).write_text(train_toml(name, model, n_train, run_dir), encoding="utf-8")
        written.append(folder / TRAIN_NAME)
    if n_heldout:
        (folder / EVAL_NAME).write_text(eval_toml(name, model, run_dir, f"{name}/eval"), encoding="utf-8")
        written.append(folder / EVAL_NAME)
    return written


RUNG_ROLLOUT: dict[str, dict[str, object]] = {
    "complete": {"max_new_tokens": 192, "max_turns": 1, "max_total_tokens": 3072, "code_action": "submit",
                 "tools": ["submit"],
                 "env_kwargs": {"system_prompt": "You write Python. Reply with one ```python code block that holds "
                                                 "the definition asked for (the def line and the body); it "
                                                 "replaces that definition in {entry_file} and the project's tests "
                                                 "decide."}},
    "fix": {"max_new_tokens": 192, "max_turns": 3, "max_total_tokens": 3072, "code_action": "test",
            "tools": ["submit"],
            "env_kwargs": {"system_prompt": "You fix Python. Reply with one ```python code block that holds the "
                                            "corrected definition (the def line and the body); it replaces that definition in "
                                            "{entry_file} and the project's tests run on it. If a test fails, reply "
                                            "with a corrected block. When the tests pass, reply SUBMIT."}},
    "find": {"max_new_tokens": 48, "max_turns": 1, "max_total_tokens": 3072, "code_action": "submit",
             "tools": ["submit"],
             "env_kwargs": {"system_prompt": "You read bug reports of a Python project. Reply with one ```python "
                                             "code block holding only the name asked for; it is your answer."}},
}
"""Each lower rung's own rollout (``[domains.mix.rollout]``): a short system prompt and one code block a turn; the
tool-using kinds (reimplement, bugfix, locate) roll out with the tools and budgets of :data:`_ROLLOUT`."""
TOOL_ROLLOUT: dict[str, object] = {"max_new_tokens": 384, "max_turns": 6, "max_total_tokens": 4096,
                                   "code_action": "none", "tools": list(TOOLS)}


def rung_rollout(rung: str) -> dict[str, object]:
    """The ``[domains.mix.rollout]`` table of ``rung`` (a from-repo kind)."""
    return RUNG_ROLLOUT.get(rung, TOOL_ROLLOUT)


def _toml_value(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def ladder_toml(rungs: dict[str, str], model: str, run_dir: str, size: dict[str, object]) -> str:
    """The training config of ``sandgym recipe repo``: one ``[[domains.mix]]`` per trained rung (``rungs``: rung ->
    its task file's train split), each with the rung's rollout; ``size`` gives the SFT and RL budgets."""
    mix = "\n".join(
        f"""[[domains.mix]]
suite = {json.dumps(suite)}
name = {json.dumps(rung)}
n_tasks = 100000
rollout = {_toml_value(rung_rollout(rung))}
""" for rung, suite in rungs.items())
    return f"""# The repository recipe's training: an SFT warm start on oracle demonstrations of the trained rungs, then GRPO.
# Written by `sandgym recipe repo`; edit it and rerun the recipe with the same --out (every key: docs/CONFIG.md).
out_dir = {json.dumps(run_dir)}
seed = 0
init = "sft"

[model]
name = {json.dumps(model)}    # any causal LM: a local directory or a cached hub id
lora_r = 16
lora_alpha = 32

[algorithm]
name = "grpo"
group_size = {size["group_size"]}

[rollout]
{_ROLLOUT}
temperature = 1.0

{mix}
[optim]
lr = {size["rl_lr"]}
steps = {size["rl_steps"]}
tasks_per_step = {size["tasks_per_step"]}
micro_batch = 4
activation_checkpointing = true   # without it SFT on 4 x ~1K-token rung demonstrations peaked at 10.7 GB here

[checkpoint]
every = 2
keep_last = 2

[sft]
source = "oracle"
episodes = {size["sft_episodes"]}
epochs = {size["sft_epochs"]}
lr = 2e-4
"""
