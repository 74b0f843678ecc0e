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
import socket
import subprocess
import tempfile
from pathlib import Path

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
