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


# ---------------------------------------------------------------------- the command line itself

def every_command(app=None, path=()):
    """Every command path of the flowactors command group, groups included."""
    import typer.main

    from flowactors.cli.main import build_app

    group = typer.main.get_command(build_app()) if app is None else app
    yield path
    for name, command in getattr(group, "commands", {}).items():
        yield from every_command(command, (*path, name))


def test_flowactors_alone_prints_the_help_not_an_error(capsys):
    assert main([]) == 0
    captured = capsys.readouterr()
    assert "Usage: flowactors [OPTIONS] COMMAND" in captured.out and captured.err == ""
    for command in ("run", "validate", "status", "errors", "provenance", "lineage", "queue", "state", "submit"):
        assert f" {command} " in captured.out
    assert main(["queue"]) == 0 and "Usage: flowactors queue [OPTIONS] COMMAND" in capsys.readouterr().out


def test_version_comes_from_the_package_metadata(capsys):
    import importlib.metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"flowactors {importlib.metadata.version('flowactors')}\n"


def test_every_help_is_plain_text_and_offers_completion(capsys):
    paths = list(every_command())
    assert ("provenance", "search") in paths and ("queue", "list") in paths and ("stop",) in paths
    for path in paths:
        assert main([*path, "--help"]) == 0, path
        out = capsys.readouterr().out
        assert "``" not in out and ":class:" not in out, (path, out)
        assert f"Usage: flowactors {' '.join(path)}".rstrip() in out
    main(["--help"])
    assert "--install-completion" in capsys.readouterr().out
    assert main(["--show-completion", "bash"]) == 0
    assert "_FLOWACTORS_COMPLETE" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["run"], "flowactors: Missing argument 'FLOW'. (see flowactors run --help)"),
    (["run", "f.py", "--engine", "fast"], "'fast' is not one of ray, in-process, stateless"),
    (["run", "f.py", "--log-level", "loud"], "'loud' is not one of DEBUG, INFO, WARNING, ERROR"),
    (["run", "f.py", "--duration", "2", "--until-idle"], "--until-idle and --duration exclude each other"),
    (["nosuch"], "flowactors: No such command 'nosuch'."),
    (["errors", "--repository", "nowhere"], "flowactors: no repository folder nowhere"),
    (["provenance", "search", "--attribute", "colour"],
     "flowactors: Invalid value for '--attribute': takes KEY=VALUE, not 'colour'"),
    (["submit", "f.py", "--env", "=x"], "flowactors: Invalid value for '--env': takes KEY=VALUE, not '=x'"),
])
def test_command_line_mistakes_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("options, message", [
    (["--nodes", "2", "--engine", "in-process"], "a flow runs on several nodes on the Ray engine only, not "
                                                 "engine='in-process'"),
    (["--nodes", "2", "--stateless"], "a flow runs on several nodes on the Ray engine only, not engine='stateless'"),
    (["--dashboard", "--engine", "in-process"], "the Ray dashboard shows flows on the Ray engine only, not "
                                                "engine='in-process'"),
])
def test_run_options_an_engine_has_not_are_one_line(tmp_path, capsys, options, message):
    """run_flow's own checks (RunOptionError) end the command with exit 2, before anything runs."""
    flow, out = write_flow(tmp_path)
    assert main(["run", str(flow), "--repository", str(tmp_path / "repository"), *options]) == 2
    err = capsys.readouterr().err
    assert err == f"flowactors: {message}\n"
    assert not out.exists() and not (tmp_path / "repository").exists()


# ---------------------------------------------------------------------- errors: one line live, in full on demand

FAILING_FLOW = textwrap.dedent('''
    from flowactors import Flow, Processor, Relationship
    from flowactors.processors import GenerateFlowFile

    class Explode(Processor):
        relationships = [Relationship("success")]

        def on_trigger(self, context, session):
            if session.get() is not None:
                trace = "\\n".join(f"  File 'deep.py', line {n}, in frame{n}" for n in range(139))
                raise RuntimeError("\\x1b[31mray::Executor.trigger() failed\\x1b[0m\\n" + trace + "\\nValueError: boom")

    flow = Flow("explodes")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1})
    explode = flow.add(Explode, "explode", auto_terminate=["success"])
    flow.connect(generate, explode)
''')


