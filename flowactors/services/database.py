"""DBCPConnectionPool: a pool of connections to a SQL database, as NiFi's DBCPConnectionPool,
on SQLAlchemy's connection pool (docs/services.md, "Databases").

**Where it connects.** ``Database Connection URL`` takes a SQLAlchemy URL
(``postgresql+psycopg://host:5432/db``, ``sqlite:////var/data/db.sqlite``) or the JDBC URL a
NiFi flow carries, mapped by ``sqlalchemy_url``: ``jdbc:postgresql://host[:port]/db`` to psycopg
(``ApplicationName``, ``currentSchema``, ``sslmode`` and ``connectTimeout`` mapped to libpq's
names; any other JDBC parameter is refused by name), ``jdbc:mysql://host[:port]/db`` and
``jdbc:mariadb://host[:port]/db`` to PyMySQL (``mysql+pymysql``; port 3306 by default;
``connectTimeout`` in milliseconds to ``connect_timeout`` in whole seconds, rounded up, 0 leaving
PyMySQL's 10 s; ``characterEncoding`` to the MySQL ``charset`` of that Java charset, UTF-8 as
``utf8mb4``; ``useSSL``/``requireSSL``/``sslMode``, Connector/J's and MariaDB's values, to
PyMySQL's TLS settings; ``useUnicode=true``; ``user``/``password``; any other parameter refused by
name), ``jdbc:sqlite:<file>`` to SQLite. Other databases are refused in one sentence, until a test
here can run against the real one.
``Database User`` and ``Password`` win over a user and password in the URL. Each dynamic
property is a connection parameter given to the driver as it is (``SENSITIVE.`` stripped from
its name, NiFi's mark of a sensitive one). ``Database Driver Class Name`` and ``Database Driver
Location(s)`` name Java drivers (``org.postgresql.Driver``, ``com.mysql.cj.jdbc.Driver``,
``com.mysql.jdbc.Driver``, ``org.mariadb.jdbc.Driver``...): accepted and not used (the URL says
which driver).

**The pool.** One pool in each process that hosts the service, as NiFi has one a node: at most
``Max Total Connections`` lent at once (negative: no limit), at most ``Maximum Idle
Connections`` kept open between loans; a loan waits ``Max Wait Time`` for a free connection
(``-1``: for ever) and then fails. ``Validation Query``, when set, runs on every connection before
it is lent; a connection it fails on is closed and another made. ``Maximum Connection Lifetime``
replaces a connection that old by a new one when it is next lent. NiFi's evictor settings (Minimum Idle
Connections and the eviction times) tune commons-dbcp's idle thread, which SQLAlchemy's pool does
not have: accepted, not applied. The service connects to nothing when enabled, as NiFi's: a
database that is down is the error of the loan that finds it so (``DatabaseUnavailableError``,
one line naming the URL without its password, and the driver's reason).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator, Mapping
from urllib.parse import parse_qsl, unquote

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.services import (ControllerService, DatabaseUnavailableError, DBCPService, ServiceContext,
                                     ServiceEnableError, database_error_text)
from flowactors.sdk.units import parse_duration

#: what NiFi calls a sensitive dynamic property: the prefix is not part of the parameter's name
SENSITIVE_PREFIX = "SENSITIVE."
#: JDBC parameters of PostgreSQL's driver that libpq has under another name
_PG_PARAMETERS = {"ApplicationName": "application_name", "sslmode": "sslmode", "connectTimeout": "connect_timeout",
                  "user": "user", "password": "password"}
_JDBC_POSTGRESQL = re.compile(r"jdbc:postgresql:(?://(?P<hosts>[^/?]*))?/?(?P<db>[^?]*)(?:\?(?P<query>.*))?", re.S)
_JDBC_MYSQL = re.compile(r"jdbc:(?:mysql|mariadb)://(?P<hosts>[^/?]*)/?(?P<db>[^?]*)(?:\?(?P<query>.*))?", re.S)
#: Java's charset names (lower case) -> MySQL's character set (characterEncoding)
_MYSQL_CHARSETS = {"utf-8": "utf8mb4", "utf8": "utf8mb4", "iso-8859-1": "latin1", "latin1": "latin1",
                   "cp1252": "latin1", "windows-1252": "latin1", "us-ascii": "ascii", "ascii": "ascii"}
#: Connector/J's and MariaDB Connector/J's sslMode values (lower case) -> PyMySQL's settings (URL query)
_MYSQL_SSL_MODES = {"disabled": {"ssl_disabled": "true"}, "disable": {"ssl_disabled": "true"}, "preferred": {},
                    "required": {"ssl_check_hostname": "false"}, "trust": {"ssl_check_hostname": "false"},
                    "verify_ca": {"ssl_verify_cert": "true"}, "verify-ca": {"ssl_verify_cert": "true"},
                    "verify_identity": {"ssl_verify_identity": "true"}, "verify-full": {"ssl_verify_identity": "true"}}
_MYSQL_PARAMETERS = ("user", "password", "connectTimeout", "characterEncoding", "useSSL", "useSsl", "requireSSL",
                     "sslMode", "useUnicode")
#: a SQLAlchemy URL naming a database without a driver: the driver flowactors installs for it
_DEFAULT_DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql", "mariadb": "mariadb+pymysql"}
#: SQLAlchemy's own URL scheme: dialect[+driver]://
_SQLALCHEMY_URL = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\+[A-Za-z0-9_]+)?://")
#: what a URL of these databases is refused with, until a test here runs against the real one
_NOT_YET = ("oracle", "sqlserver", "db2", "h2", "derby", "hive2", "snowflake")


def _duration_or_infinite(value: str) -> str | None:
    if value.strip() == "-1":
        return None
    try:
        parse_duration(value)
    except ValueError as err:
        return str(err)
    return None


def _seconds(value: str | None) -> float | None:
    """A NiFi time period in seconds; None for ``-1`` (no limit) or unset."""
    if value is None or value.strip() == "-1":
        return None
    return parse_duration(value)


def sqlalchemy_url(url: str, user: str | None = None, password: str | None = None) -> Any:
    """The SQLAlchemy URL of ``url`` (a SQLAlchemy URL, or a JDBC URL of a database flowactors
    maps; see the module docstring), with ``user`` and ``password`` when given. A URL it cannot
    map raises ``ValueError`` saying why."""
    from sqlalchemy.engine import make_url

    text = url.strip()
    if text.startswith("jdbc:postgresql:"):
        target = _postgresql(text)
    elif text.startswith(("jdbc:mysql:", "jdbc:mariadb:")):
        target = _mysql(text)
    elif text.startswith("jdbc:sqlite:"):
        path = text[len("jdbc:sqlite:"):]
        target = make_url("sqlite://" if path in ("", ":memory:") else "sqlite:///" + path)
    elif text.startswith("jdbc:"):
        kind = text[5:].split(":", 1)[0] or "?"
        known = "not supported yet" if kind in _NOT_YET else "not one flowactors knows"
        raise ValueError(f"a jdbc:{kind} URL is {known}: flowactors connects to PostgreSQL (jdbc:postgresql://"
                         f"host:port/database), MySQL and MariaDB (jdbc:mysql://host:port/database) and SQLite "
                         f"(jdbc:sqlite:/path/to/file), or to any SQLAlchemy URL "
                         f"whose driver is installed")
    elif _SQLALCHEMY_URL.match(text):
        try:
            target = make_url(text)
        except Exception as err:  # sqlalchemy.exc.ArgumentError
            raise ValueError(f"{text!r} is not a URL SQLAlchemy can read: {err}") from None
        if target.drivername in _DEFAULT_DRIVERS:
            target = target.set(drivername=_DEFAULT_DRIVERS[target.drivername])
    else:
        raise ValueError(f"{text!r} is neither a JDBC URL (jdbc:postgresql://host:port/database) nor a SQLAlchemy "
                         f"URL (postgresql+psycopg://host:port/database)")
    if user:
        target = target.set(username=user)
    if password:
        target = target.set(password=password)
    return target


def _postgresql(text: str) -> Any:
    from sqlalchemy.engine import URL

    match = _JDBC_POSTGRESQL.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a PostgreSQL JDBC URL (jdbc:postgresql://host:port/database)")
    hosts = match.group("hosts")
    if hosts is not None and "," in hosts:
        raise ValueError(f"{text!r} names several hosts: flowactors connects to one")
    host, port = "localhost", None
    if hosts:
        host, port = _host_port(hosts)
    query: dict[str, str] = {}
    for name, value in parse_qsl(match.group("query") or "", keep_blank_values=True):
        if name == "currentSchema":
            query["options"] = f"-csearch_path={value}"
        elif name in _PG_PARAMETERS:
            query[_PG_PARAMETERS[name]] = value
        else:
            raise ValueError(f"the JDBC parameter {name!r} of {text!r} has no libpq equivalent flowactors knows "
                             f"(it maps {', '.join(sorted([*_PG_PARAMETERS, 'currentSchema']))}); give libpq's "
                             f"parameters as dynamic properties instead")
    return URL.create("postgresql+psycopg", host=host, port=port, database=unquote(match.group("db")) or None,
                      query=query)


def _host_port(hosts: str) -> tuple[str, int | None]:
    """The host and port of a JDBC URL's ``host[:port]`` (``[::1]:5432``: an IPv6 address)."""
    host, _, port_text = hosts.rpartition(":") if hosts.rsplit(":", 1)[-1].isdigit() else (hosts, "", "")
    return host.strip("[]"), int(port_text) if port_text else None


