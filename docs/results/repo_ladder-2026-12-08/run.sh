#!/usr/bin/env bash
# The repository recipe's ladder on three real PyPI packages' sdists, at the recipe's defaults (--size cpu), one
# after another on an otherwise idle machine: tasks at the complete / fix / find rungs from each package's own tests,
# the base model probed on each rung's train tasks, an SFT warm start on every rung, the warm start probed, GRPO where
# either has a foothold, then base, one-shot base, SFT and SFT + RL on the held-out tasks of the rungs RL trained on.
# Embedded model (SmolLM2-135M-Instruct), CPU only. Each run is resumable: rerun the same line with the same --out.
set -euo pipefail
SRC=${SRC:-runs/sdists}
OUT=${OUT:-runs/ladder}
mkdir -p "$SRC"
for pkg in toolz==0.12.1 pydash==8.1.0 boltons==26.2.0; do
    pip download --quiet --no-deps --no-binary :all: "$pkg" -d "$SRC"
done
for f in "$SRC"/toolz-0.12.1.tar.gz "$SRC"/pydash-8.1.0.tar.gz "$SRC"/boltons-26.2.0.tar.gz; do tar -xzf "$f" -C "$SRC"; done
sandgym recipe repo "$SRC/toolz-0.12.1" --out "$OUT/toolz"
sandgym recipe repo "$SRC/pydash-8.1.0" --out "$OUT/pydash" -r "typing-extensions>3.10,!=4.6.0"
sandgym recipe repo "$SRC/boltons-26.2.0" --out "$OUT/boltons"
