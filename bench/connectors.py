"""Scenario 17: the connectors against bare clients and servers doing the same work (issue 53).

Every flow runs on the in-process engine over a durable repository (the write-ahead log and the
claims on disk): ListenHTTP's with ``always_sync`` (each commit fsynced, as its bare server fsyncs
each body), the other two with the default, NiFi's (written, not fsynced); each side runs
``rounds`` times in turns and the medians are compared. The other end of each exchange (the HTTP
load, the HTTP server, PostgreSQL) is a process of its own, so it does not share the measured
side's interpreter.

* **ListenHTTP**, accepted requests/s: a load process (aiohttp, ``concurrency`` connections)
  POSTs ``requests`` bodies of ``size`` bytes, timed from its first request to its last answer,
  to a flow ListenHTTP -> an output port (each 200 sent only after the FlowFile's commit), and
  the same load to a bare aiohttp server that writes each body durably before it answers: it
  appends the body to a file and waits for an ``fsync`` that covers it (one ``fsync`` for every
  body written while the previous one ran: group commit, as the WAL does).
* **PutDatabaseRecord**, rows/s: CSV files (``files`` of ``rows`` rows: id, name, amount,
  category, flag) taken by GetFile -> PutDatabaseRecord (CSVReader, INSERT) into a PostgreSQL
  table, its task time; against psycopg reading the same files with Python's csv module and
  ``executemany`` of the same INSERT, one transaction a file, its wall time. COPY is measured
  too, as a note. The server is the tests' (``fsync=off``) for both sides.
* **InvokeHTTP**, requests/s: GenerateFlowFile makes ``requests`` empty FlowFiles in one
  trigger; InvokeHTTP GETs a small JSON document for each from a local aiohttp server (its task
  time: requests, Response FlowFiles and their commits); against an aiohttp client doing the same
  GETs with as many in flight as InvokeHTTP keeps (Socket Idle Connections, 5), reading each body
  (its wall time).

The PostgreSQL server is the tests' (tests/real_services.py: its own data folder and port, fsync
off, stopped at the end); without PostgreSQL installed the PutDatabaseRecord row says so.

``python -m bench.connectors`` prints the rows as JSON lines; ``load`` and ``bare-server`` are
the two helper processes.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from bench import StolenTime, row
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import GenerateFlowFile, GetFile
from flowactors.processors.http import InvokeHTTP, ListenHTTP
from flowactors.processors.sql import PutDatabaseRecord
from flowactors.sdk.flow import Flow
from flowactors.services import CSVReader, DBCPConnectionPool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))   # the tests' harness: free_port, listening, and PostgreSQL with its own folder and port
from real_services import POSTGRESQL_MISSING, PostgreSQL, free_port, listening, postgresql_bin  # noqa: E402

SCENARIO = "connectors"
#: (ListenHTTP requests, body bytes, load connections; files x rows for PutDatabaseRecord; InvokeHTTP requests; rounds)
FULL = {"listen": (20_000, 1024, 16), "put": (20, 10_000), "invoke": 20_000, "rounds": 3}
QUICK = {"listen": (3_000, 1024, 16), "put": (4, 5_000), "invoke": 3_000, "rounds": 1}
INVOKE_IN_FLIGHT = 5   # InvokeHTTP's default Socket Idle Connections: its requests in flight at once
TABLE = "bench_sales"
DOCUMENT = json.dumps({"id": 1, "name": "alice", "amount": 12.5}).encode()   # what InvokeHTTP GETs


def _python(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.connectors", *args]


def wait_port(port: int, timeout: float = 30.0) -> None:
    if not listening(port, timeout):
        raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


# ---------------------------------------------------------------------------------- helper processes
async def _load(url: str, requests: int, concurrency: int, size: int) -> dict:
    import aiohttp

    body = os.urandom(size)
    statuses: dict[int, int] = {}
    queue = list(range(requests))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as client:
        async def worker() -> None:
            while queue:
                queue.pop()
                async with client.post(url, data=body, headers={"Content-Type": "application/octet-stream"}) as reply:
                    await reply.read()
                    statuses[reply.status] = statuses.get(reply.status, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "statuses": statuses}


def bare_server(port: int, folder: Path) -> None:
    """An aiohttp server answering each POST once its body is appended to a file and fsynced."""
    from aiohttp import web

    fd = os.open(folder / "bodies", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    waiting: list[asyncio.Future] = []
    wake = asyncio.Event()

    async def syncer() -> None:
        loop = asyncio.get_running_loop()
        while True:
            await wake.wait()
            wake.clear()
            batch, waiting[:] = list(waiting), []
            await loop.run_in_executor(None, os.fsync, fd)
            for future in batch:
                future.set_result(None)

    async def receive(request: web.Request) -> web.Response:
        data = await request.read()
        os.write(fd, data)
        done = asyncio.get_running_loop().create_future()
        waiting.append(done)
        wake.set()
        await done
        return web.Response(status=200)

    async def start(app: web.Application) -> None:
        app["syncer"] = asyncio.create_task(syncer())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/contentListener", receive)
    app.on_startup.append(start)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def document_server(port: int) -> None:
    """An aiohttp server answering every GET with the same small JSON document."""
    from aiohttp import web

    async def get(request: web.Request) -> web.Response:
        return web.Response(body=DOCUMENT, content_type="application/json")

    app = web.Application()
    app.router.add_get("/item", get)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


class Process:
    """A helper process of this module, ended (and waited for) on exit."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(_python(*args), cwd=ROOT, stdout=subprocess.PIPE, text=True)

    def result(self, timeout: float = 600.0) -> dict:
        out, _ = self.proc.communicate(timeout=timeout)
        if self.proc.returncode:
            raise RuntimeError(f"{self.proc.args} failed ({self.proc.returncode})")
        return json.loads(out.strip().splitlines()[-1])

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def load(port: int, requests: int, concurrency: int, size: int) -> Process:
    return Process("load", str(port), str(requests), str(concurrency), str(size))


