"""Flags from the environment and Context."""

from __future__ import annotations

import pytest

from zeptograd.helpers import DEBUG, Context, ContextVar, getenv


def test_getenv(monkeypatch):
    monkeypatch.setenv("ZG_TEST_FLAG", "3")
    assert getenv("ZG_TEST_FLAG") == 3
    monkeypatch.setenv("ZG_TEST_FLAG", "")
    assert getenv("ZG_TEST_FLAG", 7) == 7
    monkeypatch.setenv("ZG_TEST_FLAG", "yes")
    with pytest.raises(ValueError, match="ZG_TEST_FLAG must be an integer, got 'yes'"):
        getenv("ZG_TEST_FLAG")


def test_context_sets_and_restores():
    before = DEBUG.value
    with Context(DEBUG=4):
        assert DEBUG.value == 4 and DEBUG >= 3 and bool(DEBUG)
        with Context(DEBUG=0):
            assert not DEBUG
        assert DEBUG.value == 4
    assert DEBUG.value == before
    with pytest.raises(RuntimeError), Context(DEBUG=5):
        raise RuntimeError("the flag comes back even when the block raises")
    assert DEBUG.value == before


def test_context_errors():
    with pytest.raises(KeyError, match="unknown flag"), Context(NOT_A_FLAG=1):
        pass
    with pytest.raises(ValueError, match="defined twice"):
        ContextVar("DEBUG")
