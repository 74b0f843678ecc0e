"""The flow-control processors in a flow shaped as NiFi exports it (internal and older property
names, internal allowable values, unset properties as null), imported and run in-process:
GetFile -> LogMessage -> DuplicateFlowFile -> UpdateAttribute (a name a copy) -> RetryFlowFile
(its retry looped back once) -> ControlRate -> MonitorActivity -> DistributeLoad -> two PutFiles."""

from __future__ import annotations

from pathlib import Path

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from nifi_flows import STANDARD, connection, group, processor, snapshot


def definition(source: Path, first: Path, second: Path) -> dict:
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(source), "Keep Source File": "false",
                                                        "Minimum File Age": "0 sec"})
    log = processor(root, "log", STANDARD + "LogMessage", {"log-level": "info", "log-prefix": "flow: ",
                                                           "log-message": "${filename}"})
    duplicate = processor(root, "duplicate", STANDARD + "DuplicateFlowFile", {"Number of Copies": "1"})
    name = processor(root, "name", "org.apache.nifi.processors.attributes.UpdateAttribute",
                     {"filename": "${filename}.${copy.index}", "Delete Attributes Expression": None,
                      "Store State": "Do not store state", "Stateful Variables Initial Value": None})
    retry = processor(root, "retry", STANDARD + "RetryFlowFile", {
        "retry-attribute": "flowfile.retries", "maximum-retries": "1", "penalize-retries": "false",
        "Fail on Non-numerical Overwrite": "false", "reuse-mode": "fail", "exhausted": "after ${flowfile.retries}"},
        auto_terminate=("failure",))
    rate = processor(root, "rate", STANDARD + "ControlRate", {
        "Rate Control Criteria": "flowfile count", "Time Duration": "1 min", "Maximum Rate": "1000",
        "Maximum Data Rate": None, "Maximum FlowFile Rate": None, "Rate Exceeded Strategy": "Hold FlowFile",
        "Rate Controlled Attribute": None, "Grouping Attribute": None}, auto_terminate=("failure",))
    watch = processor(root, "watch", STANDARD + "MonitorActivity", {
        "Threshold Duration": "1 hour", "Continually Send Messages": "false", "Copy Attributes": "false",
        "Monitoring Scope": "node", "Reporting Node": "all", "Wait for Activity": "false",
        "Reset State on Restart": "true"}, auto_terminate=("inactive", "activity.restored"))
    spread = processor(root, "spread", STANDARD + "DistributeLoad", {
        "Number of Relationships": "2", "Distribution Strategy": "round robin", "Hostnames": None,
        "Load Distribution Service ID": None})   # NiFi 1's, unset
    puts = [processor(root, f"put{n}", STANDARD + "PutFile", {"Directory": str(folder)},
                      auto_terminate=("success", "failure")) for n, folder in ((1, first), (2, second))]
    chain = [get, log, duplicate, name, retry]
    links = [connection(root, a, b, ("success",)) for a, b in zip(chain, chain[1:])]
    links += [connection(root, retry, retry, ("retry",)), connection(root, retry, rate, ("retries_exceeded",)),
              connection(root, rate, watch, ("success",)), connection(root, watch, spread, ("success",)),
              connection(root, spread, puts[0], ("1",)), connection(root, spread, puts[1], ("2",))]
    return snapshot(group(root, "flow-control", None, None,
                          processors=[*chain, rate, watch, spread, *puts], connections=links), {})


def test_a_nifi_flow_of_the_flow_control_processors_runs_in_process(tmp_path):
    source, first, second = (tmp_path / name for name in ("in", "out1", "out2"))
    for folder in (source, first, second):
        folder.mkdir()
    (source / "a.txt").write_text("alpha")
    (source / "b.txt").write_text("beta")
    stored = lambda status: sum(p["flowfiles_in"] for p in status["processors"]   # noqa: E731
                                if p["name"].startswith("put")) >= 4
    final = run_flow(flow_from_nifi(definition(source, first, second)), tmp_path / "repository",
                     engine="in-process", timeout=60, until=stored)
    assert not final.get("timed_out"), final
    written = {path.name: path.read_text() for folder in (first, second) for path in folder.iterdir()}
    assert written == {"a.txt.0": "alpha", "a.txt.1": "alpha", "b.txt.0": "beta", "b.txt.1": "beta"}
    assert len(list(first.iterdir())) == len(list(second.iterdir())) == 2   # round robin
