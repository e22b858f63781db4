"""Private data: tasks from a team's own repository, rewards from feedback logs, a calibrated model judge.

- ``fromrepo``: ``sandgym tasks from-repo`` (re-implement and bug-fix tasks verified in the sandbox);
  ``mutations`` and ``snapshot`` are its parts.
- ``scrub``: remove secrets from prompts and task files, and report what was removed.
- ``feedback``: ``sandgym feedback import`` (accepted / edited / rejected -> trajectories and preference pairs).
- ``judge`` / ``calibrate``: ``JudgeReward``, ``HybridReward`` and ``sandgym judge calibrate``.

Heavy imports stay in the submodules; see docs/PRIVATE_DATA.md.
"""
