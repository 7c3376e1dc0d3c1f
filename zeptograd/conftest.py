"""Doctests in the package see `Tensor`, `dtypes` and `np` without importing them in every example."""

import numpy as np
import pytest

from zeptograd import Tensor, dtypes


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict) -> None:
    doctest_namespace.update(Tensor=Tensor, dtypes=dtypes, np=np)
