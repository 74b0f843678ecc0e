"""ExecuteStreamCommand: the cases of NiFi's TestExecuteStreamCommand, on commands written in Python
(``sys.executable -c``), so they run wherever the tests do."""

from __future__ import annotations

import os
import select
import sys

import pytest

from flowactors.processors.stream_command import MAX_ERROR_BYTES, ExecuteStreamCommand, split_args
from flowactors.testing import ProcessorRunner

PY = sys.executable
#: a command that copies its input to its output in upper case
UPPER = "import sys; sys.stdout.write(sys.stdin.read().upper())"


def run(content: bytes = b"", attributes=None, engine: str = "in-process", **properties) -> ProcessorRunner:
    runner = ProcessorRunner(ExecuteStreamCommand, {"Command Path": PY, "Argument Delimiter": "|", **properties},
                             engine=engine)
    runner.enqueue(content, attributes or {})
    runner.run()
    return runner


def code(source: str) -> str:
    """Command Arguments running ``source`` with Python (Argument Delimiter '|', not in it)."""
    assert "|" not in source
    return f"-c|{source}"


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_content_through_the_command_to_output_stream(engine):
    runner = run(b"hello world", engine=engine, **{"Command Arguments": code(UPPER), "Output MIME Type": "text/plain"})
    [output] = runner.output("output stream")
    [original] = runner.output("original")
    assert runner.read(output) == b"HELLO WORLD" and runner.read(original) == b"hello world"
    assert runner.output("nonzero status") == []
    for flowfile in (output, original):
        a = flowfile.attributes
        assert a["execution.status"] == "0" and a["execution.command"] == PY and a["execution.error"] == ""
        assert a["execution.command.args"] == code(UPPER)
        assert a["mime.type"] == "text/plain"
    assert not output.is_penalized()


def test_nonzero_status_penalized_with_stderr():
    source = "import sys; sys.stderr.write('bad thing'); sys.stdout.write('partial'); sys.exit(3)"
    runner = run(b"x", **{"Command Arguments": code(source)})
    [output] = runner.output("nonzero status")
    assert runner.output("output stream") == []
    assert runner.read(output) == b"partial" and output.is_penalized()
    assert output.attributes["execution.status"] == "3" and output.attributes["execution.error"] == "bad thing"
    [original] = runner.output("original")
    assert original.attributes["execution.status"] == "3" and not original.is_penalized()


def test_stderr_kept_bounded():
    source = "import sys; sys.stderr.write('f' * 1000000)"
    runner = run(b"", **{"Command Arguments": code(source)})
    [output] = runner.output("output stream")
    assert output.attributes["execution.error"] == "f" * MAX_ERROR_BYTES and output.size == 0


def test_large_content_streams_both_ways():
    data = os.urandom(3 * 1024 * 1024 + 17)
    source = ("import sys, shutil; shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)")
    runner = run(data, **{"Command Arguments": code(source)})
    [output] = runner.output("output stream")
    assert runner.read(output) == data


def test_dynamic_property_arguments_in_index_order_with_expressions():
    source = "import sys; print('|'.join(sys.argv[1:]))"
    runner = run(b"", {"word": 'a "quoted" value'}, **{
        "Command Arguments Strategy": "Dynamic Property Arguments", "command.argument.10": "last",
        "command.argument.2": "${word}", "command.argument.1": source, "command.argument.0": "-c",
        "Ignore STDIN": "true"})
    [output] = runner.output("output stream")
    assert runner.read(output) == b'a "quoted" value|last\n'
    assert output.attributes["execution.command.args"] == f'-c\t{source}\ta "quoted" value\tlast'


def test_environment_from_dynamic_properties_and_working_directory(tmp_path):
    source = "import os; print(os.environ['NIFI_TEST_1'], os.environ['NIFI_TEST_2'], os.getcwd())"
    work = tmp_path / "made" / "here"
    runner = run(b"", **{"Command Arguments": code(source),
                         "NIFI_TEST_1": "testvalue1", "NIFI_TEST_2": "testvalue2", "Working Directory": str(work)})
    [output] = runner.output("output stream")
    assert runner.read(output).decode().split() == ["testvalue1", "testvalue2", str(work)]


def test_ignore_stdin_gives_the_command_no_input():
    runner = run(b"ignored", **{"Command Arguments": code("import sys; print(repr(sys.stdin.read()))"),
                                "Ignore STDIN": "true"})
    assert runner.contents("output stream") == [b"''\n"]


def test_output_to_attribute_truncated_and_only_original():
    runner = ProcessorRunner(ExecuteStreamCommand, {"Command Path": PY, "Output Destination Attribute": "outputDest",
                                                    "Max Attribute Length": "10", "Output MIME Type": "text/x",
                                                    "Command Arguments": code("print('Test was a success')"),
                                                    "Argument Delimiter": "|"})
    assert set(runner.queue_ids) == {"input", "original"}
    runner.enqueue(b"small test")
    runner.run()
    [original] = runner.output("original")
    assert runner.read(original) == b"small test"
    assert original.attributes["outputDest"] == "Test was a" and original.attributes["execution.status"] == "0"
    assert "mime.type" not in original.attributes


def test_output_to_attribute_keeps_original_even_on_nonzero_status():
    runner = run(b"", **{"Output Destination Attribute": "out", "Command Arguments": code("print('é' * 3); exit(1)"),
                         "Max Attribute Length": "3"})
    [original] = runner.output("original")
    assert original.attributes["out"] == "é"   # 3 bytes: the cut second character is dropped
    assert original.attributes["execution.status"] == "1" and not original.is_penalized()


