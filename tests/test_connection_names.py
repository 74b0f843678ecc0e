"""Default connection names are safe to type in a shell, and FlowFiles an older version queued
under a connection's former default name (``gen:success->put``) are recovered under the new one,
from a real write-ahead log on disk."""

from __future__ import annotations

import shlex
import uuid

from flowactors import Flow
from flowactors.driver.running import run_flow
from flowactors.processors import GetFile, PutFile, RouteOnAttribute
from flowactors.sdk.flow import default_connection_name, former_default_name
from flowactors.sdk.settings import Settings
from repositories.flowfile.swapfile import swap_directory, write_swap_file
from repositories.flowfile.wal import WriteAheadFlowFileRepository
from repositories.model import FlowFile, QueuedFlowFile
from repositories.provenance import ProvenanceEventType, WriteAheadProvenanceRepository


def old_flowfile(number: int) -> FlowFile:
    """An empty FlowFile named ``old-<number>``, queued in that order."""
    u = str(uuid.uuid4())
    return FlowFile(number + 1, u, {"uuid": u, "filename": f"old-{number}"}, None, 1000, 1000,
                    queue_date=1000, queue_index=number)


def test_default_names_are_one_shell_word():
    flow = Flow("names")
    gen = flow.add(GetFile, "gen", properties={"Input Directory": "in"})
    route = flow.add(RouteOnAttribute, "route by level", properties={"big": "${fileSize:gt(9)}"})
    put = flow.add(PutFile, "badel", properties={"Directory": "out"}, auto_terminate=["success", "failure"])
    assert flow.connect(gen, route).name == "gen.success.route-by-level"
    assert flow.connect(route, put, ["big", "unmatched"]).name == "route-by-level.big-unmatched.badel"
    assert flow.connect(gen, put, name="gen:success->badel").name == "gen:success->badel"  # given names stay
    for connection in flow.connections[:2]:
        assert shlex.split(f"flowactors queue list {connection.name}")[-1] == connection.name
    assert default_connection_name("a:b", ["x y"], "c>d") == "a-b.x-y.c-d"
    # letters of any script stay: two processors named in Cyrillic do not collide as '_'
    cyrillic = default_connection_name("генератор", ["success"], "журнал")
    assert cyrillic == "генератор.success.журнал"
    assert shlex.split(f"flowactors queue list {cyrillic}")[-1] == cyrillic


def test_the_renames_are_those_of_default_names_only():
    flow = Flow("names")
    gen = flow.add(GetFile, "gen", properties={"Input Directory": "in"})
    put = flow.add(PutFile, "badel", properties={"Directory": "out"})
    flow.connect(gen, put)
    flow.connect(gen, put, "success", name="mine")
    assert flow.renamed_queues() == {"gen:success->badel": "gen.success.badel"}
    assert former_default_name("gen", ["a", "b"], "badel") == "gen:a+b->badel"


def test_a_queue_renamed_in_the_log_keeps_its_order_and_takes_its_swap_files_back(tmp_path):
    old = [old_flowfile(i) for i in range(5)]
    with WriteAheadFlowFileRepository.from_settings(tmp_path, Settings()) as log:
        for flowfile in old:
            log.commit([QueuedFlowFile(flowfile, "gen:success->badel")], [])
        log.register_swap_file("gen:success->badel", "swapped-1", 2, 0, flowfiles=old[1:3])
        assert log.rename_queue("gen:success->badel", "gen.success.badel") == 5
        # the swap file's header names the former queue: its records are back in the queue, in place
        assert log.queue_counts() == {"gen.success.badel": 5}
        assert log.swap_files() == []
        assert [f.uuid for f in log.iter_queue("gen.success.badel").__next__()] == [f.uuid for f in old]


def test_flowfiles_queued_under_a_former_default_name_are_delivered(tmp_path):
    repository = tmp_path / "repository"
    queued = [old_flowfile(i) for i in range(6)]
    with WriteAheadFlowFileRepository.from_settings(repository, Settings()) as log:  # an older version's run
        log.commit([QueuedFlowFile(f, "gen:success->badel") for f in queued], [])
        log.register_swap_file("gen:success->badel", "gen-swap-1.swap", 2, 0, flowfiles=queued[4:])
    write_swap_file(swap_directory(repository), "gen-swap-1.swap", "gen:success->badel", queued[4:])
    (tmp_path / "in").mkdir()
    flow = Flow("renamed")
    gen = flow.add(GetFile, "gen", properties={"Input Directory": str(tmp_path / "in")}, run_schedule="1 sec")
    put = flow.add(PutFile, "badel", properties={"Directory": str(tmp_path / "out")},
                   auto_terminate=["success", "failure"])
    flow.connect(gen, put)
    final = run_flow(flow, repository, engine="in-process", timeout=120, stall_seconds=30)
    assert not final.get("timed_out") and "stalled" not in final
    assert [q.get("swap_errors") for q in final["queues"]] == [[]]
    assert not (swap_directory(repository) / "gen-swap-1.swap").exists()  # an orphan once the move forgot it
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"old-{i}" for i in range(6)]
    with WriteAheadProvenanceRepository.from_settings(repository, Settings()) as provenance:
        sent = [e.updated_attributes["filename"] for e in provenance.events(0, 100)
                if e.event_type == ProvenanceEventType.SEND]
    assert sent == [f"old-{i}" for i in range(6)]  # each once, in the order queued
    with WriteAheadFlowFileRepository.from_settings(repository, Settings()) as log:
        assert log.queue_counts() == {} and log.swap_files() == []
