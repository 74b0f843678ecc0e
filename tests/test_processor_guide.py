"""The processor guide (docs/processors.md, "Writing a processor") and its example
(examples/custom_processor.py) as a user meets them: the guide shows the example's code as it is,
every other code block of the guide runs, the example runs as a script on both engines and its
saved definition runs again with ``flowactors run``, and its processors behave the same under
``ProcessorRunner`` on every engine."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowactors.testing import ProcessorRunner

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "processors.md"
EXAMPLES = ROOT / "examples"
EXAMPLE = EXAMPLES / "custom_processor.py"
FLOWACTORS = str(Path(sys.executable).parent / "flowactors")
#: the first line of a guide block that shows part of the example (checked, not run again)
EXCERPT = "# examples/custom_processor.py\n"
KEY_VARIABLE = "FLOWACTORS_PARAMETER_SIGNING_KEY"

sys.path.insert(0, str(EXAMPLES))
import custom_processor  # noqa: E402  (examples/ is no package: imported as the guide imports it)
from custom_processor import ClassifyMessages, MaskDigits, NumberedMessages  # noqa: E402


def guide_blocks() -> list[str]:
    """The python code blocks of the guide's section, in order."""
    text = GUIDE.read_text()
    section = text[text.index("\n## Writing a processor\n"):]
    return re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)


def environment(*paths: Path, key: str | None = None) -> dict[str, str]:
    """This environment with ``paths`` (this worktree first) as PYTHONPATH and the signing key
    variable set to ``key`` or left out."""
    env = {k: v for k, v in os.environ.items() if k != KEY_VARIABLE}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, *paths))
    if key is not None:
        env[KEY_VARIABLE] = key
    return env


def test_the_guide_shows_the_example_as_it_is():
    source = EXAMPLE.read_text()
    excerpts = [b[len(EXCERPT):] for b in guide_blocks() if b.startswith(EXCERPT)]
    for excerpt in excerpts:
        assert excerpt in source, f"the guide shows code that examples/custom_processor.py does not hold:\n{excerpt}"
    shown = "".join(excerpts)
    for definition in re.findall(r"^(?:class|def) \w+", source, re.M):
        if definition != "def main":   # the script's command line is not part of the guide
            assert f"\n{definition}" in f"\n{shown}", f"the guide does not show {definition}"


def test_the_guides_code_runs(tmp_path):
    code = [b for b in guide_blocks() if not b.startswith(EXCERPT)]
    assert len(code) >= 5
    script = tmp_path / "guide_code.py"
    script.write_text("\n\n".join(code))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment(EXAMPLES),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    # what its blocks left behind: the error example, the two runs over one state, the saved flow
    assert sorted(os.listdir(tmp_path / "out" / "errors" / "failed")) == ["message-3.txt"]
    assert len(os.listdir(tmp_path / "out" / "numbered")) == 5
    assert json.loads((tmp_path / "flow.json").read_text())["name"] == "custom-processor"


def _check_output(out: Path) -> None:
    errors = sorted(os.listdir(out / "errors"))
    unmatched = sorted(os.listdir(out / "unmatched"))
    assert errors == [f"message-{n}.txt" for n in (12, 4, 8)]
    assert len(unmatched) == 9 and not (out / "failed").exists()
    assert (out / "errors" / "message-12.txt").read_text() == "ERROR order ## paid with card ####-####-####-####"
    assert (out / "unmatched" / "message-7.txt").read_text() == "INFO order # paid with card ####-####-####-####"


