"""Processor state (``context.state``): committed and rolled back with the session, compare-and-set
across tasks, durable in the FlowFile repository, and ListFile listing only new files after a
restart. Runner tests run on both engines; the flow tests run real flows over LMDB."""

from __future__ import annotations

import json
import os
import time
import sys
from pathlib import Path

import pytest
import ray.cloudpickle

from flowactors import Flow, Processor, Relationship
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import ListFile, UpdateAttribute
from flowactors.sdk.session import StateConflict
from flowactors.testing import ProcessorRunner
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import StateChange, StateMap

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the processors below, on Ray


class Offsets(Processor):
    """Emits one FlowFile a trigger numbered from its state's ``offset``, which it moves on;
    ``fail`` in its properties makes it raise after changing the state."""

    input_required = False
    dynamic_properties = True
    relationships = [Relationship("success")]

    def on_scheduled(self, context):
        if context.property("start").raw is not None and context.state.get().version < 0:
            context.state.set({"offset": context.property("start").raw})  # outside a trigger: at once

    def on_trigger(self, context, session):
        state = context.state.get()
        offset = int(state.get("offset", "0"))
        flowfile = session.put_attribute(session.create(), "offset", str(offset))
        session.transfer(flowfile, "success")
        assert context.state.replace(state, {"offset": str(offset + 1)})
        assert context.state.get() == StateMap(state.version + 1, {"offset": str(offset + 1)})
        if context.property("fail").raw == "true":
            raise RuntimeError("failed after moving the offset")


@pytest.mark.usefixtures("processor_engine")
class TestOnBothEngines:
    def test_a_state_change_commits_with_its_session(self):
        runner = ProcessorRunner(Offsets)
        runner.run(3)
        assert [f.attributes["offset"] for f in runner.output("success")] == ["0", "1", "2"]
        assert runner.context.state.get() == StateMap(2, {"offset": "3"})

    def test_a_trigger_that_fails_rolls_its_state_change_back(self):
        runner = ProcessorRunner(Offsets, {"fail": "true"})
        with pytest.raises(RuntimeError, match="failed after moving the offset"):
            runner.run()
        assert runner.output("success") == [] and runner.context.state.get() == StateMap()

    def test_a_change_outside_a_trigger_is_written_at_once(self):
        runner = ProcessorRunner(Offsets, {"start": "40", "fail": "true"})
        with pytest.raises(RuntimeError):
            runner.run()
        assert runner.context.state.get() == StateMap(0, {"offset": "40"})  # on_scheduled's, not the trigger's
        runner.context.state.clear()
        assert runner.context.state.get() == StateMap(1, {})

    def test_a_replace_that_lost_the_race_refuses_the_commit(self):
        runner = ProcessorRunner(Offsets)
        runner.run()
        store, component = runner.context.state._store, runner.component_id
        stale = runner.context.state.get()
        runner.context.state.set({"offset": "100"})  # another task moved it meanwhile
        assert not runner.context.state.replace(stale, {"offset": "1"})  # seen at once: nothing changed

        real_on_trigger = Offsets.on_trigger

        def race(self, context, session):  # the other task commits between this one's replace and commit
            real_on_trigger(self, context, session)
            store.commit_state(StateChange(component, {"offset": "500"}))

        runner.processor.on_trigger = race.__get__(runner.processor)
        with pytest.raises(StateConflict, match="another task changed it"):
            runner.run()
        assert runner.context.state.get() == StateMap(2, {"offset": "500"})
        assert [f.attributes["offset"] for f in runner.output("success")] == ["0"]  # the FlowFile went too

    def test_state_holds_strings_only(self):
        runner = ProcessorRunner(Offsets)
        with pytest.raises(ValueError, match="strings only"):
            runner.context.state.set({"offset": 3})
        with pytest.raises(ValueError, match="keep bookmarks there, not data"):
            runner.context.state.set({"big": "x" * (5 * 1024**2)})


# ------------------------------------------------------------------------- ListFile across restarts
def listing_flow(source: Path, tasks: int = 1) -> Flow:
    flow = Flow("listing")
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(source)}, concurrent_tasks=tasks)
    flow.connect(listing, flow.add(UpdateAttribute, "count", auto_terminate=["success"]))
    return flow


