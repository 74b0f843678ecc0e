"""Shared fixtures: one real Ray per test session, repositories in temporary folders."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A real local Ray, started once for the whole test session and shut down at its end."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, namespace="flowactors-tests", include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def repository(tmp_path):
    """A fresh repository folder for one flow run."""
    path = tmp_path / "repository"
    path.mkdir()
    return path
