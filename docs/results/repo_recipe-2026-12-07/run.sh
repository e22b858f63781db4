#!/usr/bin/env bash
# The one-command recipe on real PyPI packages' sdists: tasks from each package's own tests (re-implement, bug fix,
# bug report), an SFT warm start on oracle demonstrations, the warm start relabelled on its own train episodes,
# GRPO on the train split, then base / SFT / SFT + RL on the held-out split (2 samples a task).
# Embedded model (SmolLM2-135M-Instruct), the recipe's defaults (docs/PRIVATE_DATA.md), CPU only.
set -euo pipefail
SRC=${SRC:-runs/sdists}
OUT=${OUT:-runs/recipe}
mkdir -p "$SRC"
for pkg in toolz==0.12.1 inflection==0.5.1 itsdangerous==2.2.0; do
    pip download --quiet --no-deps --no-binary :all: "$pkg" -d "$SRC"
done
for f in "$SRC"/*.tar.gz; do tar -xzf "$f" -C "$SRC"; done
sandgym recipe repo "$SRC/toolz-0.12.1" --out "$OUT/toolz" --samples 2
sandgym recipe repo "$SRC/inflection-0.5.1" --out "$OUT/inflection" --samples 2
sandgym recipe repo "$SRC/itsdangerous-2.2.0" --out "$OUT/itsdangerous" --samples 2 -r freezegun