def _mysql(text: str) -> Any:
    """PyMySQL's URL of a MySQL Connector/J or MariaDB Connector/J URL (see the module docstring)."""
    from sqlalchemy.engine import URL

    match = _JDBC_MYSQL.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a MySQL JDBC URL flowactors reads (jdbc:mysql://host:port/database; "
                         f"load balancing, replication and address=(...) forms are not supported)")
    hosts = match.group("hosts")
    if "," in hosts or "(" in hosts:
        raise ValueError(f"{text!r} names several hosts: flowactors connects to one")
    host, port = _host_port(hosts) if hosts else ("localhost", None)
    query: dict[str, str] = {}
    ssl_mode: dict[str, str] | None = None
    for name, value in parse_qsl(match.group("query") or "", keep_blank_values=True):
        flag = value.strip().lower()
        if name in ("user", "password"):
            query[name] = value
        elif name == "connectTimeout" and value.strip().isdigit():
            if int(value) > 0:
                query["connect_timeout"] = str(-(-int(value) // 1000))
        elif name == "characterEncoding" and flag in _MYSQL_CHARSETS:
            query["charset"] = _MYSQL_CHARSETS[flag]
        elif name == "sslMode" and flag in _MYSQL_SSL_MODES:
            ssl_mode = _MYSQL_SSL_MODES[flag]
        elif name in ("useSSL", "useSsl", "requireSSL") and flag in ("true", "false"):
            if ssl_mode is None and not (name == "requireSSL" and flag == "false"):
                query.update(_MYSQL_SSL_MODES["required" if name == "requireSSL" else
                                              "preferred" if flag == "true" else "disabled"])
        elif name == "useUnicode" and flag == "true":
            continue   # PyMySQL's text is always Unicode
        else:
            raise ValueError(f"the JDBC parameter {name}={value!r} of {text!r} has no PyMySQL equivalent flowactors "
                             f"knows (it maps {', '.join(_MYSQL_PARAMETERS)}, with the values Connector/J takes); "
                             f"give PyMySQL's connect() arguments as dynamic properties instead")
    if ssl_mode is not None:   # sslMode wins over useSSL/requireSSL, as in Connector/J
        query = {k: v for k, v in query.items() if not k.startswith("ssl_")} | ssl_mode
    user, password = query.pop("user", None), query.pop("password", None)
    return URL.create("mysql+pymysql", username=user, password=password, host=host, port=port,
                      database=unquote(match.group("db")) or None, query=query)


def shown(url: Any) -> str:
    """The URL as a message may show it: without its password."""
    return url.render_as_string(hide_password=True)


class DBCPConnectionPool(ControllerService, DBCPService):
    """Connections to one SQL database from a pool (see the module docstring)."""

    description = ("Lends connections to a SQL database (PostgreSQL, MySQL, MariaDB, SQLite or any SQLAlchemy URL) "
                   "from a pool.")
    properties = (
        PropertyDescriptor("Database Connection URL", "A SQLAlchemy URL, or a JDBC URL of PostgreSQL, MySQL, "
                           "MariaDB or SQLite",
                           required=True, validator=validators.NON_EMPTY, expression_language=True),
        PropertyDescriptor("Database Driver Class Name", "A Java driver's class: accepted, not used (the URL says "
                           "which driver)"),
        PropertyDescriptor("Database Driver Location(s)", "Java driver files: accepted, not used"),
        PropertyDescriptor("Database User", "The user to connect as", expression_language=True),
        PropertyDescriptor("Password", "The user's password", sensitive=True),
        PropertyDescriptor("Max Wait Time", "How long a loan waits for a free connection (-1: for ever)",
                           required=True, default="500 millis", validator=_duration_or_infinite),
        PropertyDescriptor("Max Total Connections", "The most connections lent at once (negative: no limit)",
                           required=True, default="8", validator=validators.INTEGER),
        PropertyDescriptor("Validation Query", "Run on a connection before it is lent; one it fails on is "
                           "replaced", expression_language=True),
        PropertyDescriptor("Maximum Idle Connections", "The most connections kept open between loans (negative: "
                           "no limit)", default="8", validator=validators.INTEGER),
        PropertyDescriptor("Maximum Connection Lifetime", "A connection this old is replaced by a new one when "
                           "it is next lent (-1: no limit)", default="-1", validator=_duration_or_infinite),
    )
    dynamic_properties = True
    NIFI_PROPERTY_NAMES = {"database-driver-locations": "Database Driver Location(s)",
                           "Validation-query": "Validation Query", "dbcp-max-idle-conns": "Maximum Idle Connections",
                           "dbcp-max-conn-lifetime": "Maximum Connection Lifetime"}
    #: commons-dbcp's evictor thread, which SQLAlchemy's pool has not (and NiFi 1's names of them)
    NIFI_IGNORED = ("Minimum Idle Connections", "Time Between Eviction Runs", "Minimum Evictable Idle Time",
                    "Soft Minimum Evictable Idle Time", "dbcp-min-idle-conns", "dbcp-time-between-eviction-runs",
                    "dbcp-min-evictable-idle-time", "dbcp-soft-min-evictable-idle-time")

    def __init__(self) -> None:
        self._engine: Any = None
        self._url: Any = None

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        url = values.get("Database Connection URL") or ""
        if "${" in url or not url.strip():
            return []
        try:
            sqlalchemy_url(url)
        except ValueError as err:
            return [f"Database Connection URL: {err}"]
        return []

    def on_enabled(self, context: ServiceContext) -> None:
        import sqlalchemy
        from sqlalchemy import event, exc

        try:
            url = sqlalchemy_url(context.property("Database Connection URL").evaluate() or "",
                                 context.property("Database User").evaluate(), context.property("Password").raw)
        except ValueError as err:
            raise ServiceEnableError(f"Database Connection URL: {err}") from None
        total = context.property("Max Total Connections").as_int()
        idle = context.property("Maximum Idle Connections").as_int()
        wait = _seconds(context.property("Max Wait Time").raw)
        lifetime = _seconds(context.property("Maximum Connection Lifetime").raw)
        if total is not None and total >= 0:
            kept = total if idle is None or idle < 0 else min(idle, total)
            pool = {"pool_size": kept, "max_overflow": total - kept}
        else:
            pool = {"pool_size": idle if idle is not None and idle >= 0 else 0, "max_overflow": -1}
        pool["pool_timeout"] = wait if wait is not None else 10 ** 9
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            pool = {}  # a database in memory: SQLAlchemy's pool for it (one connection a thread) has no bounds
        arguments = {name[len(SENSITIVE_PREFIX):] if name.startswith(SENSITIVE_PREFIX) else name: value
                     for name, value in context.dynamic_properties.items()}
        try:
            engine = sqlalchemy.create_engine(url, connect_args=arguments, pool_recycle=lifetime or -1, **pool)
        except (exc.ArgumentError, exc.NoSuchModuleError, ImportError, TypeError) as err:
            raise ServiceEnableError(f"cannot use {shown(url)}: {err}") from None
        query = context.property("Validation Query").evaluate()
        if query and query.strip():
            @event.listens_for(engine, "checkout")
            def validate(dbapi_connection, record, proxy) -> None:
                cursor = dbapi_connection.cursor()
                try:
                    cursor.execute(query)
                except Exception as err:
                    raise exc.DisconnectionError(f"the Validation Query failed: {err}") from err
                finally:
                    cursor.close()
        self._engine, self._url = engine, url

    def on_disabled(self, context: ServiceContext) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    @property
    def engine(self) -> Any:
        """The SQLAlchemy ``Engine`` over the pool (None while disabled)."""
        return self._engine

    @contextmanager
    def connection(self) -> Iterator[Any]:
        from sqlalchemy import exc

        if self._engine is None:
            raise DatabaseUnavailableError("the connection pool is not enabled")
        try:
            connection = self._engine.connect()
        except exc.TimeoutError:
            raise DatabaseUnavailableError(f"no connection to {shown(self._url)} became free within the Max Wait "
                                           f"Time: every one of the pool's connections is lent") from None
        except exc.DBAPIError as err:
            raise DatabaseUnavailableError(f"cannot connect to {shown(self._url)}: {database_error_text(err)}") from None
        with connection:
            yield connection