# ---------------------------------------------------------------------------------- ListenHTTP
def listen_ours(workdir: Path, requests: int, concurrency: int, size: int) -> float:
    """Requests/s the load gets from ListenHTTP; raises unless every request got its 200."""
    port = free_port()
    # always_sync: each commit fsyncs its claims and the log, as the bare server fsyncs each body
    # before it answers (the default, NiFi's, leaves them in the page cache: a process kill loses
    # nothing, a power loss may)
    flow = Flow("listen", settings={"always_sync": True})
    listen = flow.add(ListenHTTP, "listen", properties={"Listening Port": str(port), "Base Path": "contentListener"})
    # room for every request: the figure is ListenHTTP's, not back pressure's 503s (which would fail the row)
    flow.connect(listen, flow.add_output_port("received"), back_pressure_object_threshold=requests + 1)
    running: dict[str, Process] = {}
    result: dict = {}

    def started(controller) -> None:
        wait_port(port)
        running["load"] = load(port, requests, concurrency, size)

    def finished(status: dict) -> bool:
        process = running.get("load")
        if process is None or process.proc.poll() is None:
            return False
        result.update(process.result())
        return True

    repository = workdir / "listen-repository"
    try:
        run_flow(flow, repository, engine="in-process", until_idle=False, until=finished, on_started=started,
                 timeout=900)
    finally:
        for process in running.values():
            process.__exit__()
        shutil.rmtree(repository, ignore_errors=True)
    return _rate(result, requests, "ListenHTTP")


def listen_bare(workdir: Path, requests: int, concurrency: int, size: int) -> float:
    port, folder = free_port(), workdir / "bare"
    folder.mkdir(exist_ok=True)
    with Process("bare-server", str(port), str(folder)):
        wait_port(port)
        with load(port, requests, concurrency, size) as process:
            result = process.result()
    shutil.rmtree(folder)
    return _rate(result, requests, "the bare server")


