"""Every docstring example in the library runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import prb_utils

MODULES = sorted(
    name
    for info in pkgutil.walk_packages(prb_utils.__path__, "prb_utils.")
    if not (name := info.name).endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0


def test_examples_exist_where_they_help():
    counted = {
        name: doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE).attempted
        for name in ("prb_utils.data", "prb_utils.profile", "prb_utils.analysis.metrics", "prb_utils.downstream.bon",
                     "prb_utils.downstream.correlation")
    }
    assert all(n > 0 for n in counted.values()), counted
