"""The flowactors command group (Typer): run, validate and inspect flows; the provenance, queue,
state and cluster commands register themselves on it from their own modules (``add_commands``).

A user mistake (a bad flow, a missing file, a repository that cannot be opened) ends with one clear
line ``flowactors: ...`` on stderr and exit status 2 (bad input) or 1 (could not run), never a
traceback; ``run`` adds 3, 4 and 5, and an interrupted command ends with 130. ``main(argv)`` is the
entry point (the ``flowactors`` script), returning the exit status.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Optional, Sequence

import typer

from flowactors.cli import cluster, component_types, provenance, state, ui
from flowactors.cli import queue as queue_commands
from flowactors.cli import repository as repository_commands
from flowactors.cli.common import (LOG_LEVELS, CliError, ExtensionsOption, FlowArgument, Repository, SettingOption,
                                   help_without_command, invoke, one_of, setting_values)
from flowactors.cli.ui import UiFlag, UiHost, UiPort, flow_page
from flowactors.driver.loading import load_flow
from flowactors.ops.error_log import FILE_NAME, ErrorLogError, read_errors
from flowactors.ops.queue_admin import stopped_status
from flowactors.engine import ENGINES, STALL_SECONDS


def cmd_validate(args: SimpleNamespace) -> int:
    flow = load_flow(args.flow, args.extensions, command="validate")
    flow.validate()
    print(f"flow '{flow.name}' is valid: {len(flow.processors)} processors, {len(flow.connections)} connections"
          + (f", {len(flow.services)} controller services" if flow.services else ""))
    uses = {name: {s.path for s in flow.services_used_by([name])} for name in flow.processors} if flow.services else {}
    for service in flow.services.values():
        users = [name for name, paths in uses.items() if service.path in paths]
        print(f"  service {service.path} ({service.type.__name__}): used by {', '.join(users) or 'no processor'}")
    return 0


def cmd_run(args: SimpleNamespace) -> int:
    """Exit status: 0 done, 1 timed out, 3 a processor reported errors (``--fail-on-error``),
    4 stalled (FlowFiles left that the processors keep failing on; they stay queued), 5 a
    stateless trigger failed (nothing of it was kept)."""
    from flowactors.driver.running import run_flow  # Ray (both): only when a flow runs
    from flowactors.driver.watch import stall_message  # Ray too (the engine's links)

    flow = load_flow(args.flow, args.extensions, command="run")
    duration = args.duration
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM stops as gracefully as Ctrl-C
    try:
        with flow_page(flow, args.repository, enabled=args.ui, host=args.ui_host, port=args.ui_port,
                       engine=args.engine) as page_hooks:
            final = run_flow(flow, args.repository, until_idle=duration is None, duration=duration,
                             show_status=not args.quiet, settings=setting_values(args.setting), address=args.address,
                             timeout=args.timeout, engine=args.engine, stall_seconds=args.stall_seconds,
                             failure_ports=args.failure_port, trigger_timeout=args.trigger_timeout,
                             nodes=_nodes(args.nodes), log_level=args.log_level, dashboard=args.dashboard,
                             on_warning=_warn, **page_hooks)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(final, default=str, indent=2))
    for left in final.get("left_running", []):
        print(f"flowactors: warning: processor '{left['processor']}' was still in on_trigger when the run stopped "
              f"({left['trigger_seconds']:g} s in it): left behind; the FlowFiles it holds stay queued for the next "
              f"run", file=sys.stderr)
    errors = sum(p["errors"] for p in final.get("processors", []))
    if final.get("timed_out"):
        queued = sum(q["count"] for q in final.get("queues", []))
        print(f"flowactors: flow '{flow.name}' timed out after {args.timeout:g} s before it was idle "
              f"({queued} FlowFiles queued, {errors} processor errors); what is queued stays in the "
              f"repository for the next run", file=sys.stderr)
        return 1
    if final.get("stalled"):
        print(f"flowactors: {stall_message(flow.name, final['stalled'])}", file=sys.stderr)
        return 4
    if final.get("failure"):
        failure = final["failure"]
        print(f"flowactors: flow '{flow.name}': stateless trigger {failure['trigger']} failed: {failure['reason']}; "
              f"nothing of it was kept, and its sources hand the same data out again next time", file=sys.stderr)
        return 5
    if args.engine == "stateless" and not args.quiet and not args.json:
        outputs = ", ".join(f"{count} to {port}" for port, count in final["outputs"].items()) or "no outputs"
        print(f"flow '{flow.name}': {final['triggers']} stateless triggers in {final['seconds']:g} s, {outputs}")
    return 3 if errors and args.fail_on_error else 0


def _warn(line: str) -> None:
    """A problem the run goes on with, said as it is found (above the live view on a terminal)."""
    print(f"flowactors: warning: {line}", file=sys.stderr)


def _nodes(value: str | None):
    """``--nodes``: "all", a count, or node names separated by commas (docs/cluster.md)."""
    if value is None or value == "all":
        return value
    if value.isdigit():
        return int(value)
    return [name.strip() for name in value.split(",") if name.strip()]


def _interrupt(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the graceful stop finish
    raise KeyboardInterrupt(signal.Signals(signum).name)


def cmd_status(args: SimpleNamespace) -> int:
    """Queued FlowFiles per connection, read from a (stopped) flow's repository; or, given a flow's
    name or ``--address``, the state of a flow on a Ray cluster (``flowactors.cli.cluster``)."""
    if args.flow or args.address:

        return cluster.cmd_cluster_status(args)

    path = Path(args.repository)
    if not (path / "flowfile").exists():
        raise CliError(f"no FlowFile repository in {path} (expected {path / 'flowfile'})", 2)
    found = stopped_status(path)   # read-only: changes nothing, works on a read-only folder
    counts, swapped, problem = found["queued"], found["swap_files"], found["damaged"]
    if args.json:
        print(json.dumps({"repository": str(path), "queued": counts, "swap_files": swapped,
                          "damaged": problem}, default=str))
        return 1 if problem else 0
    if problem:
        print(f"repository {path} is DAMAGED: {problem}")
        return 1
    print(f"repository {path}: {sum(counts.values())} FlowFiles queued")
    for queue, count in sorted(counts.items()):
        print(f"  {queue}: {count}")
    for entry in swapped:
        print(f"  swapped: {entry}")
    return 0


def cmd_errors(args: SimpleNamespace) -> int:
    """The run errors kept in a repository's error log (``flowactors.ops.error_log``), in full:
    what the live view shows as one line each."""

    if not Path(args.repository).is_dir():
        raise CliError(f"no repository folder {args.repository}", 2)
    try:
        found, unreadable = read_errors(args.repository)
    except ErrorLogError as err:
        raise CliError(str(err), 1) from None
    if unreadable:
        lines = ", ".join(map(str, unreadable[:5])) + (", ..." if len(unreadable) > 5 else "")
        print(f"flowactors: warning: {len(unreadable)} line(s) of {Path(args.repository) / FILE_NAME} could not be "
              f"read (cut short by a crash, or damaged) and are left out: line {lines}", file=sys.stderr)
    errors = [e for e in found if args.processor in (None, e["processor"])]
    errors = errors[-args.last:] if args.last else errors
    if args.json:
        print(json.dumps(errors, indent=2))
        return 0
    if not errors:
        print(f"no errors recorded in {Path(args.repository) / FILE_NAME}")
        return 0

    for error in errors:
        node = f" on node {error['node']}" if error.get("node") else ""
        print(f"--- {provenance.format_time(int(error['at'] * 1000))} {error['processor']}{node}: {error['where']}")
        print(error["error"].rstrip())
        if error.get("traceback") and error["traceback"].strip() != "NoneType: None":
            print(error["traceback"].rstrip())
    return 0


# ---------------------------------------------------------------------- the command group

def _version(shown: bool) -> None:
    if shown:
        try:
            version = importlib.metadata.version("flowactors")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed: pip install -e . records it)"
        print(f"flowactors {version}")
        raise typer.Exit(0)


def _root(ctx: typer.Context,
          version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version,
                                                help="print flowactors' version and exit")] = False) -> None:
    help_without_command(ctx)


def _run(flow: FlowArgument,
         repository: Annotated[str, typer.Option(help="folder of the repositories")] = "repository",
         until_idle: Annotated[bool, typer.Option("--until-idle", help="stop once nothing is left to do "
                                                                       "(the default)")] = False,
         duration: Annotated[Optional[float], typer.Option(help="run for this many seconds")] = None,
         timeout: Annotated[Optional[float], typer.Option(help="give up an until-idle run after this many "
                                                               "seconds")] = None,
         address: Annotated[Optional[str], typer.Option(help=(
             "the Ray to run on (default: RAY_ADDRESS if set, else a Ray of the run's own, never one merely "
             "running on this machine; 'auto': the one `ray start` left here)"))] = None,
         engine: Annotated[str, typer.Option(parser=one_of(ENGINES), metavar="ENGINE", help=(
             "ray: processors in Ray actors; in-process: this process, no Ray; stateless: the whole flow "
             "as one transaction a trigger, in memory"))] = "ray",
         stateless: Annotated[bool, typer.Option("--stateless", help="the same as --engine stateless: trigger "
                                                                     "until the sources have nothing left")] = False,
         failure_port: Annotated[Optional[list[str]], typer.Option(
             metavar="PORT", help="stateless: an output port whose FlowFiles fail the trigger (repeatable)")] = None,
         trigger_timeout: Annotated[Optional[float], typer.Option(
             metavar="S", help="stateless: the longest one trigger may take")] = None,
         nodes: Annotated[Optional[str], typer.Option(metavar="all|N|NAME,...", help=(
             "run the flow on several nodes of the Ray cluster (--address), each over REPOSITORY/nodes/NAME, "
             "with load-balanced connections between them (docs/cluster.md)"))] = None,
         setting: SettingOption = None,
         log_level: Annotated[str, typer.Option(parser=one_of(LOG_LEVELS, str.upper), metavar="LEVEL", help=(
             "show the processors' log lines at this level and above: DEBUG, INFO, WARNING, ERROR"))] = "INFO",
         quiet: Annotated[bool, typer.Option("--quiet", help="no live view and no final table")] = False,
         extensions: ExtensionsOption = None,
         json: Annotated[bool, typer.Option("--json", help="print the final status as JSON")] = False,
         fail_on_error: Annotated[bool, typer.Option("--fail-on-error", help="exit 3 if any processor "
                                                                             "reported an error")] = False,
         stall_seconds: Annotated[float, typer.Option(metavar="S", help=(
             "end an until-idle run (exit 4) once nothing moved for S seconds while processors kept "
             "failing"))] = STALL_SECONDS,
         ui: UiFlag = False, ui_host: UiHost = "127.0.0.1", ui_port: UiPort = 0,
         dashboard: Annotated[bool, typer.Option("--dashboard", help=(
             "start Ray with its dashboard on 127.0.0.1, print its address and place flowactors' Grafana "
             "dashboard where Ray's Grafana finds it (docs/cluster.md)"))] = False) -> None:
    if until_idle and duration is not None:
        raise typer.BadParameter("--until-idle and --duration exclude each other")
    invoke(cmd_run, flow=flow, repository=repository, duration=duration, timeout=timeout, address=address,
           engine="stateless" if stateless else engine, failure_port=failure_port or [],
           trigger_timeout=trigger_timeout, nodes=nodes, setting=setting, quiet=quiet,
           extensions=extensions, json=json, fail_on_error=fail_on_error, stall_seconds=stall_seconds,
           log_level=log_level, ui=ui, ui_host=ui_host, ui_port=ui_port, dashboard=dashboard)


def _validate(flow: FlowArgument, extensions: ExtensionsOption = None) -> None:
    invoke(cmd_validate, flow=flow, extensions=extensions)


def _status(flow: Annotated[Optional[str], typer.Argument(
                metavar="FLOW", help="a flow submitted to a cluster (with --address)", show_default=False)] = None,
            repository: Annotated[str, typer.Option(help="a stopped flow's repository folder")] = "repository",
            address: Annotated[Optional[str], typer.Option(help="the cluster's Ray dashboard, e.g. "
                                                                "http://HEAD:8265")] = None,
            json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    invoke(cmd_status, flow=flow, repository=repository, address=address, json=json)


def _errors(repository: Repository = "repository",
            processor: Annotated[Optional[str], typer.Option(help="only this processor's errors")] = None,
            last: Annotated[int, typer.Option(min=0, help="only the last N (0: all)")] = 0,
            json: Annotated[bool, typer.Option("--json", help="the errors as a JSON array")] = False) -> None:
    invoke(cmd_errors, repository=repository, processor=processor, last=last, json=json)


def build_app() -> typer.Typer:
    """The ``flowactors`` command group with every command on it."""
    app = typer.Typer(name="flowactors", help="Run, inspect and repair flowactors flows: NiFi's dataflow model on Ray.",
                      pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.callback(invoke_without_command=True)(_root)
    app.command("run", help="Run a flow until it is idle (or for a duration), with a live view of its "
                            "processors and queues on a terminal.")(_run)
    app.command("validate", help="Check a flow and list every problem.")(_validate)
    app.command("status", help="What a stopped flow's repository holds, or a flow's state on a cluster.")(_status)
    app.command("errors", help="The processor errors the runs on a repository saw, in full (the live "
                               "view shows each as one line).")(_errors)
    ui.add_commands(app)              # ui, graph
    provenance.add_commands(app)      # provenance search|show|repair, lineage, replay
    queue_commands.add_commands(app)  # queue list|empty
    state.add_commands(app)           # state list|clear
    repository_commands.add_commands(app)  # repository salvage
    cluster.add_commands(app)         # submit, stop, logs (status FLOW --address is above)
    component_types.add_commands(app)  # types
    return app


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``flowactors`` command on ``argv`` (default: the process's arguments); its exit status."""
    try:
        result = build_app()(args=list(sys.argv[1:] if argv is None else argv), prog_name="flowactors",
                             standalone_mode=False)
    except typer.TyperException as err:  # the command line itself is wrong: an unknown option, a bad value
        ctx = getattr(err, "ctx", None)
        where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        print(f"flowactors: {err.format_message()}{where}", file=sys.stderr)
        return 2 if err.exit_code == 2 else err.exit_code
    except typer.Abort:
        print("flowactors: interrupted", file=sys.stderr)
        return 130
    except SystemExit as done:  # --show-completion and --install-completion end the process themselves
        return done.code if isinstance(done.code, int) else 0
    return result if isinstance(result, int) else 0
