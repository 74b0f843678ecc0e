"""DBCPConnectionPool against a real PostgreSQL (the session's, tests/real_services.py) and real
SQLite files: NiFi's properties (and NiFi 1's names of them), the JDBC URLs a NiFi flow carries,
the pool's bounds, the Validation Query, and one line for a database that cannot be reached."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from flowactors.driver.nifi_export import NiFiImportError, flow_from_nifi
from flowactors.sdk.services import DatabaseUnavailableError, ServiceEnableError
from flowactors.services import DBCPConnectionPool
from flowactors.services.database import sqlalchemy_url
from flowactors.testing import enable_service
from nifi_flows import group, snapshot
from real_services import free_port


@pytest.fixture
def pool():
    """Enables a DBCPConnectionPool with the given properties; disables every one at the end."""
    enabled = []

    def make(**properties):
        service = enable_service(DBCPConnectionPool, properties)
        enabled.append(service)
        return service

    yield make
    for service in enabled:
        service.on_disabled(None)


def scalar(service, query: str):
    with service.connection() as connection:
        return connection.execute(text(query)).scalar_one()


# ------------------------------------------------------------------------------ URLs
@pytest.mark.parametrize("jdbc, expected", [
    ("jdbc:postgresql://db.example:5433/orders", "postgresql+psycopg://db.example:5433/orders"),
    ("jdbc:postgresql://db.example/orders", "postgresql+psycopg://db.example/orders"),
    ("jdbc:postgresql:orders", "postgresql+psycopg://localhost/orders"),
    ("jdbc:postgresql://[::1]:5432/orders", "postgresql+psycopg://[::1]:5432/orders"),
    ("jdbc:postgresql://h:1/d?ApplicationName=nifi&sslmode=require",
     "postgresql+psycopg://h:1/d?application_name=nifi&sslmode=require"),
    ("jdbc:postgresql://h/d?currentSchema=sales", "postgresql+psycopg://h/d?options=-csearch_path%3Dsales"),
    ("jdbc:sqlite:/var/data/orders.db", "sqlite:////var/data/orders.db"),
    ("jdbc:sqlite::memory:", "sqlite://"),
    ("postgresql://h:5/d", "postgresql+psycopg://h:5/d"),
    ("sqlite:///relative.db", "sqlite:///relative.db"),
])
def test_a_jdbc_url_maps_to_sqlalchemys(jdbc, expected):
    assert sqlalchemy_url(jdbc).render_as_string(hide_password=False) == expected


def test_user_and_password_win_over_the_urls_and_are_never_shown():
    url = sqlalchemy_url("postgresql://old:secret@h/d", "nifi", "p@ss word")
    assert (url.username, url.password) == ("nifi", "p@ss word")
    assert "p@ss" not in url.render_as_string(hide_password=True)


@pytest.mark.parametrize("url, says", [
    ("jdbc:oracle:thin:@h:1521/d", "a jdbc:oracle URL is not supported yet"),
    ("jdbc:teradata://h/d", "a jdbc:teradata URL is not one flowactors knows"),
    ("jdbc:postgresql://h/d?loginTimeout=5", "the JDBC parameter 'loginTimeout'"),
    ("jdbc:postgresql://a:1,b:2/d", "names several hosts"),
    ("orders.db", "is neither a JDBC URL"),
])
def test_a_url_it_cannot_map_is_one_sentence_when_the_flow_validates(url, says):
    with pytest.raises(ValueError) as caught:
        enable_service(DBCPConnectionPool, {"Database Connection URL": url})
    message = str(caught.value)
    assert says in message and "Database Connection URL" in message and "\n" not in message


# ------------------------------------------------------------------------------ real databases
def test_a_nifi_jdbc_url_with_user_and_password_reaches_postgresql(pool, postgresql):
    service = pool(**{"Database Connection URL": postgresql.jdbc_url, "Database User": postgresql.user,
                      "Password": postgresql.password, "Database Driver Class Name": "org.postgresql.Driver"})
    assert scalar(service, "SELECT current_user") == postgresql.user
    assert scalar(service, "SELECT current_database()") == postgresql.database


def test_dynamic_properties_are_the_drivers_connection_parameters(pool, postgresql):
    """NiFi passes them to the JDBC driver, 'SENSITIVE.' taken off their names; here libpq's."""
    service = pool(**{"Database Connection URL": postgresql.url, "application_name": "flowactors-test",
                      "SENSITIVE.options": "-c statement_timeout=1234"})
    assert scalar(service, "SHOW application_name") == "flowactors-test"
    assert scalar(service, "SHOW statement_timeout") == "1234ms"