def test_missing_command_rolls_back_with_one_clear_line():
    runner = ProcessorRunner(ExecuteStreamCommand, {"Command Path": "/no/such/program"})
    flowfile = runner.enqueue(b"kept")
    runner.run(raise_errors=False)
    [error] = runner.errors
    assert str(error) == "cannot run command '/no/such/program': No such file or directory"
    assert "\n" not in str(error)
    [queued] = runner.queues["input"].listing(10)
    assert queued.uuid == flowfile.uuid and runner.read(queued) == b"kept"
    assert runner.output("output stream") == runner.output("original") == []


def test_timeout_kills_the_whole_process_group(monkeypatch):
    from flowactors.processors import stream_command

    started: list = []

    class Immediate:   # a timer that fires as soon as the command's child has reported its pid
        def __init__(self, interval, function, args):
            self.function, self.args, self.daemon = function, args, True

        def start(self):
            started.append(self)

        def cancel(self):
            pass

    monkeypatch.setattr(stream_command._Execution, "timer", Immediate)
    source = ("import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'import time; "
              "time.sleep(60)']); print(child.pid, flush=True); time.sleep(60)")

    def sink_then_expire(runner_sink):
        def sink(chunk):
            runner_sink(chunk)
            started[0].function(*started[0].args)
        return sink

    original_run = stream_command._Execution.run
    monkeypatch.setattr(stream_command._Execution, "run",
                        lambda self, session, stdin, sink: original_run(self, session, stdin, sink_then_expire(sink)))
    runner = run(b"", **{"Command Arguments": code(source), "Command Timeout": "1 sec"})
    [output] = runner.output("nonzero status")
    assert output.attributes["execution.status"] == "137"
    assert output.attributes["execution.error"].startswith("killed after Command Timeout (1 s)")
    grandchild = int(runner.read(output).split()[0])
    try:
        handle = os.pidfd_open(grandchild)
    except ProcessLookupError:
        return   # gone already
    try:   # a process's pidfd reads ready once it has ended
        assert select.select([handle], [], [], 10)[0] == [handle]
    finally:
        os.close(handle)


def test_commands_still_running_are_killed_when_the_process_exits(monkeypatch):
    from flowactors.processors import stream_command

    class AtExit:   # started once the command runs: what the exit hook does, at once
        def __init__(self, interval, function, args):
            self.daemon = True

        def start(self):
            assert len(stream_command._RUNNING) == 1
            stream_command._kill_running()

        def cancel(self):
            pass

    monkeypatch.setattr(stream_command._Execution, "timer", AtExit)
    runner = run(b"", **{"Command Arguments": code("import time; time.sleep(60)"), "Command Timeout": "1 min"})
    [output] = runner.output("nonzero status")
    assert output.attributes["execution.status"] == "137" and stream_command._RUNNING == set()


@pytest.mark.parametrize("text, expected", [
    ("a;b;c", ["a", "b", "c"]), ('"a;b";c', ["a;b", "c"]), ("a\tb\nc", ["a", "b", "c"]), ("a;;b", ["a", "", "b"]),
])
def test_split_args_as_nifi(text, expected):
    assert split_args(text, ";") == expected


def test_validation_refuses_a_long_delimiter():
    problems = ExecuteStreamCommand.validate_properties({"Command Path": "x", "Argument Delimiter": ";;"})
    assert problems == ["property 'Argument Delimiter': must be a single character"]


def test_content_and_output_pass_a_chunk_at_a_time():
    """The module's claim that neither the content nor the output is ever whole in memory: the
    content is read, and the output handed on, in pieces of at most CHUNK bytes."""
    import io
    from contextlib import contextmanager

    from flowactors.processors._common import CHUNK
    from flowactors.processors.stream_command import _Execution

    size = 3 * CHUNK + 5
    reads: list[int] = []

    class Content(io.RawIOBase):
        left = size

        def readinto(self, buffer) -> int:
            count = min(len(buffer), self.left)
            buffer[:count] = b"x" * count
            self.left -= count
            return count

        def read(self, n: int = -1) -> bytes:
            reads.append(n)
            return super().read(n)

    class Session:
        @contextmanager
        def read(self, flowfile):
            yield Content()

    chunks: list[int] = []
    source = "import sys, shutil; shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)"
    execution = _Execution([PY, "-c", source], dict(os.environ), None, None)
    execution.run(Session(), object(), lambda chunk: chunks.append(len(chunk)))
    assert execution.status == 0 and sum(chunks) == size
    assert reads and all(0 < n <= CHUNK for n in reads) and max(chunks) <= CHUNK


def test_a_working_directory_that_cannot_be_created_rolls_back_with_one_line(tmp_path):
    """NiFi warns and then fails to start the command there; the command never runs elsewhere
    (it once ran in the engine's directory after a warning)."""
    (tmp_path / "a-file").write_text("not a folder")
    where = tmp_path / "a-file" / "work"
    marker = tmp_path / "ran"
    runner = ProcessorRunner(ExecuteStreamCommand, {"Command Path": PY, "Working Directory": str(where),
                                                    "Command Arguments": f"-c;open({str(marker)!r}, 'w')"})
    flowfile = runner.enqueue(b"kept")
    runner.run(raise_errors=False)
    [error] = runner.errors
    assert str(error) == f"cannot create working directory {where}: Not a directory"
    [queued] = runner.queues["input"].listing(10)
    assert queued.uuid == flowfile.uuid and runner.output("original") == [] and not marker.exists()
