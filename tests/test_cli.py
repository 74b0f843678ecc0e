"""The flowactors command: clear errors with exit codes, and real runs of .py and .json flows."""

from __future__ import annotations

import json
import textwrap

import pytest

from flowactors.cli.main import main

FLOW_PY = textwrap.dedent('''
    from flowactors import Flow, Processor, Relationship
    from flowactors.processors import GenerateFlowFile, PutFile

    class Stamp(Processor):
        """Defined in the flow file itself: shipped to the Ray workers by value."""
        relationships = [Relationship("success")]

        def on_trigger(self, context, session):
            for flowfile in session.get_batch():
                flowfile = session.put_attribute(flowfile, "filename", flowfile.attributes["n"] + ".txt")
                session.transfer(flowfile, "success")

    flow = Flow("cli-test")
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "Custom Text": "hello ${n}", "Batch Size": 5, "Max FlowFiles": 20, "n": "${UUID()}"})
    stamp = flow.add(Stamp, "stamp")
    put = flow.add(PutFile, "put", properties={"Directory": "OUT"}, auto_terminate=["success", "failure"])
    flow.connect(generate, stamp)
    flow.connect(stamp, put)
''')


def write_flow(tmp_path, text=FLOW_PY):
    out = tmp_path / "out"
    path = tmp_path / "flow.py"
    path.write_text(text.replace("OUT", str(out)))
    return path, out


def test_validate_reports_ok(tmp_path, capsys):
    path, _ = write_flow(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert "flow 'cli-test' is valid: 3 processors, 2 connections" in capsys.readouterr().out


def test_validate_lists_every_problem_without_traceback(tmp_path, capsys):
    path, _ = write_flow(tmp_path, FLOW_PY.replace('auto_terminate=["success", "failure"]', "")
                         .replace('"Batch Size": 5', '"Batch Size": "five"'))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "property 'Batch Size'" in err
    assert "relationship 'success' is neither connected nor auto-terminated" in err
    assert "relationship 'failure' is neither connected nor auto-terminated" in err


@pytest.mark.parametrize("args, message", [
    (["validate", "missing.py"], "no flow file at missing.py"),
    (["validate", "flow.txt"], "a flow is a .py or .json file"),
    (["run", "x.py", "--setting", "novalue"], "no flow file"),
    (["status", "--repository", "nowhere"], "no FlowFile repository in nowhere"),
])
def test_user_mistakes_get_one_clear_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.txt").write_text("")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_flow_file_without_a_flow(tmp_path, capsys):
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    assert main(["validate", str(path)]) == 2
    assert "defines no flow" in capsys.readouterr().err


def test_bad_setting_is_refused_with_known_names(tmp_path, capsys, ray_session):
    path, _ = write_flow(tmp_path)
    assert main(["run", str(path), "--repository", str(tmp_path / "repo"), "--quiet",
                 "--setting", "checkpoint_intervall=5"]) == 2
    err = capsys.readouterr().err
    assert "unknown setting 'checkpoint_intervall'; did you mean 'checkpoint_interval'?" in err


@pytest.mark.ray
def test_run_python_flow_then_json_definition_then_status(tmp_path, capsys, ray_session):
    path, out = write_flow(tmp_path)
    repo = tmp_path / "repo"
    assert main(["run", str(path), "--repository", str(repo), "--quiet", "--json",
                 "--setting", "checkpoint_interval=1"]) == 0
    final = json.loads(capsys.readouterr().out)
    totals = {p["name"]: p for p in final["processors"]}
    assert totals["generate"]["flowfiles_out"] == 20 and totals["put"]["flowfiles_in"] == 20
    written = sorted(out.iterdir())
    assert len(written) == 20 and written[0].read_text().startswith("hello ")

    from flowactors.cli.main import load_flow
    definition = tmp_path / "flow.json"
    flow = load_flow(path)
    flow.processors["stamp"].type = __import__("flowactors.processors", fromlist=["Funnel"]).Funnel
    flow.save(definition)
    assert main(["run", str(definition), "--repository", str(repo), "--quiet"]) == 0
    assert len(list(out.iterdir())) == 40  # Funnel keeps GenerateFlowFile's unique filenames

    assert main(["status", "--repository", str(repo)]) == 0
    assert f"repository {repo}: 0 FlowFiles queued" in capsys.readouterr().out


def test_run_says_what_is_starting_before_the_flow_runs(tmp_path, capsys, ray_session):
    path, _ = write_flow(tmp_path)
    assert main(["run", str(path), "--repository", str(tmp_path / "repo")]) == 0
    steps = [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines()
             if line.startswith("starting flow 'cli-test': ")]
    # every step once, in order, counted where there is something to count (3 processors here,
    # on 2 executors: the test session's Ray has 2 CPUs)
    assert steps == ["repositories 0/3", "recovering the FlowFile repository 1/3",
                     "opening the provenance repository 2/3", "executors 0/2", "executors 1/2", "executors 2/2",
                     "restoring queued FlowFiles", "processor tasks 0/3", "running 3/3", "started"]