def write(directory: Path, names: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_text(name)


def listed(final: dict) -> int:
    """How many FlowFiles the run listed (what reached the processor after ListFile)."""
    assert not final.get("timed_out") and processor_totals(final)["list"]["errors"] == 0
    return processor_totals(final)["count"]["flowfiles_in"]


@pytest.mark.parametrize("engine", ["in-process", pytest.param("ray", marks=pytest.mark.ray)])
def test_listfile_lists_only_new_files_after_a_restart(request, tmp_path, engine):
    if engine == "ray":
        request.getfixturevalue("ray_session")
    source, repository = tmp_path / "in", tmp_path / "repository"
    write(source, [f"a{i}.txt" for i in range(20)])
    assert listed(run_flow(listing_flow(source), repository, engine=engine, timeout=120)) == 20
    write(source, ["b1.txt", "b2.txt"])
    (source / "a3.txt").write_text("changed, and longer")  # modified: listed again
    (source / "a4.txt").unlink()  # gone: leaves the state
    assert listed(run_flow(listing_flow(source), repository, engine=engine, timeout=120)) == 3
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        state = wal.get_state("listing/list")
    assert set(state.values) == {ListFile.TIMESTAMP, *(str(p) for p in source.iterdir())}
    assert int(state.values[ListFile.TIMESTAMP]) == max(p.stat().st_mtime_ns for p in source.iterdir())
    assert listed(run_flow(listing_flow(source), repository, engine=engine, timeout=120)) == 0


def test_listfile_tasks_share_one_state_and_list_each_file_once(tmp_path, monkeypatch):
    """Four tasks write one state with compare-and-set: a task that loses a race rolls back and
    lists again, without an error; every file is listed once and remembered. Each trigger holds
    its commit back a moment, so the four tasks' first listings race for certain."""
    source, repository = tmp_path / "in", tmp_path / "repository"
    write(source, [f"f{i:03d}.txt" for i in range(300)])
    real_on_trigger = ListFile.on_trigger

    def slow_to_commit(self, context, session):
        real_on_trigger(self, context, session)
        if session.has_work:  # it listed something: the commit comes a moment later
            time.sleep(0.3)

    monkeypatch.setattr(ListFile, "on_trigger", slow_to_commit)
    final = run_flow(listing_flow(source, tasks=4), repository, engine="in-process", timeout=120)
    assert listed(final) == 300
    assert processor_totals(final)["list"]["state_conflicts"] >= 1  # the race happened, and cost no error
    monkeypatch.undo()
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        state = wal.get_state("listing/list")
    assert len(state.values) == 301
    assert listed(run_flow(listing_flow(source, tasks=4), repository, engine="in-process", timeout=120)) == 0


def test_the_cli_lists_and_clears_a_stopped_flows_state(tmp_path, capsys):
    from flowactors.cli.main import main
    from repositories.lock import RepositoryLock

    source, repository = tmp_path / "in", tmp_path / "repository"
    write(source, ["a.txt", "b.txt"])
    assert listed(run_flow(listing_flow(source), repository, engine="in-process", timeout=120)) == 2
    assert main(["state", "list", "--repository", str(repository), "--json"]) == 0
    states = json.loads(capsys.readouterr().out)
    assert list(states) == ["listing/list"] and states["listing/list"]["version"] == 0
    assert set(states["listing/list"]["values"]) == {ListFile.TIMESTAMP, str(source / "a.txt"), str(source / "b.txt")}
    assert main(["state", "clear", "nope", "--repository", str(repository)]) == 2
    assert "no processor with stored state named 'nope'" in capsys.readouterr().err
    with RepositoryLock(repository, "a running flow"):
        assert main(["state", "clear", "list", "--repository", str(repository)]) == 1
    assert "a running flow" in capsys.readouterr().err
    assert main(["state", "clear", "list", "--repository", str(repository)]) == 0
    assert "cleared the state of listing/list (3 key(s) at version 0)" in capsys.readouterr().out
    assert listed(run_flow(listing_flow(source), repository, engine="in-process", timeout=120)) == 2  # starts over


# ------------------------------------------------------------------------- ListFile's settings changing
def lister(source: Path, repository, strategy: str, instance: int = 0, tasks: int = 1) -> ProcessorRunner:
    """A ListFile runner over ``repository``'s state (the same component as the others)."""
    runner = ProcessorRunner(ListFile, {"Input Directory": str(source), "Listing Strategy": strategy},
                             flowfile_repository=repository, engine="in-process", name="list")
    runner.context.instance, runner.context.concurrent_tasks = instance, tasks
    return runner


def names(runner: ProcessorRunner) -> list[str]:
    return sorted(f.attributes["filename"] for f in runner.output("success"))


def aged(source: Path, ages: dict[str, int]) -> None:
    """Files written with modification times ``age`` seconds ago."""
    now = time.time()
    for name, age in ages.items():
        (source / name).write_text(name)
        os.utime(source / name, (now - age, now - age))


def test_listfile_changing_strategy_goes_on_from_what_was_kept(tmp_path):
    from repositories.flowfile import InMemoryFlowFileRepository

    source, repository = tmp_path / "in", InMemoryFlowFileRepository()
    source.mkdir()
    aged(source, {"a": 300, "b": 200, "c": 100})
    first = lister(source, repository, ListFile.ENTITIES)
    first.run()
    assert names(first) == ["a", "b", "c"]
    by_time = lister(source, repository, ListFile.TIMESTAMPS)
    by_time.run()
    assert names(by_time) == []  # from the newest file Tracking Entities listed
    aged(source, {"d": 50})
    by_time.run()
    assert names(by_time) == ["d"]
    assert set(by_time.context.state.get().values) == {ListFile.TIMESTAMP, ListFile.IDS}  # the paths went

    back = lister(source, repository, ListFile.ENTITIES)
    back.run()
    assert names(back) == []  # older than the time kept: listed already
    aged(source, {"e": 10})
    back.run()
    aged(source, {"moved-in": 1000})  # once it tracks files again, an old one is listed too
    back.run()
    assert names(back) == ["e", "moved-in"]


def test_listfile_changing_its_task_count_lists_again_rather_than_miss(tmp_path):
    from repositories.flowfile import InMemoryFlowFileRepository

    source, repository = tmp_path / "in", InMemoryFlowFileRepository()
    source.mkdir()
    ages = {f"f{i:02d}": 1000 - 10 * i for i in range(20)}  # f19 the newest
    aged(source, ages)
    two = [lister(source, repository, ListFile.TIMESTAMPS, instance, 2) for instance in range(2)]
    for runner in two:
        runner.run()
    assert sorted(n for r in two for n in names(r)) == sorted(ages)
    kept = two[0].context.state.get().values
    oldest = min(int(kept[f"{i}/2.{ListFile.TIMESTAMP}"]) for i in range(2))
    three = [lister(source, repository, ListFile.TIMESTAMPS, instance, 3) for instance in range(3)]
    for runner in three:
        runner.run()
    again = sorted(n for r in three for n in names(r))
    assert again == sorted(n for n in ages if (source / n).stat().st_mtime_ns > oldest)  # none missed
    aged(source, {"new": 1})
    for runner in three:
        runner.run()
    assert sorted(n for r in three for n in names(r)) == sorted([*again, "new"])  # once, by its task


def test_the_cli_shows_a_damaged_state_and_clear_repairs_it(tmp_path, capsys):
    import lmdb

    from flowactors.cli.main import main

    source, repository = tmp_path / "in", tmp_path / "repository"
    write(source, ["a.txt"])
    assert listed(run_flow(listing_flow(source), repository, engine="in-process", timeout=120)) == 1
    env = lmdb.open(str(repository / "flowfile"), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"state", txn=txn)
        txn.put(b"listing/list", txn.get(b"listing/list", db=db)[:9] + b"{garbled", db=db)
    env.close()
    assert main(["state", "list", "--repository", str(repository)]) == 0
    assert "listing/list: DAMAGED" in capsys.readouterr().out
    assert main(["state", "clear", "list", "--repository", str(repository)]) == 0
    assert "which was damaged" in capsys.readouterr().out
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        assert wal.get_state("listing/list") == StateMap(1, {})