def _run_script(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    # PYTHONPATH holds only flowactors: a script's own folder is on sys.path when it runs
    return subprocess.run([sys.executable, str(EXAMPLE), "--out", str(tmp_path / "out"), "--repository",
                           str(tmp_path / "repository"), *options], cwd=tmp_path, env=environment(),
                          capture_output=True, text=True, timeout=280)


def test_the_example_runs_as_a_script_and_its_definition_runs_again(tmp_path):
    done = _run_script(tmp_path, "--engine", "in-process")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        "errors: 3 file(s), e.g. message-12.txt: 'ERROR order ## paid with card ####-####-####-####'",
        "unmatched: 9 file(s), e.g. message-1.txt: 'INFO order # paid with card ####-####-####-####'",
        "no errors"]
    out = tmp_path / "out"
    _check_output(out)
    definition = out / "flow.json"
    saved = json.loads(definition.read_text())
    assert [p["type"] for p in saved["processors"]][:3] == [
        "custom_processor.NumberedMessages", "custom_processor.MaskDigits", "custom_processor.ClassifyMessages"]
    assert "example key" not in definition.read_text()
    assert f"{KEY_VARIABLE}=... PYTHONPATH=examples flowactors run {definition}" in done.stdout

    # the definition again, as the script says: without examples/ on the path the class is not found
    run = [FLOWACTORS, "run", str(definition), "--engine", "in-process"]
    missing = subprocess.run([*run, "--repository", str(tmp_path / "r1")], cwd=tmp_path,
                             env=environment(key="k"), capture_output=True, text=True, timeout=120)
    assert missing.returncode != 0
    assert "cannot import 'custom_processor' for processor type 'custom_processor.NumberedMessages'" in (
        missing.stdout + missing.stderr)
    # ... nor without the signing key, which the definition does not hold
    keyless = subprocess.run([*run, "--repository", str(tmp_path / "r2")], cwd=tmp_path,
                             env=environment(EXAMPLES), capture_output=True, text=True, timeout=120)
    assert keyless.returncode != 0 and KEY_VARIABLE in keyless.stdout + keyless.stderr
    for folder in ("errors", "unmatched"):
        for written in (out / folder).iterdir():
            written.unlink()
    again = subprocess.run([*run, "--repository", str(tmp_path / "r3")], cwd=tmp_path,
                           env=environment(EXAMPLES, key="k"), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    _check_output(out)


@pytest.mark.ray
def test_the_example_runs_as_a_script_on_ray(tmp_path):
    done = _run_script(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no errors" in done.stdout.splitlines()
    _check_output(tmp_path / "out")


def test_the_example_processors_on_every_engine(processor_engine):
    runner = ProcessorRunner(NumberedMessages, {"Total": 5, "Batch Size": 2, "Text": "n=${message.number}"})
    runner.run(4)
    assert runner.contents("success") == [b"n=1", b"n=2", b"n=3", b"n=4", b"n=5"]
    assert [f.attributes["filename"] for f in runner.output("success")][-1] == "message-5.txt"
    assert runner.context.state.get().get("made") == "5"
    assert {e.event_type.value for e in runner.events()} == {"CREATE"}

    runner = ProcessorRunner(MaskDigits, {"Mask Character": "*", "Maximum Size": "${limit:replaceNull('1 KB')}"})
    runner.enqueue(b"pin 1234")
    runner.enqueue(b"")
    runner.enqueue(b"12345678901", {"limit": "10 B"})
    runner.enqueue(b"no digits")
    runner.run(4)
    assert runner.contents("success") == [b"pin ****", b"no digits"]
    assert [f.attributes["mask.count"] for f in runner.output("success")] == ["4", "0"]
    [large] = runner.output("too.large")
    assert large.attributes["mask.skipped"] == "11 bytes, over 10" and large.penalized_until > 0
    assert [e.event_type.value for e in runner.events()] == [
        "CONTENT_MODIFIED", "DROP", "ATTRIBUTES_MODIFIED", "ATTRIBUTES_MODIFIED"]

    runner = ProcessorRunner(ClassifyMessages, {"errors": "^ERROR", "audit": "user=", "Signing Key": "s"})
    for content in (b"ERROR x", b"login user=ann", b"", b"plain"):
        runner.enqueue(content)
    runner.run()
    assert runner.contents("errors") == [b"ERROR x"]
    assert runner.contents("audit") == [b"login user=ann"]
    [plain] = runner.output("unmatched")
    assert plain.attributes["signature"] == hmac.new(b"s", b"plain", hashlib.sha256).hexdigest()
    assert [(e.event_type.value, e.relationship) for e in runner.events()] == [
        ("ROUTE", "errors"), ("ROUTE", "audit"), ("ROUTE", "unmatched"), ("DROP", None)]
    assert runner.processor._counts == {"errors": 1, "audit": 1, "unmatched": 1}   # counted at commit

    runner = ProcessorRunner(ClassifyMessages, {"errors": "^ERROR", "Character Set": "ASCII"})
    runner.enqueue("café".encode())
    runner.run(raise_errors=False)
    assert isinstance(runner.errors[0], UnicodeDecodeError)
    assert runner.input_count == 1 and runner.output("failure") == []
    assert runner.processor._counts == {}


def test_bad_configurations_are_refused_with_a_message():
    assert ClassifyMessages.validate_properties({"errors": "^E", "Character Set": "klingon"}) == [
        "property 'Character Set' is 'klingon'; allowed: UTF-8, ASCII, ISO-8859-1"]
    assert ClassifyMessages.validate_properties({"failure": "x"}) == [
        "a dynamic property cannot be named 'failure' (that relationship always exists)"]
    assert ClassifyMessages.validate_properties({"errors": "^E", "Drop Empty": "maybe"}) == [
        "property 'Drop Empty': must be true or false"]
    assert NumberedMessages.validate_properties({"Total": "0"}) == [
        "property 'Total': '0' must be a positive whole number"]
    with pytest.raises(ValueError, match="MaskDigits is not valid: property 'Maximum Size'"):
        ProcessorRunner(MaskDigits, {"Maximum Size": "lots"})
    flow = custom_processor.build_flow(Path("out"))
    flow.connections.pop()   # classify's relationships no longer connected
    problems = flow.problems()
    assert "processor 'classify': relationship 'errors' is neither connected nor auto-terminated" in problems