def test_current_schema_of_a_jdbc_url_is_the_search_path(pool, postgresql):
    service = pool(**{"Database Connection URL": postgresql.jdbc_url + "?currentSchema=sales",
                      "Database User": postgresql.user, "Password": postgresql.password})
    assert scalar(service, "SHOW search_path") == "sales"


def test_the_pool_lends_at_most_max_total_connections_and_a_loan_waits_max_wait_time(pool, postgresql):
    service = pool(**{"Database Connection URL": postgresql.url, "Max Total Connections": "2",
                      "Max Wait Time": "200 millis"})
    with service.connection() as first, service.connection() as second:
        pids = {first.execute(text("SELECT pg_backend_pid()")).scalar_one(),
                second.execute(text("SELECT pg_backend_pid()")).scalar_one()}
        assert len(pids) == 2
        with pytest.raises(DatabaseUnavailableError, match="no connection to .* became free within the Max Wait "
                                                           "Time") as caught:
            with service.connection():
                pass
        assert postgresql.password not in str(caught.value)
    # given back: a loan is served again, and waits for a connection another thread returns
    held = service.connection()
    held.__enter__()
    other = service.connection()
    other.__enter__()
    threading.Timer(0.05, lambda: other.__exit__(None, None, None)).start()
    assert scalar(service, "SELECT 1") == 1      # within 200 ms of waiting
    held.__exit__(None, None, None)


def test_maximum_idle_connections_bounds_what_stays_open_between_loans(pool, postgresql):
    service = pool(**{"Database Connection URL": postgresql.url, "Max Total Connections": "4",
                      "Maximum Idle Connections": "1"})
    loans = [service.connection() for _ in range(3)]
    for loan in loans:
        loan.__enter__()
    for loan in loans:
        loan.__exit__(None, None, None)
    assert service.engine.pool.checkedin() == 1


def test_a_validation_query_that_fails_replaces_the_connection_before_it_is_lent(pool, postgresql):
    """Each connection's backend is ended from outside while it is idle in the pool: with a
    Validation Query, the next loan is a new, working connection."""
    service = pool(**{"Database Connection URL": postgresql.url, "Validation Query": "SELECT 1",
                      "Max Total Connections": "1"})
    first = scalar(service, "SELECT pg_backend_pid()")
    admin = pool(**{"Database Connection URL": postgresql.url})
    assert scalar(admin, f"SELECT pg_terminate_backend({first})") is True
    assert scalar(service, "SELECT pg_backend_pid()") != first


def test_a_connection_past_its_maximum_lifetime_is_replaced_when_next_lent(pool, postgresql):
    lasting = pool(**{"Database Connection URL": postgresql.url, "Max Total Connections": "1"})
    short = pool(**{"Database Connection URL": postgresql.url, "Max Total Connections": "1",
                    "Maximum Connection Lifetime": "50 millis"})
    lasting_pid, short_pid = scalar(lasting, "SELECT pg_backend_pid()"), scalar(short, "SELECT pg_backend_pid()")
    time.sleep(0.1)   # past the short lifetime
    assert scalar(lasting, "SELECT pg_backend_pid()") == lasting_pid   # the same connection, lent again
    assert scalar(short, "SELECT pg_backend_pid()") != short_pid       # a new one


