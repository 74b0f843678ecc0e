"""The child process of tests/test_crash_listen_http.py: one run of an HTTP-receiving flow on its own Ray.

Like tests/crash_flow.py (whose delivery log and ``die_with_parent`` it shares), it starts a local
Ray of its own (its own temp dir, so the parent can find and SIGKILL every process of it and
nothing else) and runs ListenHTTP -> PutFile on a repository directory: ListenHTTP on 127.0.0.1
at ``--port``, each request's ``filename`` header the FlowFile's file name (as NiFi's ListenHTTP
takes it), so the parent knows which request every delivered file came from. It
prints one JSON line per event on stdout: ``started`` (the flow runs and ListenHTTP accepts
requests) and ``final`` (the final status, when the flow ran idle: the last run, which the parent
does not kill and sends nothing to). With ``--slow-commit`` every commit in the workers waits that
long before its log transaction (``slow_commits``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from flowactors import Flow
from flowactors.processors.http.listen import ListenHTTP

from crash_flow import LoggedPutFile, die_with_parent
from real_services import listening


def build_flow(args) -> Flow:
    flow = Flow("crash-listen", settings={"checkpoint_interval": args.checkpoint_interval,
                                          "administrative_yield": 0.5})
    listen = flow.add(ListenHTTP, "listen", properties={"Listening Port": str(args.port),
                                                        "Base Path": "contentListener"})
    put = flow.add(LoggedPutFile, "put", properties={"Directory": args.output,
                                                     "Conflict Resolution Strategy": "replace",
                                                     "Delivery Log": args.deliveries, "Run": args.run},
                   auto_terminate=["success"])
    flow.connect(listen, put, name="received")
    flow.connect(put, put, "failure", name="retried")   # a file that could not be written is tried again, never dropped
    return flow


#: seconds each commit waits before it is written to the log (set in the workers' environment)
SLOW_COMMIT_ENV = "FLOWACTORS_TEST_SLOW_COMMIT"


def slow_commits() -> None:
    """Worker setup hook: every session commit waits ``$FLOWACTORS_TEST_SLOW_COMMIT`` seconds before
    its write-ahead log transaction. A 200 sent before the commit would then be out for that long
    with nothing durable behind it, and a kill at a random moment would land in that window nearly
    every time: the delay makes the parent's test able to fail; production code stays untouched."""
    delay = float(os.environ.get(SLOW_COMMIT_ENV) or 0)
    if not delay:
        return
    from flowactors.engine.log_writer import LogWriter

    if getattr(LogWriter, "_slowed", False):
        return
    original = LogWriter.record

    def record(self, batch):
        time.sleep(delay)
        original(self, batch)

    LogWriter.record = record
    LogWriter._slowed = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--deliveries", required=True)
    parser.add_argument("--ray-temp", required=True, help="Ray's temp dir: unique per test run")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--run", type=int, default=0, help="run number, written into the delivery log")
    parser.add_argument("--checkpoint-interval", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--slow-commit", type=float, default=0.0, help="seconds each commit waits (slow_commits)")
    args = parser.parse_args()

    from flowactors.driver.running import run_flow, start_local_ray

    def emit(kind: str, payload) -> None:
        sys.stdout.write(f"{kind} {json.dumps(payload, default=str)}\n")
        sys.stdout.flush()

    threading.Thread(target=die_with_parent, args=(os.getppid(),), daemon=True).start()
    began = time.monotonic()
    runtime_env = {"worker_process_setup_hook": slow_commits, "env_vars": {SLOW_COMMIT_ENV: str(args.slow_commit)}}
    start_local_ray(num_cpus=2, _temp_dir=args.ray_temp, log_to_driver=False, configure_logging=False,
                    runtime_env=runtime_env)

    def started(controller) -> None:
        accepting = listening(args.port, 60.0)
        emit("started", {"seconds": round(time.monotonic() - began, 3), "listening": accepting})

    final = run_flow(build_flow(args), args.repository, timeout=args.timeout, on_started=started)
    emit("final", final)


if __name__ == "__main__":
    main()