def _rate(result: dict, requests: int, side: str) -> float:
    if result.get("statuses") != {"200": requests}:
        raise RuntimeError(f"{side} did not answer every request with 200: {result}")
    return requests / result["seconds"]


# ---------------------------------------------------------------------------------- PutDatabaseRecord
def write_csv(folder: Path, files: int, rows: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    names, categories = ("alice", "bob", "carol", "dave"), ("books", "games", "music", "tools")
    paths = []
    for number in range(files):
        path = folder / f"sales-{number:03d}.csv"
        with open(path, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["id", "name", "amount", "category", "flag"])
            for i in range(number * rows, (number + 1) * rows):
                writer.writerow([i, names[i % 4], f"{(i * 37) % 100000 / 100:.2f}", categories[i % 3], "true" if i % 2 else "false"])
        paths.append(path)
    return paths


def reset_table(url: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
        connection.exec_driver_sql(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text, amount double precision, "
                                   f"category text, flag boolean)")
    engine.dispose()


def put_ours(url: str, source: Path, workdir: Path, rows: int) -> float:
    """Rows/s of PutDatabaseRecord's task time over every file of ``source``."""
    reset_table(url)
    taken = workdir / "put-input"   # GetFile takes (deletes) the files: hard links to the data, made anew each run
    shutil.rmtree(taken, ignore_errors=True)
    taken.mkdir()
    for path in source.iterdir():
        os.link(path, taken / path.name)
    files = sum(1 for _ in taken.iterdir())
    flow = Flow("put")
    flow.add_service(CSVReader, "reader", properties={})
    flow.add_service(DBCPConnectionPool, "db", properties={"Database Connection URL": url})
    get = flow.add(GetFile, "get", properties={"Input Directory": str(taken), "Batch Size": str(files),
                                               "Minimum File Age": "0 sec"})
    put = flow.add(PutDatabaseRecord, "put", batch_size=1, properties={
        "Record Reader": "reader", "Database Connection Pooling Service": "db", "Statement Type": "INSERT",
        "Table Name": TABLE}, auto_terminate=("success",))
    flow.connect(get, put, name="taken")
    failed = flow.add_output_port("failed")
    flow.connect(put, failed, "failure")
    flow.connect(put, failed, "retry")
    repository = workdir / "put-repository"
    final = run_flow(flow, repository, engine="in-process", timeout=3600)
    shutil.rmtree(repository, ignore_errors=True)
    totals = processor_totals(final)
    if totals["put"]["flowfiles_in"] != files or totals["failed"]["flowfiles_in"] or totals["put"]["errors"]:
        raise RuntimeError(f"PutDatabaseRecord did not write its {files} files: {totals}")
    return files * rows / totals["put"]["task_seconds"]


def _typed(record: list[str]) -> tuple:
    return int(record[0]), record[1], float(record[2]), record[3], record[4] == "true"


def put_executemany(url: str, source: Path, rows: int) -> float:
    """Rows/s of psycopg reading each file with the csv module and inserting it with executemany."""
    def insert(cursor, path: Path) -> None:
        with open(path, newline="") as data:
            records = csv.reader(data)
            next(records)
            cursor.executemany(f"INSERT INTO {TABLE} (id, name, amount, category, flag) VALUES (%s, %s, %s, %s, %s)",
                               [_typed(r) for r in records])

    return _psycopg_rate(url, source, rows, insert)


def put_copy(url: str, source: Path, rows: int) -> float:
    """Rows/s of psycopg's COPY FROM STDIN of each file (CSV with its header), one transaction a file."""
    def copy(cursor, path: Path) -> None:
        with cursor.copy(f"COPY {TABLE} FROM STDIN WITH (FORMAT csv, HEADER true)") as copying:
            copying.write(path.read_bytes())

    return _psycopg_rate(url, source, rows, copy)


def _psycopg_rate(url: str, source: Path, rows: int, load_file: Callable) -> float:
    """Rows/s of ``load_file(cursor, path)`` over each file of ``source`` (``rows`` rows each) into
    the emptied table, one psycopg connection, one transaction a file, wall time."""
    import psycopg

    reset_table(url)
    paths = sorted(source.iterdir())
    with psycopg.connect(_libpq(url)) as connection:
        started = time.perf_counter()
        for path in paths:
            with connection.transaction(), connection.cursor() as cursor:
                load_file(cursor, path)
        seconds = time.perf_counter() - started
    return len(paths) * rows / seconds


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


# ---------------------------------------------------------------------------------- InvokeHTTP
def invoke_ours(port: int, workdir: Path, requests: int) -> float:
    """Requests/s of InvokeHTTP's task time GETting a document for each of ``requests`` FlowFiles."""
    flow = Flow("invoke")
    # Max FlowFiles, not a long run schedule: a source paused after a trigger that made FlowFiles
    # is never seen idle, and the run (until idle) would not end
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "Batch Size": str(requests), "File Size": "0B", "Max FlowFiles": str(requests)})
    invoke = flow.add(InvokeHTTP, "invoke", batch_size=1000, properties={
        "HTTP Method": "GET", "HTTP URL": f"http://127.0.0.1:{port}/item"}, auto_terminate=("Original", "Response"))
    flow.connect(generate, invoke, name="generated")
    failed = flow.add_output_port("failed")
    for relationship in ("Retry", "No Retry", "Failure"):
        flow.connect(invoke, failed, relationship)
    repository = workdir / "invoke-repository"
    final = run_flow(flow, repository, engine="in-process", timeout=3600)
    shutil.rmtree(repository, ignore_errors=True)
    totals = processor_totals(final)
    if totals["invoke"]["flowfiles_in"] != requests or totals["failed"]["flowfiles_in"] or totals["invoke"]["errors"]:
        raise RuntimeError(f"InvokeHTTP did not send its {requests} requests: {totals}")
    return requests / totals["invoke"]["task_seconds"]


