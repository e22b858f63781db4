from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.tool_env import ToolEnv
from sandgym.tasks.registry import load_suite


def test_code_action_submits_even_when_write_file_is_not_offered():
    task = load_suite("coding/numbers:train", n=1, seed=0, difficulty=1)[0]
    env = ToolEnv(tasks=[], code_action="submit", tools=builtin_tools(["submit"]), max_turns=1,
                  system_prompt="Reply with a python block for {entry_file}.")
    obs, info = env.reset(options={"task": task})
    assert info["system_prompt"] == "Reply with a python block for solution.py."
    code = task.reference.files["solution.py"]
    obs, reward, terminated, _, info = env.step(f"```python\n{code}\n```\n")
    env.close()
    assert terminated and info["outcome"].failure_mode == "success"
    assert info["reward_components"]["format@v1"] == 0.0  # a code action is not a malformed call
    assert reward > 0.99
