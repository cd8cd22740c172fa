"""Typed errors survive pickling, so they cross worker processes and async vector envs intact."""

from __future__ import annotations

import pickle

import pytest

from ace_gym.errors import ConfigError, DatasetError, did_you_mean


@pytest.mark.parametrize(
    "error",
    [ConfigError("domain", "cours", "unknown domain"), DatasetError("file.json", "$.instances[0]", "bad")],
)
def test_typed_errors__round_trip_through_pickle(error: Exception) -> None:
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert clone.__dict__ == error.__dict__


def test_did_you_mean__suggests_the_closest_name() -> None:
    assert did_you_mean("cours", ["course", "meal"]) == " (did you mean 'course'?)"
    assert did_you_mean("zzz", ["course"]) == ""
