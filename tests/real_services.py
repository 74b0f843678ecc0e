"""Real services the connector tests run against, started by the test session on 127.0.0.1 (their
own data folder and port) and stopped at its end: nothing stands in for them.

``PostgreSQL`` runs Debian's ``postgresql`` package's server binaries as the ``postgres`` user
(the server refuses root), with password authentication, fsync off (a test's data need not
survive a power loss) and its socket in its own folder.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

#: what a test says when the server's programs are missing (the Makefile installs them as root)
POSTGRESQL_MISSING = ("PostgreSQL's server is not installed (Debian: apt-get install postgresql; `make test` installs it "
                      "when run as root): the database tests are SKIPPED")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgresql_bin() -> Path | None:
    """The folder of the newest PostgreSQL server programs installed, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


class PostgreSQL:
    """One PostgreSQL server of the test session's (``start``, then ``stop``); ``url`` is its
    SQLAlchemy URL, ``jdbc_url`` the JDBC URL a NiFi flow would name, for ``database``."""

    user = "flowactors"
    password = "flowactors-test"
    database = "flowactors"

    def __init__(self, programs: Path):
        self.programs = programs
        self.folder = Path(tempfile.mkdtemp(prefix="fa-pg-", dir="/tmp"))  # short: the socket's path has a limit
        self.data = self.folder / "data"
        self.port = free_port()
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *command: str) -> None:
        done = subprocess.run([*self._as_postgres, *command], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def start(self) -> "PostgreSQL":
        secret = self.folder / "password"
        secret.write_text(self.password)
        if self._as_postgres:
            shutil.chown(self.folder, "postgres")
            shutil.chown(secret, "postgres")
        self._run(str(self.programs / "initdb"), "-D", str(self.data), "-U", self.user, "--pwfile", str(secret),
                  "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync")
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off"
        self._run(str(self.programs / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options,
                  "-w", "-t", "60", "start")
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                             dbname="postgres", autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {self.database}")
        return self

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.database}"

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.programs / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


# ------------------------------------------------------------------------------------ message brokers
MOSQUITTO_MISSING = ("Mosquitto's broker is not installed (Debian: apt-get install mosquitto; `make test` installs it "
                     "when run as root): the MQTT tests are SKIPPED")
RABBITMQ_MISSING = ("RabbitMQ's server is not installed (Debian: apt-get install rabbitmq-server; `make test` installs "
                    "it when run as root): the AMQP tests are SKIPPED")


def listening(port: int, timeout: float, alive: Callable[[], bool] = lambda: True) -> bool:
    """Poll 127.0.0.1:``port`` until it accepts a connection (True); False after ``timeout``
    seconds, or as soon as ``alive()`` says what should listen there is gone."""
    deadline = time.monotonic() + timeout
    while alive():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
    return False


def wait_for_port(port: int, process: subprocess.Popen, what: str, log: Path, timeout: float = 90.0) -> None:
    """Poll 127.0.0.1:``port`` until it accepts a connection; a ``process`` that ends first, or a
    port still closed after ``timeout`` seconds, raises RuntimeError with the end of ``log``."""
    if listening(port, timeout, lambda: process.poll() is None):
        return
    if process.poll() is not None:
        raise RuntimeError(f"{what} ended ({process.returncode}) before listening:\n{_tail(log)}")
    raise RuntimeError(f"{what} did not listen on port {port} in {timeout:.0f} s:\n{_tail(log)}")


def _until_accepted(attempt: Callable[[], T], refused: type[BaseException], process: subprocess.Popen, what: str,
                    log: Path, timeout: float) -> T:
    """``attempt()``'s result once it no longer raises ``refused`` (tried every 50 ms: a server's
    listener opens a moment before it accepts a login); RuntimeError saying ``what``, with the last
    refusal and the end of ``log``, when ``process`` ended or ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except refused as err:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{what} ({err!r}):\n{_tail(log)}") from err
            time.sleep(0.05)


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return "(no log)"


def _end(process: subprocess.Popen | None, grace: float = 30.0) -> None:
    """End ``process`` and its process group (started with ``start_new_session``): SIGTERM, then
    SIGKILL after ``grace`` seconds."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()


def _as_user(name: str) -> list[str]:
    """The command prefix running a program as ``name`` when this process is root."""
    return ["runuser", "-u", name, "--"] if os.geteuid() == 0 else []


def _give_to(folder: Path, user: str, group: str | None = None) -> None:
    """When this process is root, make ``folder`` and everything in it ``user``'s: the server runs
    as (or drops to) that user and reads its files, its TLS key included, as it."""
    if os.geteuid() == 0:
        for path in (folder, *folder.rglob("*")):
            shutil.chown(path, user, group)


def installed(program: str) -> str | None:
    """Where ``program`` is: on the PATH, or in /usr/sbin (not on a normal user's PATH); None when
    it is not installed."""
    return shutil.which(program) or (f"/usr/sbin/{program}" if Path("/usr/sbin", program).exists() else None)


class Mosquitto:
    """One Mosquitto broker of the test session's on 127.0.0.1 (``start``, then ``stop``): anonymous
    clients allowed, nothing persisted (sessions live as long as the broker). ``uri`` is the
    Broker URI a ConsumeMQTT / PublishMQTT takes, ``ws_uri`` the same broker over WebSockets,
    ``tls_uri`` over TLS."""

    def __init__(self, program: str):
        self.program = program
        self.folder = Path(tempfile.mkdtemp(prefix="fa-mqtt-", dir="/tmp"))
        self.port, self.ws_port, self.tls_port = free_port(), free_port(), free_port()
        self.process: subprocess.Popen | None = None
        #: the certificates of the TLS listener (tests/tls_material.py), made by ``start``
        self.tls = None

    @property
    def uri(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def ws_uri(self) -> str:
        """The same broker over WebSockets."""
        return f"ws://127.0.0.1:{self.ws_port}/mqtt"

    @property
    def tls_uri(self) -> str:
        """The same broker over TLS (its certificate ``tls.server``, signed by ``tls.ca_pem``)."""
        return f"ssl://127.0.0.1:{self.tls_port}"

    def start(self) -> "Mosquitto":
        from tls_material import make_tls_material

        self.tls = make_tls_material(self.folder / "tls")
        config = self.folder / "mosquitto.conf"
        config.write_text(f"per_listener_settings false\nallow_anonymous true\npersistence false\n"
                          f"log_dest file {self.folder / 'log'}\nlog_type error\nlog_type warning\n"
                          f"listener {self.port} 127.0.0.1\nlistener {self.ws_port} 127.0.0.1\nprotocol websockets\n"
                          f"listener {self.tls_port} 127.0.0.1\ncafile {self.tls.ca_pem}\n"
                          f"certfile {self.tls.server.cert}\nkeyfile {self.tls.server.key}\n")
        _give_to(self.folder, "mosquitto")
        with open(os.devnull, "wb") as null:
            self.process = subprocess.Popen([self.program, "-c", str(config)], stdout=null, stderr=null,
                                            start_new_session=True)
        wait_for_port(self.port, self.process, "mosquitto", self.folder / "log")
        wait_for_port(self.ws_port, self.process, "mosquitto (websockets)", self.folder / "log")
        wait_for_port(self.tls_port, self.process, "mosquitto (TLS)", self.folder / "log")
        return self

    def stop(self) -> None:
        try:
            _end(self.process)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class RabbitMQ:
    """One RabbitMQ node of the test session's on 127.0.0.1 (``start``, then ``stop``), run as the
    ``rabbitmq`` user when this process is root: its own node name, AMQP port, Erlang distribution
    port, epmd (started here on a port of its own, stopped here), cookie, database and log folder,
    and the user ``user`` / ``password`` (administrator of the vhost ``/``); AMQP on ``port``,
    AMQP over TLS on ``tls_port`` (certificate ``tls.server``). ``started_in`` is how long the
    node took to accept an AMQP login, in seconds."""

    user = "flowactors"
    password = "flowactors-test"

    def __init__(self, scripts: Path, epmd: str):
        self.scripts = scripts
        self.epmd = epmd
        self.folder = Path(tempfile.mkdtemp(prefix="fa-rmq-", dir="/tmp"))
        self.port, self.dist_port, self.epmd_port, self.tls_port = free_port(), free_port(), free_port(), free_port()
        #: the certificates of the TLS listener (tests/tls_material.py), made by ``start``
        self.tls = None
        self.node = f"fa-{self.folder.name}@localhost"
        self.started_in = 0.0
        self._epmd: subprocess.Popen | None = None
        self.process: subprocess.Popen | None = None

    def _environment(self) -> dict[str, str]:
        folder = self.folder
        return {"HOME": str(folder), "ERL_EPMD_PORT": str(self.epmd_port), "RABBITMQ_NODENAME": self.node,
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(self.port),
                "RABBITMQ_DIST_PORT": str(self.dist_port), "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"),
                "RABBITMQ_LOG_BASE": str(folder / "log"), "RABBITMQ_CONFIG_FILE": str(folder / "rabbitmq.conf"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(folder / "advanced.config"),
                "RABBITMQ_CONF_ENV_FILE": str(folder / "rabbitmq-env.conf"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(folder / "enabled_plugins"),
                "RABBITMQ_PLUGINS_EXPAND_DIR": str(folder / "plugins-expand"),
                "RABBITMQ_PID_FILE": str(folder / "rabbitmq.pid"), "RABBITMQ_LOGS": str(folder / "log" / "node.log"),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+S 1:1 +sbwt none"}

    def start(self) -> "RabbitMQ":
        from tls_material import make_tls_material

        began = time.monotonic()
        folder = self.folder
        (folder / "log").mkdir()
        self.tls = make_tls_material(folder / "tls")
        (folder / "rabbitmq.conf").write_text(
            f"default_user = {self.user}\ndefault_pass = {self.password}\nloopback_users = none\n"
            "log.console = false\nlog.file.level = warning\n"
            f"listeners.ssl.default = 127.0.0.1:{self.tls_port}\nssl_options.cacertfile = {self.tls.ca_pem}\n"
            f"ssl_options.certfile = {self.tls.server.cert}\nssl_options.keyfile = {self.tls.server.key}\n"
            "ssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n")
        (folder / "advanced.config").write_text("[].\n")
        (folder / "rabbitmq-env.conf").write_text("")
        (folder / "enabled_plugins").write_text("[].\n")
        cookie = folder / ".erlang.cookie"
        cookie.write_text(os.urandom(16).hex())
        cookie.chmod(0o400)
        _give_to(folder, "rabbitmq", "rabbitmq")
        command = [*_as_user("rabbitmq"), "env", *(f"{k}={v}" for k, v in self._environment().items())]
        log = folder / "log" / "node.log"
        with open(folder / "stdout", "wb") as out:
            self._epmd = subprocess.Popen([*command, self.epmd, "-port", str(self.epmd_port)], stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True)
            wait_for_port(self.epmd_port, self._epmd, "epmd", folder / "stdout")
            self.process = subprocess.Popen([*command, str(self.scripts / "rabbitmq-server")], stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(self.port, self.process, "rabbitmq-server", log)
        self._await_login(log)
        self.started_in = time.monotonic() - began
        return self

    def _await_login(self, log: Path, timeout: float = 60.0) -> None:
        """Poll until the node accepts the user's AMQP login (its listener opens a moment before
        the node has finished booting)."""
        import pika

        parameters = pika.ConnectionParameters("127.0.0.1", self.port, credentials=pika.PlainCredentials(
            self.user, self.password), connection_attempts=1, socket_timeout=2)
        _until_accepted(lambda: pika.BlockingConnection(parameters).close(), pika.exceptions.AMQPError, self.process,
                        "RabbitMQ refused the test user's login", log, timeout)

    def close_connections(self) -> None:
        """Have the node close every client connection (``rabbitmqctl close_all_connections``), as
        a broker restart or a missed heartbeat does."""
        command = [*_as_user("rabbitmq"), "env", *(f"{k}={v}" for k, v in self._environment().items()),
                   str(self.scripts / "rabbitmqctl"), "-n", self.node, "close_all_connections", "test"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl close_all_connections failed ({done.returncode}):\n{done.stderr}")

    def stop(self) -> None:
        try:
            _end(self.process)
            _end(self._epmd, grace=5)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


# ------------------------------------------------------------------------------------ MySQL / MariaDB
MARIADB_MISSING = ("MariaDB's server is not installed (Debian: apt-get install mariadb-server; `make test` installs it "
                   "when run as root): the MySQL/MariaDB tests are SKIPPED")


def mariadb_programs() -> tuple[str, str] | None:
    """The MariaDB server and its ``mariadb-install-db`` when both are installed, else None."""
    server, install = installed("mariadbd"), shutil.which("mariadb-install-db")
    return (server, install) if server and install else None


class MariaDB:
    """One MariaDB server of the test session's on 127.0.0.1 (``start``, then ``stop``), run as the
    ``mysql`` user when this process is root: its own data folder, port, socket and pid file, grant
    tables on (password logins), utf8mb4, InnoDB without its flushes (a test's data need not survive
    a power loss), TLS offered with the certificate ``tls.server`` (signed by ``tls.ca_pem``).
    ``url`` is its SQLAlchemy URL, ``jdbc_url`` the JDBC URL a NiFi flow would name, for
    ``database``; ``started_in`` how long it took to accept the user's login, in seconds."""

    user = "flowactors"
    password = "flowactors-test"
    database = "flowactors"

    def __init__(self, server: str, install: str):
        self.server, self.install = server, install
        self.folder = Path(tempfile.mkdtemp(prefix="fa-my-", dir="/tmp"))   # short: the socket's path has a limit
        self.data, self.socket = self.folder / "data", self.folder / "mysqld.sock"
        self.port = free_port()
        self.started_in = 0.0
        self.process: subprocess.Popen | None = None
        #: the certificates of the server's TLS (tests/tls_material.py), made by ``start``
        self.tls = None

    def start(self) -> "MariaDB":
        from tls_material import make_tls_material

        began = time.monotonic()
        as_mysql = _as_user("mysql")
        self.tls = make_tls_material(self.folder / "tls")
        _give_to(self.folder, "mysql")
        done = subprocess.run([*as_mysql, self.install, "--no-defaults", f"--datadir={self.data}",
                               "--auth-root-authentication-method=normal", "--skip-test-db",
                               "--skip-name-resolve"], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        log = self.folder / "error.log"
        with open(os.devnull, "wb") as null:
            self.process = subprocess.Popen(
                [*as_mysql, self.server, "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
                 "--bind-address=127.0.0.1", f"--socket={self.socket}", f"--pid-file={self.folder / 'mysqld.pid'}",
                 f"--log-error={log}", "--skip-log-bin", "--skip-name-resolve", "--character-set-server=utf8mb4",
                 "--collation-server=utf8mb4_general_ci", "--innodb-buffer-pool-size=32M",
                 "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", f"--ssl-ca={self.tls.ca_pem}",
                 f"--ssl-cert={self.tls.server.cert}", f"--ssl-key={self.tls.server.key}"],
                stdout=null, stderr=null, start_new_session=True)
        self._as_root(log, f"CREATE DATABASE {self.database}",
                      f"CREATE USER '{self.user}'@'%' IDENTIFIED BY '{self.password}'",
                      f"GRANT ALL ON {self.database}.* TO '{self.user}'@'%'")
        import pymysql

        pymysql.connect(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                        database=self.database).close()
        self.started_in = time.monotonic() - began
        return self

    def _as_root(self, log: Path, *statements: str, timeout: float = 60.0) -> None:
        """Run ``statements`` as root over the socket once the server accepts root's login (polled)."""
        import pymysql

        connection = _until_accepted(
            lambda: pymysql.connect(unix_socket=str(self.socket), user="root", connect_timeout=2),
            pymysql.err.OperationalError, self.process, "MariaDB refused root's login", log, timeout)
        with connection, connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    @property
    def url(self) -> str:
        return f"mysql+pymysql://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:mysql://127.0.0.1:{self.port}/{self.database}"

    def stop(self) -> None:
        try:
            _end(self.process)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
