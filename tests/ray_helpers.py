"""A local Ray cluster for a test module that leaves the test process's signal handlers as it
found them: ``ray.init`` installs its own SIGTERM handler, which ``ray.shutdown`` leaves in
place (and the handlers of SIGINT are checked too), so pytest's Ctrl-C and SIGTERM handling
after the Ray tests is pytest's own."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

HANDLED = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def local_cluster(num_cpus: int = 2) -> Iterator[ModuleType]:
    """``ray.init`` a local cluster of ``num_cpus``; on exit ``ray.shutdown`` and the SIGINT and
    SIGTERM handlers put back."""
    import ray

    handlers = {sig: signal.getsignal(sig) for sig in HANDLED}
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
