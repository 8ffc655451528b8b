"""Fixtures shared by the test folders (each folder mirrors a package of kafkalite)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Any]]:
    """``make_cluster(brokers=3, seed=1, config=...)``: a simulated ``Cluster``, closed after the test."""
    from kafkalite.host.cluster import Cluster

    made: list[Cluster] = []

    def make(*args: Any, **kwargs: Any) -> Cluster:
        made.append(Cluster(*args, **kwargs))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A local Spark session for one test module (``kafkalite-tests-<last word of the module>``)."""
    from kafkalite.spark import session

    app = "kafkalite-tests-" + request.module.__name__.rsplit("_", 1)[-1]
    s = session(app=app)
    yield s
    s.stop()
