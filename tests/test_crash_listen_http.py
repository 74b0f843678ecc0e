"""Kill -9 a Ray cluster running ListenHTTP while clients POST to it: every request answered 200 survives.

Issue 53's delivery test. ListenHTTP answers a request only after the session holding its
FlowFile committed (docs/http.md, "Delivery"), so a 200 is a promise: the FlowFile is in the
write-ahead log. The flow (``tests/crash_listen_flow.py``, a child process with its own local
Ray) is ListenHTTP -> PutFile, each file named by its request's ``filename`` header. ``KILLS`` times, the parent starts the child on the same repository, and once
ListenHTTP accepts connections, ``CLIENTS`` threads POST requests of deterministic content (at
most ``MAX_REQUESTS`` in all, 127.0.0.1 only) until, at a random (seeded) moment, the parent
SIGKILLs every process of the cluster at once (``ChildCluster.kill``). A last run, sent nothing,
goes on until the flow is idle. Then every request that got a 200, in any run, must be a file in
the output folder with exactly the bytes sent. A request that got no answer (killed in between)
may or may not be there; one that is there has the bytes sent, whatever its answer was. A kill
can leave PutFile's temporary ``.partial`` file behind: at most one a kill.
Each run must have acknowledged requests, so no run passes vacuously. Every commit waits
``SLOW_COMMIT`` before its log transaction: were a 200 sent before the commit, it would be out that
long with nothing durable behind it, and a kill would catch such requests nearly every time (with
ListenHTTP changed to answer first, this test fails: checked when it was written).

Set ``FLOWACTORS_CRASH_SEED`` to replay a run's kill times; the seed is printed.
"""

from __future__ import annotations

import hashlib
import http.client
import random
import threading
import time
from pathlib import Path

import pytest

from real_services import free_port
from test_crash_cluster import SEED, ChildCluster, Deliveries

pytestmark = [pytest.mark.crash, pytest.mark.cluster_crash]

CHILD = Path(__file__).resolve().parent / "crash_listen_flow.py"
KILLS = 5
CLIENTS = 4
MAX_REQUESTS = 20_000      # across every run: the load is bounded in count...
LOAD_SECONDS = (1.5, 5.0)  # ...and in time: the kill comes this long after ListenHTTP accepts
FINAL_TIMEOUT = 300.0
#: seconds every commit waits before its log transaction: a 200 sent before the commit would be
#: out that long with nothing durable behind it, so a kill would catch it (crash_listen_flow.slow_commits)
SLOW_COMMIT = 0.05


def body(request: int) -> bytes:
    """The deterministic content of request ``request``: 100 to 4,099 bytes, every byte value possible."""
    return hashlib.shake_256(f"flowactors listen crash {request}".encode()).digest(100 + (request * 7919) % 4000)


class Load:
    """``CLIENTS`` threads POSTing numbered requests to ListenHTTP until stopped; what each got back."""

    def __init__(self, port: int, first: int, limit: int):
        self.port = port
        self.next = first
        self.limit = limit
        self.lock = threading.Lock()
        self.acknowledged: set[int] = set()
        self.answers: dict[int, int] = {}
        self.errors = 0
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._client, daemon=True) for _ in range(CLIENTS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(30)

    def _take(self) -> int | None:
        with self.lock:
            if self.next >= self.limit:
                return None
            self.next += 1
            return self.next - 1

    def _client(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        request = None
        while not self.stopped.is_set():
            request = self._take() if request is None else request   # one that got no answer is sent again
            if request is None:
                return
            try:
                connection.request("POST", "/contentListener", body=body(request),
                                   headers={"filename": f"r{request:06d}",
                                            "Content-Type": "application/octet-stream"})
                response = connection.getresponse()
                response.read()
                with self.lock:
                    self.answers[request] = response.status
                    if response.status == 200:
                        self.acknowledged.add(request)
                request = None
            except (OSError, http.client.HTTPException):
                with self.lock:
                    self.errors += 1
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                self.stopped.wait(0.01)   # the server is down until the parent stops the load: do not spin
        connection.close()


def test_kill_cluster_under_http_load_loses_no_acknowledged_request(tmp_path):
    rng = random.Random(SEED)
    print(f"\nFLOWACTORS_CRASH_SEED={SEED}")
    repository, output, deliveries = tmp_path / "repository", tmp_path / "output", tmp_path / "deliveries.log"
    output.mkdir()
    port = free_port()
    acknowledged: set[int] = set()
    sent = 0
    per_run = []
    for run in range(KILLS + 1):
        args = ["--repository", str(repository), "--output", str(output), "--deliveries", str(deliveries),
                "--port", str(port), "--run", str(run), "--slow-commit", str(SLOW_COMMIT)]
        cluster = ChildCluster(tmp_path, run, args, child=CHILD)
        started = cluster.wait_started()
        assert started["listening"], f"run {run}: ListenHTTP never accepted connections\n{cluster.stderr_tail()}"
        if run == KILLS:
            final = cluster.finish(FINAL_TIMEOUT)
            break
        load = Load(port, sent, MAX_REQUESTS)
        load.start()
        time.sleep(rng.uniform(*LOAD_SECONDS))   # the kill's moment is the point of the test, not a wait
        cluster.kill()
        load.stop()
        sent = load.next
        acknowledged |= load.acknowledged
        per_run.append({"run": run, "acknowledged": len(load.acknowledged), "answers": len(load.answers),
                        "errors": load.errors, "other": sorted({s for s in load.answers.values() if s != 200})})
        assert load.acknowledged, f"run {run} acknowledged no request: the test would prove nothing\n{per_run}"
    print(f"runs: {per_run}\nfinal: {final.get('state', final)}")

    partial = [path for path in output.iterdir() if path.name.startswith(".") and path.name.endswith(".partial")]
    assert len(partial) <= KILLS, f"{len(partial)} temporary .partial files of PutFile for {KILLS} kills"
    delivered = {path.name: path.read_bytes() for path in output.iterdir() if path not in partial}
    missing = sorted(r for r in acknowledged if f"r{r:06d}" not in delivered)
    assert not missing, f"{len(missing)} requests answered 200 are not delivered, first {missing[:10]}"
    wrong = sorted(name for name, data in delivered.items() if data != body(int(name[1:])))
    assert not wrong, f"delivered files whose bytes differ from the request's: {wrong[:10]}"
    unknown = sorted(name for name in delivered if int(name[1:]) >= sent)
    assert not unknown, f"files of requests never sent: {unknown[:10]}"
    log = Deliveries(deliveries)
    log.read()
    logged = {name.removeprefix("./") for name in log.by_name}   # the log names path + filename
    assert logged == set(delivered), "the delivery log and the output folder disagree"
