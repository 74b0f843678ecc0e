"""The child process of tests/test_crash_cluster.py: one run of a file-moving flow on its own Ray.

It starts a separate local Ray cluster (its own temp dir, so the parent can find and SIGKILL every
process of it and nothing else), or with ``--engine in-process`` no Ray at all (the whole flow is
this one process), runs GetFile -> HashContent (sha256 attribute) -> PutFile on a
repository directory until the flow is idle, and prints one JSON line per event on stdout:
``ray`` (seconds ``ray.init`` took), ``started`` (seconds to a running flow, and the recovery
report) and ``final`` (the final status). With ``--report`` (tests/test_crash_actors.py, which
kills one actor at a time) it also prints, at most every ``REPORT_INTERVAL`` seconds, ``status``
(restarts, repairs, whether a repair runs, what is left) and, when they change, ``components``:
the pid and description of every named actor of the flow, so the parent knows whom to kill.

Two append-only logs make the parent's checks possible after a SIGKILL (each line is one
``os.write`` on an ``O_APPEND`` descriptor: it is in the page cache once the call returns):

* the delivery log: one line per file PutFile placed in the output directory, written right
  after the rename: name, the FlowFile's uuid, its sha256 attribute, the sha256 of the bytes
  actually written (read back) and the run number, so every delivery, duplicates included, can
  be checked;
* the checkpoint log (``--checkpoint-log``): stage lines from inside the FlowFile repository's
  checkpoint and the content repository's claim release, installed in the Ray workers by a
  ``worker_process_setup_hook`` (in this process on the in-process engine) so production code
  stays untouched. When the parent creates the
  file ``<checkpoint-log>.hold-<stage>``, the next checkpoint stops at that stage and says
  ``held <stage>``, so the parent can kill the cluster exactly there.

The source files are deterministic (``source_name``/``source_content``), so the parent knows what
every delivered file must contain without keeping a copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time

from flowactors import Flow, PropertyDescriptor
from flowactors.processors.files import GetFile, PutFile
from flowactors.processors.hash import HashContent

STAGES = ("begin", "synced", "wal-done", "release-half")
HOLD_LIMIT = 60.0  # a held checkpoint continues after this long (the parent failed to kill)
CHECKPOINT_LOG: str | None = None


def source_name(i: int) -> tuple[str, str]:
    """(subdirectory, file name) of source file ``i``: 1,000 files per directory."""
    return f"d{i // 1000:03d}", f"f{i:06d}.dat"


def source_content(i: int) -> bytes:
    """Deterministic binary content of 200..499 bytes (every byte value can occur)."""
    return hashlib.shake_256(f"flowactors crash source {i}".encode()).digest(200 + (i * 7919) % 300)


def write_sources(directory: str, count: int) -> None:
    """Write the ``count`` source files (unbuffered, about 20 us each)."""
    made: set[str] = set()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    for i in range(count):
        sub, name = source_name(i)
        folder = os.path.join(directory, sub)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        fd = os.open(os.path.join(folder, name), flags, 0o644)
        try:
            os.write(fd, source_content(i))
        finally:
            os.close(fd)


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _checkpoint_mark(stage: str, detail: str = "") -> None:
    """Log a checkpoint stage; if the parent armed a hold at this stage, stop here until killed."""
    log = CHECKPOINT_LOG
    _append(log, f"{time.time():.6f} {os.getpid()} {stage} {detail}\n")
    hold = f"{log}.hold-{stage}"
    if os.path.exists(hold):
        _append(log, f"{time.time():.6f} {os.getpid()} held {stage}\n")
        deadline = time.monotonic() + HOLD_LIMIT
        while os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.005)


def install_checkpoint_log() -> None:
    """Worker setup hook: wrap the checkpoint and the claim release with stage marks."""
    if not CHECKPOINT_LOG:
        return
    from repositories.content.repository import FileSystemContentRepository
    from repositories.flowfile import wal

    repo_class = wal.WriteAheadFlowFileRepository
    if getattr(repo_class, "_crash_marked", False):
        return
    original_sync = repo_class._sync
    original_checkpoint = repo_class.checkpoint
    original_release = FileSystemContentRepository.release

    def _sync(self):
        original_sync(self)
        if getattr(self, "_crash_in_checkpoint", False):
            _checkpoint_mark("synced")

    def checkpoint(self):
        _checkpoint_mark("begin")
        self._crash_in_checkpoint = True
        try:
            released = original_checkpoint(self)
        finally:
            self._crash_in_checkpoint = False
        _checkpoint_mark("wal-done", str(len(released)))
        return released

    def release(self, resources):
        resources = list(resources)
        half = len(resources) // 2
        done = original_release(self, resources[:half])
        _checkpoint_mark("release-half", f"{half}/{len(resources)}")
        done += original_release(self, resources[half:])
        _checkpoint_mark("release-done", str(len(resources)))
        return done

    repo_class._sync = _sync
    repo_class.checkpoint = checkpoint
    FileSystemContentRepository.release = release
    repo_class._crash_marked = True


class LoggedPutFile(PutFile):
    """PutFile that appends one line per placed file to a delivery log (uuid, hashes)."""

    properties = PutFile.properties + (PropertyDescriptor("Delivery Log", required=True),
                                       PropertyDescriptor("Run", required=True))

    def on_scheduled(self, context):
        self._log = os.open(context.property("Delivery Log").evaluate(),
                            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._run = context.property("Run").evaluate()

    def on_stopped(self, context):
        os.close(self._log)

    def placer(self, context, session):
        placer = super().placer(context, session)
        put = placer.put

        def logged(flowfile, directory, mode):
            path = put(flowfile, directory, mode)
            if path is not None:
                with open(path, "rb") as placed:
                    written = hashlib.sha256(placed.read()).hexdigest()
                attrs = flowfile.attributes
                os.write(self._log, f"{attrs.get('path', '')}{attrs.get('filename')} {flowfile.uuid} "
                                    f"{attrs.get('sha256', '-')} {written} {self._run}\n".encode())
            return path

        placer.put = logged
        return placer


def die_with_parent(parent: int) -> None:
    """If the test process goes away (killed, timed out), take this run's Ray cluster down with us:
    SIGKILL every descendant (gcs_server, raylet, workers), then exit. Runs on a daemon thread."""
    import psutil

    while os.getppid() == parent:
        time.sleep(0.5)
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass
    os._exit(3)


REPORT_INTERVAL = 0.25


def reporter(emit):
    """A ``run_flow(on_status=...)`` hook: says how the flow is doing."""
    import ray

    last = {"at": 0.0, "components": None}

    def components() -> dict:
        found = {}
        for name in ray.util.list_named_actors():
            try:
                handle = ray.get_actor(name)
                found[name] = ray.get(handle.__ray_call__.remote(lambda self: (os.getpid(), repr(self))), timeout=2)
            except Exception:  # dead or restarting: it shows up again when it is back
                continue
        return found

    def report(status: dict) -> None:
        now = time.monotonic()
        if now - last["at"] < REPORT_INTERVAL:
            return
        last["at"] = now
        seen = components()
        if seen != last["components"]:
            last["components"] = seen
            emit("components", seen)
        emit("status", {"at": time.time(), "restarts": status.get("restarts", {}),
                        "repairs": status.get("repairs", []), "repairing": status.get("repairing"),
                        "queued": sum(q["count"] for q in status["queues"])})

    return report


def build_flow(args):
    settings = {"checkpoint_interval": args.checkpoint_interval, "administrative_yield": 0.5}
    if args.executors:
        settings["executors"] = args.executors
    flow = Flow("crash", settings=settings)
    get = flow.add(GetFile, "get", properties={"Input Directory": args.source, "Batch Size": args.get_batch,
                                                "Recurse Subdirectories": "true"},
                   yield_duration="0.1 sec", run_schedule=args.get_schedule)
    hashed = flow.add(HashContent, "hash", properties={"Hash Attribute Name": "sha256"},
                      batch_size=args.batch, auto_terminate=["failure"])
    put = flow.add(LoggedPutFile, "put", properties={"Directory": os.path.join(args.output, "${path}"),
                                                     "Conflict Resolution Strategy": "replace",
                                                     "Delivery Log": args.deliveries, "Run": args.run},
                   batch_size=args.batch, auto_terminate=["success", "failure"], run_schedule=args.put_schedule)
    flow.connect(get, hashed, name="got")
    flow.connect(hashed, put, name="hashed")
    return flow


def main() -> None:
    global CHECKPOINT_LOG
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--deliveries", required=True)
    parser.add_argument("--ray-temp", required=True, help="Ray's temp dir: unique per test run")
    parser.add_argument("--checkpoint-log")
    parser.add_argument("--run", type=int, default=0, help="run number, written into the delivery log")
    parser.add_argument("--checkpoint-interval", type=float, default=20.0)
    parser.add_argument("--get-batch", type=int, default=500)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--engine", choices=("ray", "in-process"), default="ray")
    parser.add_argument("--executors", type=int, default=0, help="executors of the shared placement (0: one a CPU)")
    parser.add_argument("--report", action="store_true", help="print status and components lines")
    parser.add_argument("--get-schedule", default="0 sec", help="GetFile's run schedule (paces the flow)")
    parser.add_argument("--put-schedule", default="0 sec",
                        help="PutFile's run schedule (slower than GetFile: FlowFiles wait in the log)")
    args = parser.parse_args()
    CHECKPOINT_LOG = args.checkpoint_log

    import ray

    from flowactors.driver.running import run_flow, start_local_ray

    def emit(kind: str, payload) -> None:
        sys.stdout.write(f"{kind} {json.dumps(payload, default=str)}\n")
        sys.stdout.flush()

    threading.Thread(target=die_with_parent, args=(os.getppid(),), daemon=True).start()
    began = time.monotonic()
    if args.engine == "ray":
        runtime_env = {"worker_process_setup_hook": install_checkpoint_log} if CHECKPOINT_LOG else None
        start_local_ray(num_cpus=2, _temp_dir=args.ray_temp, log_to_driver=False, configure_logging=False,
                        runtime_env=runtime_env)
        emit("ray", {"seconds": round(time.monotonic() - began, 3)})
    else:
        install_checkpoint_log()

    def started(controller) -> None:
        if args.engine == "ray":
            recovery = ray.get(controller.handle.__ray_call__.remote(lambda self: self.recovery))
        else:
            recovery = controller.target.recovery
        emit("started", {"seconds": round(time.monotonic() - began, 3), "recovery": recovery})

    final = run_flow(build_flow(args), args.repository, timeout=args.timeout, on_started=started,
                     engine=args.engine, on_status=reporter(emit) if args.report else None)
    emit("final", final)


if __name__ == "__main__":
    main()
