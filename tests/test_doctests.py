import doctest
import importlib

import pytest

MODULES = ["sandgym.train.advantages", "sandgym.evaluate.metrics"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