def invoke_bare(port: int, requests: int) -> float:
    """Requests/s of an aiohttp client keeping ``INVOKE_IN_FLIGHT`` GETs in flight, reading each body."""
    import aiohttp

    async def main() -> float:
        remaining = [requests]
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=INVOKE_IN_FLIGHT)) as client:
            async def worker() -> None:
                while remaining[0] > 0:
                    remaining[0] -= 1
                    async with client.get(f"http://127.0.0.1:{port}/item") as reply:
                        await reply.read()
                        if reply.status != 200:
                            raise RuntimeError(f"the document server answered {reply.status}")

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(INVOKE_IN_FLIGHT)))
            return time.perf_counter() - started

    return requests / asyncio.run(main())


# ---------------------------------------------------------------------------------- rows
def compared(metric: str, unit: str, rounds: int, ours: Callable[[], float], baseline: Callable[[], float],
             baseline_name: str, notes: str, extra: Callable[[], str] | None = None) -> dict:
    """``ours`` and ``baseline`` (each a rate) run ``rounds`` times in turns after one warm-up run
    each, the medians compared."""
    ours()
    baseline()
    mine, theirs = [], []
    load_average = os.getloadavg()[0]
    with StolenTime() as steal:
        for _ in range(rounds):
            mine.append(ours())
            theirs.append(baseline())
    each = lambda values: " / ".join(f"{v:,.0f}" for v in values)   # noqa: E731
    stolen = "" if steal.percent is None else f", {steal.percent:.0f} % stolen"
    return row(SCENARIO, metric, round(statistics.median(mine)), round(statistics.median(theirs)), baseline_name,
               unit, f"{notes}; rounds {each(mine)} against {each(theirs)}; load {load_average:.1f} at the "
                     f"start{stolen}" + (f"; {extra()}" if extra else ""))