def test_a_wrong_password_or_a_database_that_is_down_is_one_line(pool, postgresql):
    wrong = pool(**{"Database Connection URL": postgresql.jdbc_url, "Database User": postgresql.user,
                    "Password": "not-it"})
    with pytest.raises(DatabaseUnavailableError) as caught:
        scalar(wrong, "SELECT 1")
    message = str(caught.value)
    assert message.startswith(f"cannot connect to postgresql+psycopg://{postgresql.user}:***@127.0.0.1:")
    assert "password authentication failed" in message and "not-it" not in message and "\n" not in message
    down = pool(**{"Database Connection URL": f"jdbc:postgresql://127.0.0.1:{free_port()}/x"})
    with pytest.raises(DatabaseUnavailableError, match=r"cannot connect to .*(refused|failed)"):
        scalar(down, "SELECT 1")


def test_sqlite_files_by_jdbc_url_in_a_bounded_pool(pool, tmp_path):
    path = tmp_path / "orders.db"
    service = pool(**{"Database Connection URL": f"jdbc:sqlite:{path}", "Max Total Connections": "1",
                      "Max Wait Time": "100 millis"})
    with service.connection() as connection:
        connection.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)"))
        connection.execute(text("INSERT INTO orders (item) VALUES ('pear')"))
        connection.commit()
    assert path.exists() and scalar(service, "SELECT item FROM orders") == "pear"
    with service.connection(), pytest.raises(DatabaseUnavailableError, match="became free"):
        scalar(service, "SELECT 1")


def test_a_driver_that_is_not_installed_refuses_to_enable_in_one_line():
    with pytest.raises(ServiceEnableError) as caught:
        enable_service(DBCPConnectionPool, {"Database Connection URL": "oracle+oracledb://u:pw@h/d"})
    message = str(caught.value)
    assert "cannot use oracle+oracledb://u:***@h/d" in message and "\n" not in message


# ------------------------------------------------------------------------------ NiFi flows
def test_a_nifi_1_pool_loads_under_nifi_2s_names_and_its_evictor_settings_are_accepted(postgresql):
    root = group("root", "Orders", None, None)
    root["controllerServices"] = [{
        "identifier": "db", "name": "Orders DB", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
        "properties": {"Database Connection URL": postgresql.jdbc_url, "Database Driver Class Name": "org.postgresql.Driver",
                       "database-driver-locations": "/opt/jdbc/postgresql.jar", "Database User": postgresql.user,
                       "Password": postgresql.password, "Max Wait Time": "-1", "Max Total Connections": "3",
                       "Validation-query": "SELECT 1", "dbcp-min-idle-conns": "0", "dbcp-max-idle-conns": "2",
                       "dbcp-max-conn-lifetime": "10 mins", "dbcp-time-between-eviction-runs": "-1",
                       "dbcp-min-evictable-idle-time": "30 mins", "dbcp-soft-min-evictable-idle-time": "-1",
                       "kerberos-user-service": None}}]
    flow = flow_from_nifi(snapshot(root, {}))
    properties = flow.services["Orders DB"].properties
    assert {k: properties[k] for k in ("Database Driver Location(s)", "Validation Query", "Maximum Idle Connections",
                                       "Maximum Connection Lifetime")} == {
        "Database Driver Location(s)": "/opt/jdbc/postgresql.jar", "Validation Query": "SELECT 1",
        "Maximum Idle Connections": "2", "Maximum Connection Lifetime": "10 mins"}
    service = enable_service(DBCPConnectionPool, properties)
    try:
        assert scalar(service, "SELECT 40 + 2") == 42
        loans = [service.connection() for _ in range(3)]   # Max Total Connections
        for loan in loans:
            loan.__enter__()
        for loan in loans:
            loan.__exit__(None, None, None)
        assert service.engine.pool.checkedin() == 2          # Maximum Idle Connections, from dbcp-max-idle-conns
    finally:
        service.on_disabled(None)


def test_a_kerberos_user_service_is_refused():
    root = group("root", "Orders", None, None)
    root["controllerServices"] = [{"identifier": "db", "name": "Orders DB", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
                                   "properties": {"Database Connection URL": "jdbc:postgresql://h/d",
                                                  "Kerberos User Service": "kerberos"}}]
    with pytest.raises(NiFiImportError) as caught:
        flow_from_nifi(snapshot(root, {}))
    assert "Kerberos User Service" in str(caught.value)
