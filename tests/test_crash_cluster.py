"""Kill -9 the WHOLE Ray cluster again and again while 100,000 files move, and lose nothing.

Issue 3's crash test. The flow (``tests/crash_flow.py``, run as a child process with its own
local Ray) is GetFile -> HashContent (``sha256`` attribute) -> PutFile over a repository
directory. The parent places 100,000 deterministic source files (written, or the output of the
campaign before, which its checks proved identical: ``SourcePool``), then 20 times: starts the child
on the same repository, waits a random time (seeded) after the flow started, and SIGKILLs every
process of that child's cluster at once (driver, gcs_server, raylet, every worker, agents),
found as the child's process tree *and* by the child's unique temp dir in their command line,
working directory or open files (Ray workers put themselves in their own process groups, so a
process-group kill alone would miss them). After each kill it checks that no FlowFile was lost
at that instant: every name is still a source file, a FlowFile in the write-ahead log, or
delivered. Then a last run goes to completion and the parent checks every one of the 100,000
names: delivered, byte-identical, every delivery's ``sha256`` attribute equal to the hash of the
bytes placed, nothing left in the source directory or the log, claimant counts never needing a
fix at any restart, no claim file left behind, and duplicates only as many as sessions in flight.
It also checks by uuid: every FlowFile found in the log after any kill was later delivered under
that same uuid (a FlowFile dropped by recovery and taken again from its source file would pass
every check by name).

The third test runs the second's campaign on the in-process engine (the whole flow in the child
process, no Ray), 8 kills.

The second test aims every kill inside a checkpoint: the child logs checkpoint stages from
inside its Ray workers and, when the parent arms a stage, holds the checkpoint there until the
cluster is killed (see ``crash_flow.py``).

Set ``FLOWACTORS_CRASH_SEED`` to replay a run's kill times; the seed is printed.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.provenance import WriteAheadProvenanceRepository

# part of `make test` (and so CI); `make test-crash` runs only the crash campaigns (these, and tests/test_crash_actors.py)
pytestmark = [pytest.mark.crash, pytest.mark.cluster_crash]

HERE = Path(__file__).resolve().parent
CHILD = HERE / "crash_flow.py"
_spec = importlib.util.spec_from_file_location("crash_flow", CHILD)
crash_flow = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash_flow)

FILES = 100_000
KILLS = 20
GET_BATCH = 500  # GetFile's Batch Size: FlowFiles committed (then sources deleted) per session
BATCH = 1000  # HashContent's and PutFile's session batch
START_TIMEOUT = 180.0
SEED = int(os.environ.get("FLOWACTORS_CRASH_SEED", "20240603"))


# ----------------------------------------------------------------------------- the cluster
def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _protected() -> set[int]:
    """This process and its ancestors: never killed, whatever they look like."""
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


class ChildCluster:
    """One run of crash_flow.py (or another ``child`` script taking ``--ray-temp``) with its own
    Ray, and the means to SIGKILL all of it."""

    def __init__(self, work: Path, run: int, args: list[str], child: Path = CHILD):
        self.run = run
        # short, unique path: Ray's unix sockets live under it (108-byte limit) and every
        # process of this cluster has it in its command line, cwd or open files
        self.marker = tempfile.mkdtemp(prefix="facrash-", dir="/tmp")
        self.stderr_path = work / "logs" / f"child-{run:02d}.err"
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(child), "--ray-temp", os.path.join(self.marker, "ray"), *args]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(command, cwd=self.marker, stdout=subprocess.PIPE, stderr=stderr,
                                         start_new_session=True, text=True)
        self.events: list[tuple[float, str, dict]] = []
        self.started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, _, payload = line.partition(" ")
            try:
                data = json.loads(payload)
            except ValueError:
                data = {"text": line}
            self.events.append((time.monotonic(), kind, data))
            if kind == "started":
                self.started.set()

    def event(self, kind: str) -> dict | None:
        found = [data for _, k, data in self.events if k == kind]
        return found[-1] if found else None

    def wait_started(self) -> dict:
        deadline = time.monotonic() + START_TIMEOUT
        while not self.started.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"run {self.run}: the flow did not start (exit {self.proc.returncode}):\n"
                                     f"{self.stderr_tail()}")
        return self.event("started")

    def stderr_tail(self, lines: int = 40) -> str:
        text = self.stderr_path.read_text(errors="replace").splitlines()
        return "\n".join(t for t in text[-lines:] if "Token authentication" not in t)

    def members(self) -> dict[int, psutil.Process]:
        """Every live process of this cluster: the child's tree, plus anything carrying the marker."""
        found: dict[int, psutil.Process] = {}
        protected = _protected()
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                found[p.pid] = p
        except psutil.NoSuchProcess:
            pass
        for p in psutil.process_iter():
            if p.pid in found or p.pid in protected:
                continue
            try:
                inside = self.marker + os.sep
                if (inside in " ".join(p.cmdline()) or (p.cwd() + os.sep).startswith(inside)
                        or any(f.path.startswith(inside) for f in p.open_files())):
                    found[p.pid] = p
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return {pid: p for pid, p in found.items() if pid not in protected and _alive(p)}

    def kill(self) -> dict:
        """SIGKILL every process of the cluster at once, then sweep until none is left."""
        targets = self.members()
        killed_at = time.monotonic()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the child leads its own session/group
        except ProcessLookupError:
            pass
        for p in targets.values():
            try:
                p.send_signal(signal.SIGKILL)  # psutil refuses if the pid was reused
            except psutil.NoSuchProcess:
                pass
        names = collections.Counter()
        for p in targets.values():
            try:
                names[p.name()] += 1
            except psutil.Error:
                names["?"] += 1
        deadline = time.monotonic() + 60
        while True:
            psutil.wait_procs([p for p in targets.values() if _alive(p)], timeout=1)
            stragglers = {pid: p for pid, p in self.members().items() if _alive(p)}
            for p in stragglers.values():
                try:
                    p.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
            targets.update(stragglers)
            if not stragglers and not any(_alive(p) for p in targets.values()):
                break
            assert time.monotonic() < deadline, f"processes of run {self.run} survive SIGKILL: {stragglers}"
        self.proc.wait(30)
        self._reader.join(10)
        shutil.rmtree(self.marker, ignore_errors=True)
        return {"at": killed_at, "processes": len(targets), "names": dict(names)}

    def finish(self, timeout: float) -> dict:
        """Wait for a run to end by itself (idle flow); return its final status."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"final run did not finish in {timeout} s:\n{self.stderr_tail()}")
        self._reader.join(10)
        leftovers = self.members()
        for p in leftovers.values():  # a clean exit must not leave Ray behind; make sure anyway
            p.send_signal(signal.SIGKILL)
        shutil.rmtree(self.marker, ignore_errors=True)
        assert self.proc.returncode == 0, f"final run failed ({self.proc.returncode}):\n{self.stderr_tail()}"
        final = self.event("final")
        assert final is not None, self.stderr_tail()
        return final


# ----------------------------------------------------------------------------- what is where
def expected_names(files: int = FILES) -> dict[str, int]:
    return {"/".join(crash_flow.source_name(i)): i for i in range(files)}


def source_names(source: Path) -> set[str]:
    names = set()
    for sub in os.scandir(source):
        names.update(f"{sub.name}/{e.name}" for e in os.scandir(sub.path))
    return names


def wal_contents(repository: Path) -> tuple[collections.Counter, set[str]]:
    """(path + filename) of every FlowFile in the write-ahead log (swapped ones included), by
    name, and their uuids."""
    found: collections.Counter = collections.Counter()
    uuids: set[str] = set()
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        for _queue, flowfiles in wal.recover(include_swapped=True):
            found.update(f"{f.attributes.get('path', '')}{f.attributes.get('filename')}" for f in flowfiles)
            uuids.update(f.uuid for f in flowfiles)
    finally:
        wal.close()
    return found, uuids


class Deliveries:
    """The delivery log, read incrementally: name -> [(uuid, sha256 attribute, sha256 written, run)]."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.by_name: dict[str, list[tuple[str, str, str]]] = collections.defaultdict(list)
        self.lines = 0

    def read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as log:
            log.seek(self.offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            name, uuid, attribute, written, run = line.split(" ")
            self.by_name[name].append((uuid, attribute, written, int(run)))
            self.lines += 1


# ----------------------------------------------------------------------------- the campaign
class SourcePool:
    """The campaigns' source files, written once for the module: a campaign whose checks passed
    (every name placed once, byte-identical to its source) gives its output back, and the next
    campaign takes it as its source folder by one rename. Writing 100,000 files took 13 to 45 s
    here, the slow end right after a campaign's cleanup deleted 200,000."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def take(self, source: Path, files: int) -> str:
        """Fills the empty ``source`` with the ``files`` source files; says how."""
        kept = self.folder / str(files)
        if kept.exists():
            kept.rename(source)
            return "given back by the campaign before"
        crash_flow.write_sources(str(source), files)
        return "written"

    def give_back(self, output: Path, files: int) -> None:
        """After a campaign's checks passed: its output, less what PutFile left unfinished, is the
        next campaign's source folder."""
        for unfinished in output.glob("*/*.partial"):
            unfinished.unlink()
        output.rename(self.folder / str(files))


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> SourcePool:
    return SourcePool(tmp_path_factory.mktemp("crash-sources"))


def run_campaign(tmp_path: Path, sources: SourcePool, *, checkpoint_kills: bool, checkpoint_interval: float,
                 engine: str = "ray", files: int = FILES, kill_count: int = KILLS) -> dict:
    rng = random.Random(SEED + (1 if checkpoint_kills else 0))
    print(f"\nFLOWACTORS_CRASH_SEED={SEED}", flush=True)
    source, output, repository = tmp_path / "source", tmp_path / "output", tmp_path / "repository"
    deliveries_path, checkpoint_log = tmp_path / "deliveries.log", tmp_path / "checkpoints.log"
    began = time.monotonic()
    how = sources.take(source, files)
    timings = {"sources": time.monotonic() - began}
    names = expected_names(files)
    args = ["--repository", str(repository), "--source", str(source), "--output", str(output),
            "--deliveries", str(deliveries_path), "--checkpoint-log", str(checkpoint_log),
            "--checkpoint-interval", str(checkpoint_interval), "--get-batch", str(GET_BATCH),
            "--batch", str(BATCH), "--engine", engine]
    deliveries = Deliveries(deliveries_path)
    kills: list[dict] = []
    recoveries: list[dict] = []
    committed: set[str] = set()  # the uuid of every FlowFile found in the log after some kill
    remaining, rate = files, 2000.0  # FlowFiles left; a first guess of FlowFiles delivered per second
    cluster = None
    # a SIGTERM (e.g. an outer `timeout`) becomes an exception, so that `finally` kills the cluster
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        for run in range(kill_count):
            cluster = ChildCluster(tmp_path, run, [*args, "--run", str(run)])
            started = cluster.wait_started()
            recoveries.append(started["recovery"])
            delay = kill_delay(rng, remaining, rate, kill_count - run)
            delivered_before = deliveries.lines
            time.sleep(delay)
            stage = held = None
            if checkpoint_kills:
                stage = crash_flow.STAGES[run % len(crash_flow.STAGES)]
                held = _hold_checkpoint(checkpoint_log, stage, cluster)
            outcome = cluster.kill()
            for hold in checkpoint_log.parent.glob(checkpoint_log.name + ".hold-*"):
                hold.unlink()
            deliveries.read()
            rate = max(rate, (deliveries.lines - delivered_before) / delay)   # the fastest seen
            in_source, (in_wal, uuids) = source_names(source), wal_contents(repository)
            committed |= uuids
            remaining = len(in_source) + sum(in_wal.values())
            lost = set(names) - in_source - set(in_wal) - set(deliveries.by_name)
            assert not lost, (f"kill {run}: {len(lost)} FlowFiles are nowhere (not a source file, not in the "
                              f"log, never delivered), e.g. {sorted(lost)[:5]}")
            kills.append({"run": run, "delay": round(delay, 2), "stage": stage, "held": held, **outcome,
                          "remaining": remaining, "in_source": len(in_source), "in_wal": sum(in_wal.values()),
                          "delivered": len(deliveries.by_name),
                          "inside_checkpoint": _inside_checkpoint(checkpoint_log),
                          "ray_seconds": (cluster.event("ray") or {}).get("seconds"),
                          "start_seconds": started["seconds"]})
            print(f"kill {run:2d}: {delay:4.2f} s after start (ray.init {kills[-1]['ray_seconds']} s, "
                  f"start {started['seconds']:4.1f} s), {outcome['processes']} processes, stage {stage}, "
                  f"inside checkpoint {kills[-1]['inside_checkpoint']}; then {len(in_source)} source files, "
                  f"{sum(in_wal.values())} in the log, {len(deliveries.by_name)} names delivered; at start: "
                  f"restored {started['recovery'].get('restored')}, "
                  f"orphans removed {started['recovery'].get('orphans_removed')}", flush=True)
        timings["kills"] = time.monotonic() - began - timings["sources"]
        cluster = ChildCluster(tmp_path, kill_count, [*args, "--run", str(kill_count)])
        recoveries.append(cluster.wait_started()["recovery"])
        final = cluster.finish(timeout=600)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if cluster is not None and cluster.proc.returncode is None:
            cluster.kill()  # never leave a cluster behind, whatever failed
    timings["final_run"] = time.monotonic() - began - timings["sources"] - timings["kills"]
    deliveries.read()
    return {"names": names, "source": source, "sources": how, "output": output, "repository": repository,
            "deliveries": deliveries, "kills": kills, "recoveries": recoveries, "final": final,
            "timings": timings, "checkpoint_log": checkpoint_log, "committed_uuids": committed}


def _terminated(signum, frame):
    raise SystemExit(f"terminated by signal {signum}")


def kill_delay(rng: random.Random, remaining: int, rate: float, kills_left: int) -> float:
    """Seconds from the flow's start to the kill: random in 1..6 s, but short enough that the
    kills still to come all land while FlowFiles move, at the fastest rate seen so far (once the
    sources are read, a restart drains what the log restored much faster than files were read:
    at 1 s or more the last kills of a fast engine landed after the flow had finished)."""
    high = min(6.0, max(0.6, 0.8 * remaining / max(rate, 1.0) / kills_left))
    return rng.uniform(min(1.0, high / 2), high)


def _hold_checkpoint(log: Path, stage: str, cluster: ChildCluster) -> bool:
    """Arm a hold at ``stage`` and wait until a checkpoint is parked there (True) or 15 s passed."""
    offset = log.stat().st_size if log.exists() else 0
    Path(f"{log}.hold-{stage}").touch()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and cluster.proc.poll() is None:
        with open(log, "rb") as f:
            f.seek(offset)
            if f" held {stage}\n".encode() in f.read():
                return True
        time.sleep(0.005)
    return False


def _inside_checkpoint(log: Path) -> bool:
    """Whether the last checkpoint logged before the kill never finished."""
    if not log.exists():
        return False
    stages = [line.split()[2] for line in log.read_text().splitlines() if len(line.split()) >= 3]
    if "begin" not in stages:
        return False
    last = stages[len(stages) - 1 - stages[::-1].index("begin"):]
    return "release-done" not in last and not (last[-1] == "wal-done" and _released_nothing(log))


def _released_nothing(log: Path) -> bool:
    """The last wal-done line released no claim, so no content release follows it."""
    lines = [line.split() for line in log.read_text().splitlines()]
    wal_done = [parts for parts in lines if len(parts) >= 4 and parts[2] == "wal-done"]
    return bool(wal_done) and wal_done[-1][3] == "0"


# ----------------------------------------------------------------------------- the checks
def check_outcome(result: dict) -> dict:
    began = time.monotonic()
    names, deliveries, kills = result["names"], result["deliveries"], result["kills"]
    output, source, repository = result["output"], result["source"], result["repository"]
    final = result["final"]
    assert all(k["remaining"] > 0 for k in kills), "a kill landed after the flow had finished"

    # every restart found the log consistent: no claimant count, queue size or index to fix
    for run, recovery in enumerate(result["recoveries"]):
        counts = recovery["claimant_counts"]
        assert counts["fixed"] == 0 and not counts["queues_fixed"] and not counts["index_rebuilt"], (
            f"restart {run} had to fix the write-ahead log: {counts}")
    assert all(p["errors"] == 0 for p in final["processors"]), final["processors"]

    # nothing left behind: sources all taken, the log empty, every claim released
    assert source_names(source) == set()
    assert wal_contents(repository) == (collections.Counter(), set())
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        stats = wal.stats()
    finally:
        wal.close()
    assert stats["flowfiles"] == 0 and stats["queues"] == 0 and stats["claims"] == 0, stats
    live_claims = list(FileSystemContentRepository.from_settings(repository, Settings()).iter_resource_claims())
    assert live_claims == [], f"{len(live_claims)} claim files outlived every FlowFile"

    # every name delivered, byte-identical; every delivery carried the right hash
    placed = {}
    partial = 0
    for sub in os.scandir(output):
        for entry in os.scandir(sub.path):
            if entry.name.startswith(".") and entry.name.endswith(".partial"):
                partial += 1
            else:
                placed[f"{sub.name}/{entry.name}"] = entry.path
    assert set(placed) == set(names), (f"missing {len(set(names) - set(placed))}, "
                                       f"unexpected {len(set(placed) - set(names))}")
    same_uuid = other_uuid = 0
    placed_again: collections.Counter = collections.Counter()  # run -> FlowFiles placed again in it
    taken_again: collections.Counter = collections.Counter()  # run -> files taken again in it
    for name, i in names.items():
        content = crash_flow.source_content(i)
        with open(placed[name], "rb") as f:
            assert f.read() == content, f"{name} differs from its source"
        digest = hashlib.sha256(content).hexdigest()
        delivered = deliveries.by_name.get(name)
        assert delivered, f"{name} is in the output but was never logged as delivered"
        for uuid, attribute, written, _run in delivered:
            assert attribute == written == digest, f"{name} delivered by {uuid} with wrong bytes or hash"
        runs = collections.Counter((u, r) for u, _, _, r in delivered)
        assert max(runs.values()) == 1, f"{name}: one FlowFile placed twice in one run (no kill between): {runs}"
        uuids = collections.Counter(u for u, _, _, _ in delivered)
        same_uuid += sum(n - 1 for n in uuids.values())
        other_uuid += len(uuids) - 1
        first_run: dict[str, int] = {}
        for uuid, _, _, run in sorted(delivered, key=lambda d: d[3]):
            if uuid in first_run:
                placed_again[run] += 1  # the kill before this run cut its PutFile session
            else:
                first_run[uuid] = run
        for run in sorted(first_run.values())[1:]:
            taken_again[run] += 1  # the kill before this run cut the GetFile session that took it
    assert set(deliveries.by_name) <= set(names)

    # by uuid, not only by name (a FlowFile dropped by recovery would be taken again from its source
    # file under a new uuid, and every check by name would pass): every FlowFile the log held after
    # a kill was delivered under that same uuid (the log is empty now, checked above)
    delivered_uuids = {u for entries in deliveries.by_name.values() for u, _, _, _ in entries}
    never = result["committed_uuids"] - delivered_uuids
    assert result["committed_uuids"] and not never, (
        f"{len(never)} FlowFiles committed to the log before a kill were never delivered, e.g. {sorted(never)[:5]}")

    # duplicates only from sessions in flight at a kill, bounded per kill: each kill can cut at
    # most one PutFile session (its FlowFiles placed again) and one GetFile session (its files
    # taken again under new uuids). A duplicate shows up in the run that delivers it, which may
    # come several kills later, so the bound holds for every run counted from the start: by the
    # end of run r (which r kills preceded), at most r sessions' worth of each
    duplicates = deliveries.lines - len(names)
    assert duplicates == same_uuid + other_uuid
    for run in range(len(kills) + 1):
        placed = sum(n for r, n in placed_again.items() if r <= run)
        taken = sum(n for r, n in taken_again.items() if r <= run)
        assert placed <= run * BATCH and taken <= run * GET_BATCH, (run, placed_again, taken_again)
    assert partial <= len(kills), f"{partial} temporary .partial files for {len(kills)} kills"

    # provenance: events are registered after the write-ahead log commit, so a kill can lose the
    # events of the sessions it interrupted there, and no more
    no_receive, no_send = provenance_gaps(repository, names)
    assert len(no_receive) <= len(kills) * GET_BATCH, len(no_receive)
    assert len(no_send) <= len(kills) * BATCH, len(no_send)
    summary = {"duplicates": duplicates, "redelivered_same_flowfile": same_uuid,
               "committed_uuids_checked": len(result["committed_uuids"]),
               "names_without_receive_event": len(no_receive), "names_without_send_event": len(no_send),
               "taken_again_from_source": other_uuid, "partial_files_left": partial,
               "most_placed_again_after_one_kill": max(placed_again.values(), default=0),
               "most_taken_again_after_one_kill": max(taken_again.values(), default=0),
               "kills_inside_checkpoint": sum(bool(k["inside_checkpoint"]) for k in kills),
               "sources": result["sources"], "timings": {k: round(v, 1) for k, v in result["timings"].items()},
               "start_seconds": [k["start_seconds"] for k in kills],
               "ray_init_seconds": [k["ray_seconds"] for k in kills],
               "orphans_removed": [r.get("orphans_removed") for r in result["recoveries"]],
               "restored": [r.get("restored") for r in result["recoveries"]],
               "final_seconds": round(final["seconds"], 1),
               "final_processors": {p["name"]: {k: p[k] for k in ("flowfiles_in", "flowfiles_out", "commits",
                                                                   "task_seconds")}
                                    for p in final["processors"]}}
    summary["timings"]["checks"] = round(time.monotonic() - began, 1)
    print(json.dumps(summary))
    return summary


def provenance_gaps(repository: Path, names: dict[str, int]) -> tuple[set[str], set[str]]:
    """Names with no RECEIVE event (GetFile) and with no SEND event (PutFile) in provenance."""
    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    try:
        def named(event_type: str) -> set[str]:
            return {f"{e.updated_attributes.get('path', '')}{e.updated_attributes.get('filename')}"
                    for e in provenance.search(event_type=event_type, limit=None)}

        return set(names) - named("RECEIVE"), set(names) - named("SEND")
    finally:
        provenance.close()


def _cleanup(tmp_path: Path, result: dict, sources: SourcePool) -> None:
    """After every check passed: the output goes back to ``sources``; the content archive and the
    rest are large, and are kept only on failure."""
    began = time.monotonic()
    sources.give_back(result["output"], len(result["names"]))
    for name in ("output", "repository", "source"):
        shutil.rmtree(tmp_path / name, ignore_errors=True)
    print(f"cleanup took {time.monotonic() - began:.1f} s")


@pytest.mark.timeout(1800)
def test_kill_whole_cluster_20_times_while_100k_files_move(tmp_path, sources):
    result = run_campaign(tmp_path, sources, checkpoint_kills=False, checkpoint_interval=1.0)
    assert len(result["kills"]) == KILLS
    check_outcome(result)
    _cleanup(tmp_path, result, sources)


@pytest.mark.timeout(900)
def test_kill_the_in_process_engine_8_times_inside_checkpoints(tmp_path, sources):
    """The in-process engine runs the same controller, WAL and commit order in one process: the
    same campaign, killing that process with SIGKILL, loses nothing either."""
    result = run_campaign(tmp_path, sources, checkpoint_kills=True, checkpoint_interval=0.5, engine="in-process",
                          files=FILES, kill_count=8)
    summary = check_outcome(result)
    assert len(result["kills"]) == 8 and all(k["processes"] == 1 for k in result["kills"]), result["kills"]
    assert all(k["held"] for k in result["kills"]), [k["stage"] for k in result["kills"] if not k["held"]]
    assert summary["kills_inside_checkpoint"] == 8, result["kills"]
    _cleanup(tmp_path, result, sources)


@pytest.mark.timeout(1800)
def test_kill_whole_cluster_inside_checkpoints(tmp_path, sources):
    result = run_campaign(tmp_path, sources, checkpoint_kills=True, checkpoint_interval=0.2)
    assert len(result["kills"]) == KILLS
    summary = check_outcome(result)
    stages = collections.Counter(k["stage"] for k in result["kills"])
    assert all(k["held"] for k in result["kills"]), [k["stage"] for k in result["kills"] if not k["held"]]
    assert summary["kills_inside_checkpoint"] == len(result["kills"]), result["kills"]
    assert len(stages) == len(crash_flow.STAGES), stages
    _cleanup(tmp_path, result, sources)
