"""tests/ray_helpers.py: the Ray test modules' cluster leaves pytest's signal handlers as it found them."""

from __future__ import annotations

import signal

import pytest

from tests.ray_helpers import HANDLED, local_cluster

pytest.importorskip("ray")


def test_local_cluster__leaves_the_signal_handlers_as_it_found_them() -> None:
    """ray.shutdown leaves Ray's SIGTERM handler installed: pytest's Ctrl-C and SIGTERM handling
    after the Ray tests must be pytest's own."""
    before = {sig: signal.getsignal(sig) for sig in HANDLED}
    with local_cluster(num_cpus=1) as ray:
        assert ray.get(ray.put(1)) == 1
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]  # what Ray does
    assert {sig: signal.getsignal(sig) for sig in HANDLED} == before
