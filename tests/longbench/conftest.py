"""Shared fixtures of the AgentLongBench tests: tables and samples are cheap, so most are built per test."""

from __future__ import annotations

import pytest

from ace_gym.longbench.tables import ItemTable, load_table
from ace_gym.runs.tokens import ApproxTokenizer


@pytest.fixture(scope="session")
def synthetic() -> ItemTable:
    return load_table("synthetic", 0)


@pytest.fixture(scope="session")
def small() -> ItemTable:
    """A 60-item synthetic table: brute force over it is instant and games end quickly."""
    return load_table("synthetic:60", 3)


@pytest.fixture(scope="session")
def tokenizer() -> ApproxTokenizer:
    return ApproxTokenizer()
