"""A processor class defined in the script that saves its flow (``__main__``) is saved under the
name other processes import it by, or the save says why it cannot: real scripts run in real
subprocesses, their JSON loaded by another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import sys
    from flowactors import Flow, FlowValidationError, Processor, Relationship
    from flowactors.processors import GenerateFlowFile


    class Shout(Processor):
        relationships = [Relationship("success")]

        def on_trigger(self, context, session):
            pass


    def build_flow(extra=False):
        flow = Flow("shouting")
        flow.add(GenerateFlowFile, "gen")
        flow.add(Shout, "shout", auto_terminate=["success"])
        flow.connect("gen", "shout")
        if extra:
            class Whisper(Shout):
                pass

            flow.add(Whisper, "whisper", auto_terminate=["success"])
            flow.connect("gen", "whisper")
        return flow


    if __name__ == "__main__":
        try:
            build_flow(extra="--extra" in sys.argv).save("flow.json")
        except FlowValidationError as err:
            print(err)
            sys.exit(3)
''')


def python(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def load_elsewhere(folder: Path) -> str:
    """Load and validate the saved flow in another process started in ``folder``; the module of
    the class it found."""
    loaded = python(["-c", "from pathlib import Path; from flowactors import Flow; "
                           "flow = Flow.from_json(Path('flow.json').read_text()).validate(); "
                           "print(flow.processors['shout'].type.__module__)"], folder)
    assert loaded.returncode == 0, loaded.stderr
    return loaded.stdout.strip()


def test_a_scripts_processor_is_saved_under_the_scripts_module_name(tmp_path):
    (tmp_path / "shout_flow.py").write_text(SCRIPT)
    saved = python(["shout_flow.py"], tmp_path)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    types = {p["name"]: p["type"] for p in json.loads((tmp_path / "flow.json").read_text())["processors"]}
    assert types == {"gen": "flowactors.processors.generate.GenerateFlowFile", "shout": "shout_flow.Shout"}
    assert load_elsewhere(tmp_path) == "shout_flow"


def test_a_module_run_with_dash_m_is_saved_under_its_name(tmp_path):
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "__init__.py").write_text("")
    (tmp_path / "flows" / "shouting.py").write_text(SCRIPT)
    saved = python(["-m", "flows.shouting"], tmp_path)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    assert json.loads((tmp_path / "flow.json").read_text())["processors"][1]["type"] == "flows.shouting.Shout"
    assert load_elsewhere(tmp_path) == "flows.shouting"


def test_a_script_no_one_can_import_is_refused_at_save_with_what_to_do(tmp_path):
    (tmp_path / "my-flow.py").write_text(SCRIPT)
    saved = python(["my-flow.py", "--extra"], tmp_path)
    assert saved.returncode == 3, saved.stdout + saved.stderr
    assert saved.stdout.splitlines() == [
        "flow 'shouting' is not valid (2 problem(s)):",
        "  - processor 'shout': its class Shout is defined in the script being run (my-flow.py), and its path "
        "my-flow.py is not a module name (letters, digits and _ only: rename it, e.g. my_flow.py); or move class "
        "Shout to a module of its own (e.g. processors.py beside the flow) and import it from there",
        "  - processor 'whisper': its class build_flow.<locals>.Whisper is defined inside a function, which "
        "nothing can import; move class build_flow.<locals>.Whisper to a module of its own (e.g. processors.py "
        "beside the flow) and import it from there",
    ]
    assert not (tmp_path / "flow.json").exists()


def test_the_command_runs_the_saved_definition_from_the_scripts_folder(tmp_path):
    """``flowactors run flow.json`` next to the script that saved it imports the processor it
    names (the folder of the definition and the current folder are importable, as for ``python
    script.py``), and runs it on Ray with the class sent by value: the Ray run starts in another
    folder (Ray puts the driver's current folder on its workers' path), so no actor can import the
    script and only the class sent by value reaches them."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "shout_flow.py").write_text(SCRIPT)
    saved = python(["shout_flow.py"], cwd=folder)
    assert saved.returncode == 0, saved.stderr
    assert json.loads((folder / "flow.json").read_text())["processors"][1]["type"] == "shout_flow.Shout"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd, definition in ((folder, "flow.json"), (elsewhere, str(folder / "flow.json"))):
        validated = python(["-m", "flowactors.cli", "validate", definition], cwd=cwd)
        assert validated.returncode == 0, validated.stderr
        assert validated.stdout.startswith("flow 'shouting' is valid: 2 processors")
    # the generator never stops: a short run of each engine
    for engine, cwd, definition in (("in-process", folder, "flow.json"), ("ray", elsewhere, str(folder / "flow.json"))):
        ran = python(["-m", "flowactors.cli", "run", definition, "--engine", engine, "--duration", "2", "--json",
                      "--repository", str(tmp_path / engine)], cwd=cwd)
        assert ran.returncode == 0, ran.stderr
        shout = next(p for p in json.loads(ran.stdout[ran.stdout.index("{"):])["processors"] if p["name"] == "shout")
        assert shout["errors"] == 0 and shout["type"].endswith("Shout")