def listen_row(workdir: Path, sizes: dict) -> dict:
    requests, size, concurrency = sizes["listen"]
    return compared("ListenHTTP accepted requests/s", "requests/s", sizes["rounds"],
                    lambda: listen_ours(workdir, requests, concurrency, size),
                    lambda: listen_bare(workdir, requests, concurrency, size),
                    "aiohttp server, append + group fsync",
                    f"{requests:,} POSTs of {size} bytes, {concurrency} connections, from another process, "
                    f"timed by it from its first request to its last answer; the flow ListenHTTP -> an output "
                    f"port with always_sync (each commit fsynced), the bare server in another process")


def put_row(workdir: Path, sizes: dict) -> dict:
    files, rows = sizes["put"]
    programs = postgresql_bin()
    if programs is None:
        return row(SCENARIO, "PutDatabaseRecord rows/s", None, None, "psycopg executemany", "rows/s",
                   f"not measured: {POSTGRESQL_MISSING}")
    source = workdir / "csv"
    write_csv(source, files, rows)
    server = PostgreSQL(programs).start()
    try:
        url = server.url
        return compared("PutDatabaseRecord rows/s", "rows/s", sizes["rounds"],
                        lambda: put_ours(url, source, workdir, rows), lambda: put_executemany(url, source, rows),
                        "psycopg executemany", f"{files} CSV files of {rows:,} rows (5 columns), INSERT into "
                        f"PostgreSQL (fsync off), one transaction a file; the task time of PutDatabaseRecord "
                        f"(CSVReader) against psycopg's wall time reading the files with the csv module",
                        lambda: f"psycopg's COPY of the same files: {put_copy(url, source, rows):,.0f} rows/s")
    finally:
        server.stop()


def invoke_row(workdir: Path, sizes: dict) -> dict:
    requests, port = sizes["invoke"], free_port()
    with Process("document-server", str(port)):
        wait_port(port)
        return compared("InvokeHTTP requests/s", "requests/s", sizes["rounds"],
                        lambda: invoke_ours(port, workdir, requests), lambda: invoke_bare(port, requests),
                        f"aiohttp client, {INVOKE_IN_FLIGHT} in flight",
                        f"{requests:,} GETs of a {len(DOCUMENT)}-byte JSON document from a local aiohttp server "
                        f"in another process; InvokeHTTP's task time (a Response FlowFile a request, committed) "
                        f"against the client's wall time")


def run(quick: bool, workdir: Path) -> list[dict]:
    sizes = dict(QUICK if quick else FULL)
    workdir.mkdir(parents=True, exist_ok=True)
    return [listen_row(workdir, sizes), put_row(workdir, sizes), invoke_row(workdir, sizes)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    loading = sub.add_parser("load", help="POST bodies to 127.0.0.1:PORT/contentListener; print seconds and statuses")
    for name in ("port", "requests", "concurrency", "size"):
        loading.add_argument(name, type=int)
    bare = sub.add_parser("bare-server", help="the durable bare aiohttp server")
    bare.add_argument("port", type=int)
    bare.add_argument("folder", type=Path)
    document = sub.add_parser("document-server", help="the server InvokeHTTP GETs from")
    document.add_argument("port", type=int)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    if options.command == "load":
        result = asyncio.run(_load(f"http://127.0.0.1:{options.port}/contentListener", options.requests,
                                   options.concurrency, options.size))
        print(json.dumps({"seconds": result["seconds"], "statuses": {str(k): v for k, v in result["statuses"].items()}}))
    elif options.command == "bare-server":
        bare_server(options.port, options.folder)
    elif options.command == "document-server":
        document_server(options.port)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="connectors-"))
        try:
            for found in run(options.quick, workdir):
                print(json.dumps(found))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
