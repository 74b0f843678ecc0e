"""Kill -9 ONE actor at a time, 30 times, while 30,000 files move: the flow heals itself, loses nothing.

Issue 14's crash test. The flow is the whole-cluster campaign's (``tests/crash_flow.py``: GetFile
-> HashContent -> PutFile on its own local Ray), in one run with three shared executors, so that
each kind of component is a process of its own:

* processor host: ``executor.0`` (GetFile);
* queue host: ``executor.1`` (the ``got`` queue, and HashContent beside it);
* each repository actor: FlowFile (the write-ahead log), content, provenance;
* the controller (its death takes every component with it: they are its children).

The parent cycles through these kinds, SIGKILLs the one process, and waits for the flow to heal
(Ray restarts the actor; the controller repairs the flow from the log; the driver restarts a
dead controller), timing it. After each heal it checks that nothing is lost at that instant
(every name is a source file, a FlowFile in the log, or delivered), that every FlowFile in the log
has its content, and remembers the uuid of every FlowFile in the log, read just before the kill and
after the heal (PutFile is paced slower than GetFile, so FlowFiles wait there). The flow must then
finish on its own. At the end every name is delivered byte-identical with the right hash, the log and the
sources are empty, every FlowFile once in the log was delivered under that uuid, and duplicates
come only from sessions in flight at a kill.

Set ``FLOWACTORS_CRASH_SEED`` to replay a run's kill times; the seed is printed.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest

from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from test_crash_cluster import (SEED, ChildCluster, Deliveries, _terminated, crash_flow, expected_names,
                                provenance_gaps, source_names, wal_contents)

pytestmark = [pytest.mark.crash, pytest.mark.cluster_crash]

FILES = 30_000
KILLS = 30
GET_BATCH = 250
BATCH = 500
#: GetFile takes GET_BATCH files this often: about 400 files/s, so that 30 kills and heals
#: (about 3.5 s each) land while the files move
GET_SCHEDULE = "0.6 sec"
#: PutFile places BATCH files this often: 125 files/s, slower than GetFile even with the heals
#: stalling both, so FlowFiles wait in the log at kills and the check by uuid has something to check.
#: Unpaced, the flow drained each batch within 0.6 s and a CI run found the log empty at all 30 heals
PUT_SCHEDULE = "4 sec"
HEAL_TIMEOUT = 120.0
#: kind of component -> (name of its actor, the key its restarts are counted under)
TARGETS = {
    "processor host": ("crash.executor.0", "executor"),
    "queue host": ("crash.executor.1", "executor"),
    "flowfile repository": ("crash.flowfile-repository", "flowfile-repository"),
    "content repository": ("crash.content-repository", "content-repository"),
    "provenance repository": ("crash.provenance-repository", "provenance-repository"),
    "controller": ("crash.controller", "controller"),
}


def latest(cluster: ChildCluster, kind: str) -> tuple[float, dict] | None:
    found = [(at, data) for at, k, data in cluster.events if k == kind]
    return found[-1] if found else None


def wait_healed(cluster: ChildCluster, name: str, restarts_key: str, pid: int, before: int,
                killed_at: float) -> float:
    """Seconds from the kill until the flow runs again: the restart counted, no repair running,
    and a new process answering under the actor's name."""
    deadline = time.monotonic() + HEAL_TIMEOUT
    while time.monotonic() < deadline:
        status = latest(cluster, "status")
        components = latest(cluster, "components")
        if status and components:
            data = status[1]
            back = components[1].get(name)
            if (data["restarts"].get(restarts_key, 0) > before and not data["repairing"]
                    and back is not None and back[0] != pid and data["at"] > killed_at):
                return data["at"] - killed_at
        if cluster.proc.poll() is not None:
            time.sleep(0.5)  # the reader thread takes in the last lines
            final = latest(cluster, "final")
            ending = {k: final[1].get(k) for k in ("stalled", "timed_out", "repairs", "restarts")} if final else None
            raise AssertionError(f"the flow ended while healing (exit {cluster.proc.returncode}); its final "
                                 f"status: {ending}\n{cluster.stderr_tail()}")
        time.sleep(0.05)
    raise AssertionError(f"the flow did not heal within {HEAL_TIMEOUT:g} s after {name} was killed:\n"
                         f"{cluster.stderr_tail()}")


