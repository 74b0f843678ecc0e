"""What the SQL processors' tests share: a SQLAlchemy engine on a session's database server, a
table of the test's own name, and a query's rows."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa


def engine_fixture(server: str):
    """A module fixture named as it is assigned: an engine on the session fixture ``server``
    (``postgresql``, ``mariadb``: tests/real_services.py), disposed of after the module."""

    @pytest.fixture(scope="module")
    def engine(request):
        made = sa.create_engine(request.getfixturevalue(server).url)
        yield made
        made.dispose()

    return engine


def table_fixture():
    """A test fixture (it uses ``engine``): ``make(ddl_columns, suffix="")`` creates the table named
    as the test (and ``suffix``; 56 characters at most with it, within MySQL's 64) anew and gives
    its name; the tables made are dropped after the test, the last made first (a child table
    before its parent)."""

    @pytest.fixture
    def table(request, engine):
        name = re.sub(r"\W", "_", request.node.name.lower())[:56]
        made = []

        def make(columns: str, suffix: str = "") -> str:
            full = name + suffix
            with engine.begin() as connection:
                connection.exec_driver_sql(f"DROP TABLE IF EXISTS {full}")
                connection.exec_driver_sql(f"CREATE TABLE {full} ({columns})")
            made.append(full)
            return full

        yield make
        with engine.begin() as connection:
            for full in reversed(made):
                connection.exec_driver_sql(f"DROP TABLE IF EXISTS {full}")

    return table


def rows(engine, query: str) -> list[tuple]:
    """The rows ``query`` gives on ``engine``, as tuples."""
    with engine.connect() as connection:
        return [tuple(r) for r in connection.exec_driver_sql(query)]
