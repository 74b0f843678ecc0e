"""A flow that cannot start says why in one message, on both engines, and leaves nothing behind.

Issue 14, point 4: a truncated or garbled write-ahead log and an impossible setting used to end in
a 77-92-line traceback (a half-started controller's stop raised AttributeError over the real
error), and ``flowactors status`` called the damaged repository healthy.
"""

from __future__ import annotations

import pickle
import struct

import pytest

from flowactors import Flow, Processor, Relationship
from flowactors.cli.main import main
from flowactors.driver.running import run_flow
from flowactors.processors import GenerateFlowFile
from repositories.flowfile.errors import RepositoryCorruptError, UnsupportedFormatVersionError
from repositories.lock import RepositoryLock

FLOW = """
from flowactors import Flow
from flowactors.processors import GenerateFlowFile, UpdateAttribute
flow = Flow("damaged")
generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1})
flow.add(UpdateAttribute, "hold", auto_terminate=["success"])
flow.connect(generate, "hold", name="q")
"""


class Hold(Processor):
    """Takes nothing, so what reaches it stays queued in the log."""

    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        context.yield_()


@pytest.fixture
def repository(tmp_path):
    """A repository with 40 FlowFiles queued in 'q', written by a real (in-process) run."""
    flow = Flow("damaged")
    flow.add(GenerateFlowFile, "generate", properties={"Batch Size": 40, "Max FlowFiles": 40})
    flow.add(Hold, "hold", auto_terminate=["success"])
    flow.connect("generate", "hold", name="q")
    root = tmp_path / "repository"
    run_flow(flow, root, engine="in-process", timeout=60, until=lambda s: s["queues"][0]["count"] == 40)
    (tmp_path / "flow.py").write_text(FLOW)
    return root


def truncate(root):
    data = root / "flowfile" / "data.mdb"
    with open(data, "r+b") as f:
        f.truncate(20_000)


def garble(root):
    """Overwrite the page every open reads first: the root of LMDB's main database, which lists the
    sub-databases (read from the newer of the two meta pages: its txnid, and the main database's
    root page, at their offsets in LMDB's ``MDB_meta`` after the 16-byte page header)."""
    path = root / "flowfile" / "data.mdb"
    data = path.read_bytes()
    newest = max((0, 4096), key=lambda meta: struct.unpack_from("<Q", data, meta + 144)[0])
    (main_root,) = struct.unpack_from("<Q", data, newest + 128)
    with open(path, "r+b") as f:
        f.seek(main_root * 4096)
        f.write(b"\xde\xad\xbe\xef" * 1024)


@pytest.mark.parametrize("engine", ["in-process", "ray"])
# a garbled page is reported as LMDB sees it (here the main database's root, which names the
# sub-databases: MDB_CORRUPTED or MDB_BAD_TXN as LMDB finds it)
@pytest.mark.parametrize("damage, says", [(truncate, "was truncated"), (garble, "LMDB reports")])
def test_a_damaged_log_is_one_message_naming_the_file_and_what_to_do(request, repository, tmp_path, capsys,
                                                                    engine, damage, says):
    if engine == "ray":
        request.getfixturevalue("ray_session")
    damage(repository)
    assert main(["status", "--repository", str(repository)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"repository {repository} is DAMAGED: ") and says in out and "Restore the directory" in out

    status = main(["run", str(tmp_path / "flow.py"), "--engine", engine, "--repository", str(repository), "--quiet"])
    err = capsys.readouterr().err
    assert status == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("flowactors: flow 'damaged' could not start: FlowFile repository at ")
    assert says in lines[0] and "Restore the directory from a backup" in lines[0]
    with RepositoryLock(repository, "the test"):  # the failed start let go of the folder
        pass


@pytest.mark.parametrize("engine", ["in-process", "ray"])
def test_an_impossible_setting_is_refused_before_anything_starts(request, repository, tmp_path, capsys, engine):
    if engine == "ray":
        request.getfixturevalue("ray_session")
    assert main(["run", str(tmp_path / "flow.py"), "--engine", engine, "--repository", str(repository),
                 "--quiet", "--setting", "content_sections=0"]) == 2
    assert capsys.readouterr().err.strip() == "flowactors: setting 'content_sections' must be at least 1, not 0"
    # the repository was not touched: the 40 FlowFiles are still there
    assert main(["status", "--repository", str(repository)]) == 0
    assert "40 FlowFiles queued" in capsys.readouterr().out


def test_repository_errors_cross_a_ray_call_intact():
    for error in (RepositoryCorruptError("/r/flowfile", "data.mdb was truncated"),
                  UnsupportedFormatVersionError("/r/flowfile", 9, 1)):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error) and copy.path == error.path


def test_a_controller_that_dies_as_it_starts_is_one_line_naming_the_cause(ray_session, tmp_path, monkeypatch):
    """Issue 50, finding 4: an actor that died on start showed ActorUnavailableError or a Ray
    traceback, the cause only in Ray's logs. A processor whose module the driver imports but Ray's
    workers cannot: the controller's process dies unpickling the flow; the run says so in one line."""
    (tmp_path / "driver_only.py").write_text(
        "from flowactors import Processor, Relationship\n"
        "class DriverOnly(Processor):\n"
        "    relationships = [Relationship('success')]\n"
        "    def on_trigger(self, context, session):\n"
        "        context.yield_()\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # here only: Ray's workers never see the folder
    from driver_only import DriverOnly

    flow = Flow("unimportable")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1})
    flow.add(DriverOnly, "driver-only", auto_terminate=["success"])
    flow.connect(generate, "driver-only")
    with pytest.raises(Exception) as raised:
        run_flow(flow, tmp_path / "repository", engine="ray", timeout=60)
    message = str(raised.value)
    assert type(raised.value).__name__ == "FlowStartError" and "\n" not in message
    assert message.startswith("flow 'unimportable' could not start: its controller's process ended as it started: "
                              "ModuleNotFoundError: No module named 'driver_only' (Ray's worker processes import")
    with RepositoryLock(tmp_path / "repository", "test"):  # nothing left holding the repository
        pass