def records_without_content(repository: Path) -> list[str]:
    """FlowFiles in the log whose claim file is missing or too short (checked twice: a FlowFile
    that left the log meanwhile may have had its claim released, which is right)."""
    content = FileSystemContentRepository.from_settings(repository, Settings())

    def missing() -> dict[str, tuple]:
        out = {}
        wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
        try:
            for _queue, flowfiles in wal.recover(include_swapped=True):
                for f in flowfiles:
                    if f.claim is None:
                        continue
                    try:
                        short = os.stat(content.path_of(f.claim.resource)).st_size < f.claim.offset + f.claim.length
                    except FileNotFoundError:
                        short = True
                    if short:
                        out[f.uuid] = f.claim
        finally:
            wal.close()
        return out

    first = missing()
    return sorted(set(first) & set(missing())) if first else []


@pytest.mark.timeout(1800)
def test_kill_one_actor_at_a_time_30_times_while_30k_files_move(tmp_path):
    rng = random.Random(SEED + 14)
    print(f"\nFLOWACTORS_CRASH_SEED={SEED}", flush=True)
    source, output, repository = tmp_path / "source", tmp_path / "output", tmp_path / "repository"
    deliveries = Deliveries(tmp_path / "deliveries.log")
    crash_flow.write_sources(str(source), FILES)
    names = expected_names(FILES)
    args = ["--repository", str(repository), "--source", str(source), "--output", str(output),
            "--deliveries", str(deliveries.path), "--checkpoint-interval", "1", "--get-batch", str(GET_BATCH),
            "--batch", str(BATCH), "--executors", "3", "--report", "--run", "0",
            "--get-schedule", GET_SCHEDULE, "--put-schedule", PUT_SCHEDULE]
    kinds = list(TARGETS)
    kills: list[dict] = []
    committed: set[str] = set()  # every uuid seen in the log just before or after a kill
    heals_finding_flowfiles = 0
    lines_at_kill: list[int] = []  # delivery log lines written before each kill
    previous = signal.signal(signal.SIGTERM, _terminated)
    cluster = ChildCluster(tmp_path, 0, args)
    try:
        cluster.wait_started()
        for k in range(KILLS):
            kind = kinds[k % len(kinds)]
            name, key = TARGETS[kind]
            time.sleep(rng.uniform(0.3, 1.2))
            _, components = latest(cluster, "components")
            _, status = latest(cluster, "status")
            pid = components[name][0]
            deliveries.read()
            lines_at_kill.append(deliveries.lines)
            committed |= wal_contents(repository)[1]  # what the log holds as the kill lands
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL)
            heal = wait_healed(cluster, name, key, pid, status["restarts"].get(key, 0), killed_at)
            # in the order a FlowFile moves (a source file is committed before it is deleted, a
            # delivery logged before its FlowFile leaves the log), the flow running meanwhile
            in_source = source_names(source)
            in_wal, uuids = wal_contents(repository)
            deliveries.read()
            committed |= uuids
            if uuids:
                heals_finding_flowfiles += 1
            lost = set(names) - in_source - set(in_wal) - set(deliveries.by_name)
            assert not lost, (f"kill {k} ({kind}): {len(lost)} FlowFiles are nowhere (not a source file, not "
                              f"in the log, never delivered), e.g. {sorted(lost)[:5]}")
            without = records_without_content(repository)
            assert not without, f"kill {k} ({kind}): FlowFiles in the log without content: {without[:5]}"
            remaining = len(in_source) + sum(in_wal.values())
            assert remaining > 0, f"kill {k} ({kind}) landed after the flow had finished"
            kills.append({"kind": kind, "heal_seconds": round(heal, 2), "remaining": remaining})
            print(f"kill {k:2d}: {kind:22s} pid {pid}: healed in {heal:5.2f} s; {len(in_source)} source files, "
                  f"{sum(in_wal.values())} in the log, {len(deliveries.by_name)} names delivered", flush=True)
        final = cluster.finish(timeout=600)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if cluster.proc.returncode is None or cluster.members():
            cluster.kill()  # never leave a cluster behind, whatever failed
        shutil.rmtree(cluster.marker, ignore_errors=True)  # nor its temp dir (a run that ended early)
    deliveries.read()

    # the flow finished on its own, counting every restart
    restarts = final["restarts"]
    for kind in kinds:
        name, key = TARGETS[kind]
        expected = sum(1 for k in kills if TARGETS[k["kind"]][1] == key)
        assert restarts.get(key, 0) >= expected, (key, restarts)

    # nothing left behind, every name delivered byte-identical with the right hash
    assert source_names(source) == set()
    assert wal_contents(repository) == (collections.Counter(), set())
    placed = {f"{sub.name}/{e.name}": e.path for sub in os.scandir(output) for e in os.scandir(sub.path)
              if not e.name.endswith(".partial")}
    assert set(placed) == set(names), (len(set(names) - set(placed)), len(set(placed) - set(names)))
    # content a killed session wrote, or a commit in doubt that did not land, was deleted by the
    # repairs: no claim file outlives the FlowFiles
    live_claims = list(FileSystemContentRepository.from_settings(repository, Settings()).iter_resource_claims())
    assert live_claims == [], f"{len(live_claims)} claim files outlived every FlowFile"
    first_delivery: dict[tuple[str, str], int] = {}
    placed_again: list[int] = []  # delivery-log line of every FlowFile placed a second time
    taken_again: list[int] = []  # first line of every file taken again under a new uuid
    for name, i in names.items():
        content = crash_flow.source_content(i)
        with open(placed[name], "rb") as f:
            assert f.read() == content, f"{name} differs from its source"
        digest = hashlib.sha256(content).hexdigest()
        for uuid, attribute, written, _run in deliveries.by_name[name]:
            assert attribute == written == digest, f"{name} delivered by {uuid} with wrong bytes or hash"
    line = 0
    seen_names: set[str] = set()
    with open(deliveries.path) as log:
        for line, text in enumerate(log):
            name, uuid = text.split(" ")[:2]
            if (name, uuid) in first_delivery:
                placed_again.append(line)
            else:
                first_delivery[(name, uuid)] = line
                if name in seen_names:
                    taken_again.append(line)
                seen_names.add(name)

    # by uuid: every FlowFile the log held at a kill was delivered under that same uuid. The check
    # means something only if the log held FlowFiles at most kills (PUT_SCHEDULE sees to it)
    assert heals_finding_flowfiles >= KILLS // 2, (
        f"the log held FlowFiles after only {heals_finding_flowfiles} of {KILLS} heals: the pacing "
        f"no longer keeps FlowFiles waiting, so the check by uuid checks too little")
    delivered_uuids = {u for _name, u in first_delivery}
    never = committed - delivered_uuids
    assert not never, f"{len(never)} FlowFiles in the log at a kill were never delivered"

    # duplicates only from sessions in flight at a kill: each kill can cut at most one PutFile
    # session (placed again) and one GetFile session (taken again). A duplicate shows up after the
    # heal of the kill that caused it, possibly after later kills, so the bound holds counted from
    # the start: before kill k + 1, at most k + 1 kills' worth
    def per_kill(lines: list[int]) -> list[int]:
        bounds = lines_at_kill + [line + 1]
        return [sum(bounds[k] <= x < bounds[k + 1] for x in lines) for k in range(len(lines_at_kill))]

    assert not [x for x in placed_again + taken_again if x < lines_at_kill[0]], "a duplicate before any kill"
    again = per_kill(placed_again)
    retaken = per_kill(taken_again)
    for k in range(len(kills)):
        assert sum(again[:k + 1]) <= (k + 1) * BATCH and sum(retaken[:k + 1]) <= (k + 1) * GET_BATCH, (
            k, again, retaken)

    # provenance: a commit's events are kept in the log's outbox by the commit's own transaction
    # until provenance's journal has them, so no kill of any component loses the events of a
    # session that committed, and a session cut before its commit is done again (its events then)
    no_receive, no_send = provenance_gaps(repository, names)
    assert not no_receive and not no_send, (len(no_receive), sorted(no_receive)[:5], len(no_send), sorted(no_send)[:5])

    heal = collections.defaultdict(list)
    for k in kills:
        heal[k["kind"]].append(k["heal_seconds"])
    summary = {"kills": len(kills), "restarts": restarts,
               "heal_seconds": {kind: {"kills": len(v), "median": sorted(v)[len(v) // 2], "max": max(v)}
                                for kind, v in heal.items()},
               "placed_again": sum(again), "taken_again": sum(retaken),
               "most_duplicates_after_one_kill": max(a + b for a, b in zip(again, retaken)),
               "committed_uuids_checked": len(committed), "heals_finding_flowfiles_in_the_log": heals_finding_flowfiles,
               "final_seconds": round(final["seconds"], 1),
               "names_without_receive_event": len(no_receive), "names_without_send_event": len(no_send)}
    print(json.dumps(summary))
