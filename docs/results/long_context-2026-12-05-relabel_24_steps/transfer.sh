#!/usr/bin/env bash
# The long-context adapters on a public long-context benchmark training never saw: reasoning-gym's
# needle_haystack (installed package, nothing downloaded) at about 1K, 2K, 4K and 8K tokens, 15 haystacks each,
# every one a workspace file as in the track's training mix (placement=file).
#   bash docs/results/long_context-2026-12-05-relabel_24_steps/transfer.sh OUT      (after run.sh OUT; the venv active; ~15 min)
set -euo pipefail
OUT=${1:?usage: transfer.sh OUT}
RG=$OUT/needle_haystack.jsonl
if [ ! -f "$RG" ]; then
  for n in 130 260 520 1040; do   # ~7.7 tokens a statement; seeds far apart: reasoning-gym seeds entry i with seed + i
    sandgym tasks reasoning-gym needle_haystack --size 15 --seed $((n * 1000)) --set min_num_statements=$n \
      --set max_num_statements=$n --placement file -o "$RG"
  done
fi
python -m sandgym.experiments.transfer "$OUT" --config examples/long_context_lengths.toml --records "$RG" \
  --format reasoning_gym --max-new-tokens 96 \
  --policy base=smollm2-135m --policy warm_start="$OUT/oracle_sft/train/sft/adapter" \
  --policy sft="$OUT/sft_dagger/adapter" --policy rl_12="$OUT/train/checkpoints/step-000012" \
  --policy sft_rl="$OUT/train"
