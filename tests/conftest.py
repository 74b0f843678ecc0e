"""Shared fixtures: one real Ray per test session, repositories in temporary folders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A real local Ray, started once for the whole test session and shut down at its end.

    Its session folder keeps Ray's logs but loses ``runtime_resources``: the virtualenvs Ray built
    for the tests' pip runtime_envs, a copy of the whole .venv each (about 1 GB)."""
    import ray

    from flowactors.driver.running import start_local_ray
    from flowactors.ops.ray_dashboard import session_dir

    if not ray.is_initialized():
        start_local_ray(num_cpus=2, namespace="flowactors-tests", log_to_driver=False, configure_logging=False)
    session = Path(session_dir())
    yield ray
    from flowactors.testing import ProcessorRunner

    ProcessorRunner.close_ray()  # the actors processor tests on Ray shared
    ray.shutdown()
    shutil.rmtree(session / "runtime_resources", ignore_errors=True)


@pytest.fixture(scope="session")
def spark_session(ray_session):
    """A real Spark on RayDP, started once for the whole test session (about 20 s) and stopped
    before Ray. Spark's driver lives in a Spark service actor: yields its ``name`` (what a Spark
    processor's 'Spark Service' property takes) and ``actor``."""
    from types import SimpleNamespace

    from flowactors.spark.service import start_service, stop_service

    name = "flowactors-tests.spark"
    actor = start_service(name, {"executors": 1, "executor_cores": 1, "executor_memory": "1G"})
    yield SimpleNamespace(name=name, actor=actor)
    stop_service(actor)


def _started(server, missing: str):
    """The body of a real service's session fixture: ``server`` started, stopped at the end of
    the session; when ``server`` is None (its programs are not installed) the tests that use it
    are skipped, saying ``missing``."""
    if server is None:
        pytest.skip(missing)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgresql():
    """A real PostgreSQL server on 127.0.0.1, started once for the test session (its own data
    folder and port, run as the ``postgres`` user) and stopped at its end (tests/real_services.py)."""
    from real_services import POSTGRESQL_MISSING, PostgreSQL, postgresql_bin

    programs = postgresql_bin()
    yield from _started(PostgreSQL(programs) if programs else None, POSTGRESQL_MISSING)


@pytest.fixture(scope="session")
def mariadb():
    """A real MariaDB server on 127.0.0.1, started once for the test session (its own data folder,
    port and socket, run as the ``mysql`` user; 0.7 to 3.2 s to start here) and stopped at its end
    (tests/real_services.py)."""
    from real_services import MARIADB_MISSING, MariaDB, mariadb_programs

    programs = mariadb_programs()
    yield from _started(MariaDB(*programs) if programs else None, MARIADB_MISSING)


@pytest.fixture(scope="session")
def mosquitto():
    """A real Mosquitto MQTT broker on 127.0.0.1, started once for the test session (its own
    config folder and port, anonymous clients) and stopped at its end (tests/real_services.py)."""
    from real_services import MOSQUITTO_MISSING, Mosquitto, installed

    program = installed("mosquitto")
    yield from _started(Mosquitto(program) if program else None, MOSQUITTO_MISSING)


@pytest.fixture(scope="session")
def rabbitmq():
    """A real RabbitMQ node on 127.0.0.1, started once for the test session (its own node name,
    ports, epmd, database and user; about 4 s to start here) and stopped at its end, epmd with it
    (tests/real_services.py)."""
    from real_services import RABBITMQ_MISSING, RabbitMQ

    scripts, epmd = Path("/usr/lib/rabbitmq/bin"), shutil.which("epmd")
    ready = (scripts / "rabbitmq-server").exists() and epmd is not None
    yield from _started(RabbitMQ(scripts, epmd) if ready else None, RABBITMQ_MISSING)


@pytest.fixture
def repository(tmp_path):
    """A fresh repository folder for one flow run."""
    path = tmp_path / "repository"
    path.mkdir()
    return path


@pytest.fixture(params=["in-process", "stateless"])
def engine(request, monkeypatch):
    """Runs a processor test on the two engines in this process, for a processor with nothing
    Ray-specific: every ``ProcessorRunner`` the test makes without an engine of its own uses it."""
    from flowactors.testing import ProcessorRunner

    monkeypatch.setattr(ProcessorRunner, "default_engine", request.param)
    return request.param


@pytest.fixture(params=["in-process", "stateless", "ray"])
def processor_engine(request, monkeypatch):
    """Runs a processor test once on each engine: every ``ProcessorRunner`` the test makes without
    an engine of its own uses this one (the Ray engine's actors are shared by the session)."""
    from flowactors.testing import ProcessorRunner

    if request.param == "ray":
        request.getfixturevalue("ray_session")
    monkeypatch.setattr(ProcessorRunner, "default_engine", request.param)
    return request.param
