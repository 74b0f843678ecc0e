"""What ``flowactors validate`` and ``run`` say of a flow they cannot load: a NiFi flow using types
flowactors lacks gets a summary first; a file that is not JSON, not gzip or not Python gets one
line naming the file and the line; the Python-processor hint names the command the user ran."""

from __future__ import annotations

import orjson
import pytest

from flowactors.cli.main import main
from nifi_flows import STANDARD, group, processor, snapshot
from test_nifi_flow_import import python_flow


def errors(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


def test_an_unsupported_flow_is_summed_up_first_and_the_supported_types_are_named_once(tmp_path, capsys):
    root = group("root", "Legacy", None, None, processors=[
        *(processor("root", f"pull {n}", STANDARD + "ListSFTP", {}) for n in range(3)),
        processor("root", "push", STANDARD + "PutSFTP", {})])
    path = tmp_path / "legacy.json"
    path.write_bytes(orjson.dumps(snapshot(root, {})))
    assert main(["validate", str(path)]) == 2
    lines = errors(capsys)
    assert lines[0] == ("flowactors: flow 'Legacy' uses NiFi types flowactors does not have: "
                        "processor ListSFTP (3 components), processor PutSFTP (1 component)")
    assert len(lines) == 2 + 4 + 1 and lines[-1].startswith("(the NiFi processors")
    assert sum("docs/nifi-flows.md" in line for line in lines) == 1


@pytest.mark.parametrize("name, data, message", [
    ("broken.json", b'{\n  "name": "x",\n  "processors": [,]\n}', "broken.json: line 3, column 18: not valid JSON"),
    ("flow.json.gz", b"\x1f\x8b\x08\x00garbage", "flow.json.gz: not a readable gzip file"),
    ("list.json", b"[1, 2]", "list.json: a flow definition is a JSON object, not list"),
    ("flow.py", b"from flowactors import Flow\n\nflow = Flow('x'\n", "flow.py, line 3: '(' was never closed"),
    ("failing.py", b"import os\n\nflow = undefined_name\n", "failing.py, line 3: NameError: name 'undefined_name'"),
])
def test_a_file_that_cannot_be_read_is_one_line_naming_the_file_and_the_line(tmp_path, capsys, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    assert main(["validate", str(path)]) == 2
    [line] = errors(capsys)
    assert line.startswith("flowactors: ") and message in line, line


@pytest.mark.parametrize("command", ["validate", "run", "graph"])
def test_the_python_processor_hint_names_the_command_run(tmp_path, monkeypatch, capsys, command):
    monkeypatch.delenv("FLOWACTORS_PYTHON_EXTENSIONS", raising=False)
    path = tmp_path / "greetings.json"
    path.write_bytes(orjson.dumps(python_flow(str(tmp_path / "out"))))
    assert main([command, str(path), *(["-o", str(tmp_path / "flow.svg")] if command == "graph" else [])]) == 2
    hints = [line for line in errors(capsys) if "name the folder holding it" in line]
    assert len(hints) == 2 and all(f"(flowactors {command} --extensions DIR, or FLOWACTORS_PYTHON_EXTENSIONS)" in h
                                   for h in hints)