def test_an_error_is_one_line_in_the_table_and_whole_in_flowactors_errors(tmp_path, capsys):
    (tmp_path / "flow.py").write_text(FAILING_FLOW)
    repo = tmp_path / "repo"
    assert main(["run", str(tmp_path / "flow.py"), "--engine", "in-process", "--repository", str(repo),
                 "--stall-seconds", "1"]) == 4
    out = capsys.readouterr().out
    assert "\x1b" not in out  # not a terminal: no colour, no cursor movement
    lines = out.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("recent errors"))
    assert f"flowactors errors --repository {repo}" in lines[heading]
    shown = lines[heading + 1:]
    assert shown and all(line == "  explode: on_trigger: RuntimeError: ray::Executor.trigger() failed"
                         for line in shown), shown
    assert "frame" not in out

    assert main(["errors", "--repository", str(repo), "--last", "1"]) == 0
    full = capsys.readouterr().out
    assert full.splitlines()[0].startswith("--- ") and "explode: on_trigger" in full.splitlines()[0]
    assert "line 138, in frame138" in full and "ValueError: boom" in full and "\x1b[31m" in full
    assert main(["errors", "--repository", str(repo), "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries and {e["processor"] for e in entries} == {"explode"} and entries[0]["version"] == 1
    assert len({e["at"] for e in entries}) == len(entries)  # each error once, however often it was looked at


def test_a_damaged_error_log_is_read_around_and_another_version_refused(tmp_path, capsys):
    from flowactors.ops.error_log import ErrorLog

    log = ErrorLog(tmp_path)
    status = {"flow": "f", "processors": [{"name": "p", "recent_errors": [
        {"at": 1.5, "where": "on_trigger", "error": "ValueError: first"}]}]}
    assert log.record(status) == 1
    with open(log.path, "ab") as f:
        f.write(b'5\n{"version": 1, "at": "x"}\n\xff\xfe\n{"version": 1, "at": 2.0, "proc')   # damaged, then cut short
    status["processors"][0]["recent_errors"].append({"at": 3.0, "where": "on_trigger", "error": "ValueError: second"})
    assert log.record(status) == 1   # appended on a line of its own after the cut one
    assert main(["errors", "--repository", str(tmp_path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [e["error"] for e in json.loads(out)] == ["ValueError: first", "ValueError: second"]
    assert err == (f"flowactors: warning: 4 line(s) of {log.path} could not be read (cut short by a crash, or "
                   f"damaged) and are left out: line 2, 3, 4, 5\n")
    with open(log.path, "ab") as f:
        f.write(b'{"version": 2, "at": 4.0}\n')
    assert main(["errors", "--repository", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"flowactors: {log.path}, line 7: an error log entry of version 2; this "
                                       f"flowactors reads version 1 (docs/formats/error-log.md)\n")


def test_an_error_log_that_cannot_be_written_never_stops_the_run(tmp_path, capsys):
    from flowactors.ops.error_log import ErrorLog

    log = ErrorLog(tmp_path)
    log.path.mkdir()   # an errors.jsonl the run cannot open for writing
    status = {"flow": "f", "processors": [{"name": "p", "recent_errors": [
        {"at": 1.5, "where": "on_trigger", "error": "ValueError: first"}]}]}
    assert log.record(status) == 1
    status["processors"][0]["recent_errors"].append({"at": 2.5, "where": "on_trigger", "error": "ValueError: b"})
    assert log.record(status) == 1
    err = capsys.readouterr().err
    assert err.count("flowactors: warning: the errors of this run are not kept in") == 1   # said once


def test_processor_logs_show_at_the_run_log_level(tmp_path, capsys):
    flow = tmp_path / "flow.py"
    flow.write_text(textwrap.dedent('''
        from flowactors import Flow
        from flowactors.processors import GenerateFlowFile, LogAttribute

        flow = Flow("logs")
        generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1})
        log = flow.add(LogAttribute, "log", properties={"Log prefix": "SEEN-BY-USER"}, auto_terminate=["success"])
        flow.connect(generate, log)
    '''))
    run = ["run", str(flow), "--engine", "in-process", "--quiet"]
    assert main([*run, "--repository", str(tmp_path / "r1")]) == 0  # LogAttribute's default level: info
    err = capsys.readouterr().err
    assert "INFO flowactors.processors.LogAttribute:" in err and "SEEN-BY-USER" in err
    assert main([*run, "--repository", str(tmp_path / "r2"), "--log-level", "warning"]) == 0
    assert "SEEN-BY-USER" not in capsys.readouterr().err
    stateless = ["run", str(flow), "--stateless", "--quiet"]  # the stateless engine logs here too
    assert main(stateless) == 0
    err = capsys.readouterr().err
    assert "INFO flowactors.processors.LogAttribute:" in err and "SEEN-BY-USER" in err
    assert main([*stateless, "--log-level", "warning"]) == 0
    assert "SEEN-BY-USER" not in capsys.readouterr().err
