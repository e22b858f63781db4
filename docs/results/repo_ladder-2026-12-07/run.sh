#!/usr/bin/env bash
# The repository recipe's ladder on real PyPI packages' sdists, at the recipe's defaults (--size cpu):
# tasks at the complete / fix / find rungs from each package's own tests, the base model probed on each rung's train
# tasks, an SFT warm start on every rung, the warm start probed, GRPO where either has a foothold, then base,
# one-shot base, SFT and SFT + RL on every rung's held-out tasks. Embedded model (SmolLM2-135M-Instruct), CPU only.
# Each run is resumable: rerun the same line with the same --out.
set -euo pipefail
SRC=${SRC:-runs/sdists}
OUT=${OUT:-runs/ladder}
mkdir -p "$SRC"
for pkg in toolz==0.12.1 funcy==2.1; do
    pip download --quiet --no-deps --no-binary :all: "$pkg" -d "$SRC"
done
for f in "$SRC"/toolz-0.12.1.tar.gz "$SRC"/funcy-2.1.tar.gz; do tar -xzf "$f" -C "$SRC"; done
sandgym recipe repo "$SRC/toolz-0.12.1" --out "$OUT/toolz"
sandgym recipe repo "$SRC/funcy-2.1" --out "$OUT/funcy" -r whatever
