#!/usr/bin/env bash
# RL from the every-state relabelled warm start (docs/results/long_context_dagger-2026-12-05/all_states/), 24 steps
# instead of 12.
#   bash docs/results/long_context-2026-12-05-relabel_24_steps/run.sh OUT        (from the repository root, the venv active; ~1 h 40 min)
# Each stage resumes or skips what is done.
set -euo pipefail
OUT=${1:?usage: run.sh OUT}
R=docs/results
# 1. the track's oracle warm start: SFT on 64 demonstrations x 3 epochs (OUT/oracle_sft/train/sft/adapter)
[ -f "$OUT/oracle_sft/train/sft/adapter/adapter_config.json" ] || \
  python -m sandgym.cli sft examples/long_context_lengths.toml --set "out_dir=\"$OUT/oracle_sft/train\""
# 2. its own episodes on the 96 4K/8K training tasks, temperature 1.0
python $R/long_context_dagger-2026-12-05/collect.py "$OUT" --warm-run "$OUT/oracle_sft"
# 3. every state relabelled by the oracle, SFT 2 epochs from the warm start; evaluated on the 60 held-out tasks
python $R/long_context_dagger-2026-12-05/dagger.py "$OUT" --warm-run "$OUT/oracle_sft" --relabel all_states --name sft
# 4. GRPO with evidence@v1 per-turn credit, 24 steps (checkpoints kept), evaluated on the same tasks
python $R/long_context_4k-2026-12-04/rl_long_only.py "$OUT" --warm-run "$OUT/lc_dagger" --steps 24 --name rl_evidence_24 \
  --set 'algorithm.advantage_mode="per_step"' --set 'rollout.env_kwargs={turn_rewards=true, turn_term="evidence@v1"}' \
  --set checkpoint.keep_last=12
# 5. the step-12 checkpoint (the length of the earlier 12-step runs) on the same tasks
python $R/long_context-2026-12-05-relabel_24_steps/checkpoint_eval.py "$OUT" "$OUT/train/checkpoints/step-000012" rl_evidence_12
