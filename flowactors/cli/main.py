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
from typing import Annotated, Any, Callable, NoReturn, Optional, Sequence

import typer

from flowactors.cli.ui import UiFlag, UiHost, UiPort
from flowactors.engine import ENGINES, STALL_SECONDS
from flowactors.sdk.flow import Flow, FlowValidationError
from flowactors.sdk.settings import SettingsError


class CliError(Exception):
    """A problem to show the user as one message."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def load_flow(path: str | Path, extensions: Sequence[str] | None = None) -> Flow:
    """A Flow from a ``.json`` definition (a NiFi one too, its Python processors found in
    ``extensions``) or a ``.py`` file (its ``flow`` variable or ``build_flow()``).

    As ``python`` does for a script, the flow file's folder (and, for a definition, the current
    folder) comes first on ``sys.path``, so a definition saved by a script finds the processors
    it names (``shout_flow.Shout``); a ``.py`` flow is imported under its own name when that
    name finds this file, so a flow it saves names its processors as any process imports them.
    Processors from modules outside the installed packages travel to the actors by value."""
    path = Path(path)
    if not path.is_file():
        raise CliError(f"no flow file at {path}", 2)
    if path.suffix == ".json":
        folders = _importable_first(path.parent.resolve(), Path.cwd())
        flow = Flow.from_json(path.read_bytes(), extensions=extensions)
        _by_value(node.type.__module__ for node in flow.processors.values() if _defined_in(node.type, folders))
        return flow
    if path.suffix != ".py":
        raise CliError(f"{path}: a flow is a .py or .json file", 2)
    folder = path.parent.resolve()
    _importable_first(folder)
    module_name = path.stem
    found = importlib.util.find_spec(module_name) if module_name.isidentifier() else None
    if found is None or found.origin is None or Path(found.origin).resolve() != path.resolve():
        module_name = f"flowactors_user_flow_{path.stem}"   # its own name finds another module
    spec =  importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    _by_value([module_name])  # processors defined in the file reach the actors
    return _flow_of(module, path)


def _importable_first(*folders: Path) -> tuple[Path, ...]:
    """Put ``folders`` first on ``sys.path`` (once each); returns them."""
    for folder in reversed(folders):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    return folders


#: flowactors' own packages: every actor imports them, so they are never sent by value (a class
#: sent by value is another class there: ``isinstance`` checks against ours would fail)
OWN_PACKAGES = ("flowactors", "nifiapi", "repositories")


def _defined_in(processor_type: type, folders: Sequence[Path]) -> bool:
    """Whether ``processor_type``'s module is a user's file below one of ``folders`` (not installed,
    not one of flowactors' own packages, which a checkout run from its root also holds)."""
    if processor_type.__module__.partition(".")[0] in OWN_PACKAGES:
        return False
    module = sys.modules.get(processor_type.__module__)
    source = getattr(module, "__file__", None)
    return source is not None and any(Path(source).resolve().is_relative_to(f) for f in folders)


def _by_value(module_names) -> None:
    """Let Ray pickle these modules' classes by value: an actor need not import them."""
    import ray.cloudpickle

    for name in set(module_names):
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])


def _flow_of(module, path: Path) -> Flow:
    """The flow a ``.py`` file defines: its ``flow``, ``build_flow()``, or its only Flow."""
    if isinstance(getattr(module, "flow", None), Flow):
        return module.flow
    if callable(getattr(module, "build_flow", None)):
        flow = module.build_flow()
        if isinstance(flow, Flow):
            return flow
    flows = [v for v in vars(module).values() if isinstance(v, Flow)]
    if len(flows) == 1:
        return flows[0]
    raise CliError(f"{path} defines no flow: give it a variable 'flow' or a function 'build_flow()' "
                   f"returning a flowactors.Flow", 2)


def _settings(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--setting KEY=VALUE`` pairs as settings: a value that reads as JSON is that value."""
    settings: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep:
            raise CliError(f"--setting takes KEY=VALUE, not {pair!r}", 2)
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings


def cmd_validate(args: SimpleNamespace) -> int:
    flow = load_flow(args.flow, args.extensions)
    flow.validate()
    print(f"flow '{flow.name}' is valid: {len(flow.processors)} processors, {len(flow.connections)} connections")
    return 0


def cmd_run(args: SimpleNamespace) -> int:
    """Exit status: 0 done, 1 timed out, 3 a processor reported errors (``--fail-on-error``),
    4 stalled (FlowFiles left that the processors keep failing on; they stay queued), 5 a
    stateless trigger failed (nothing of it was kept)."""
    from flowactors.cli.ui import flow_page
    from flowactors.engine.runner import run_flow, stall_message

    flow = load_flow(args.flow, args.extensions)
    duration = args.duration
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM stops as gracefully as Ctrl-C
    try:
        with flow_page(flow, args.repository, enabled=args.ui, host=args.ui_host, port=args.ui_port,
                       engine=args.engine) as page_hooks:
            final = run_flow(flow, args.repository, until_idle=duration is None, duration=duration,
                             show_status=not args.quiet, settings=_settings(args.setting), address=args.address,
                             timeout=args.timeout, engine=args.engine, stall_seconds=args.stall_seconds,
                             failure_ports=args.failure_port, trigger_timeout=args.trigger_timeout,
                             nodes=_nodes(args.nodes), log_level=args.log_level, dashboard=args.dashboard,
                             **page_hooks)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(final, default=str, indent=2))
    for problem in final.get("recovery", {}).get("provenance_problems", []):
        print(f"flowactors: warning: provenance recovery: {problem}", file=sys.stderr)
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
    name or ``--address``, the state of a flow on a Ray cluster (``flowactors.ops.cluster_client``)."""
    if args.flow or args.address:
        from flowactors.ops.cluster_client import cmd_cluster_status

        return cmd_cluster_status(args)
    from flowactors.ops.queue_admin import stopped_status

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
    from flowactors.ops.error_log import FILE_NAME, ErrorLogError, read_errors

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
    from flowactors.cli.provenance import format_time

    for error in errors:
        node = f" on node {error['node']}" if error.get("node") else ""
        print(f"--- {format_time(int(error['at'] * 1000))} {error['processor']}{node}: {error['where']}")
        print(error["error"].rstrip())
        if error.get("traceback") and error["traceback"].strip() != "NoneType: None":
            print(error["traceback"].rstrip())
    return 0


# ---------------------------------------------------------------------- the command group

EXTENSIONS_HELP = ("a folder of NiFi Python processors that a NiFi flow definition uses (repeatable; "
                   "default: FLOWACTORS_PYTHON_EXTENSIONS, folders separated by the path separator)")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

# the arguments and options several commands take, declared once
FlowArgument = Annotated[str, typer.Argument(metavar="FLOW", help="flow.py or flow.json", show_default=False)]
ExtensionsOption = Annotated[Optional[list[str]], typer.Option(metavar="DIR", help=EXTENSIONS_HELP)]
Repository = Annotated[str, typer.Option(help="the flow's repository folder")]
SettingOption = Annotated[Optional[list[str]], typer.Option(
    "--setting", metavar="KEY=VALUE", help="a setting the flow runs (or ran) with, over its own "
                                           "(docs/configuration.md), e.g. always_sync=true; repeatable")]


def one_of(choices: Sequence[str], normalize: Callable[[str], str] = str) -> Callable[[str], str]:
    """An option's parser that takes one of ``choices`` (after ``normalize``), or says which."""
    def parse(text: str) -> str:
        value = normalize(text)
        if value not in choices:
            raise typer.BadParameter(f"{text!r} is not one of {', '.join(choices)}")
        return value
    return parse


def key_value(text: str) -> tuple[str, str]:
    """An option's parser for ``KEY=VALUE`` (a value may hold ``=``), or says what it takes."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"takes KEY=VALUE, not {text!r}")
    return key, value


def invoke(handler: Callable[[SimpleNamespace], int], **options: Any) -> NoReturn:
    """Run a command's ``handler`` on its options and end the command with its exit status."""
    raise typer.Exit(exit_status(handler, SimpleNamespace(**options)))


def exit_status(handler: Callable[[SimpleNamespace], int], args: SimpleNamespace) -> int:
    """``handler(args)``, or the exit status of what it raised, said in one line on stderr: what
    a user can act on (bad input: 2; a repository or start-up failure: 1; interrupted: 130)."""
    try:
        return handler(args)
    except (FlowValidationError, SettingsError) as err:
        print(f"flowactors: {err}", file=sys.stderr)
        return 2
    except CliError as err:
        print(f"flowactors: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt as err:
        print(f"flowactors: interrupted{f' by {err}' if str(err) else ''}", file=sys.stderr)
        return 130
    except Exception as err:  # repository and start-up errors carry their own advice
        from flowactors.engine.controller import FlowStartError
        from flowactors.engine.runner import RunOptionError

        from repositories.flowfile import FlowFileRepositoryError
        from repositories.lock import RepositoryInUseError

        if isinstance(err, RunOptionError):
            print(f"flowactors: {err}", file=sys.stderr)
            return 2
        known = (FlowStartError, OSError, FlowFileRepositoryError, RepositoryInUseError)
        if isinstance(err, known):
            print(f"flowactors: {getattr(err, 'cause', None) or err}", file=sys.stderr)  # Ray: the remote error
            return 1
        raise


def help_without_command(ctx: typer.Context) -> None:
    """A command group called alone shows its help (exit 0) rather than an error."""
    if ctx.invoked_subcommand is None:
        print(ctx.get_help(), end="")  # Typer's rich help prints itself and returns ""
        raise typer.Exit(0)


def command_group(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """A group of commands ``flowactors NAME ...`` on ``app``; called alone it shows its help."""
    group = typer.Typer(help=help)
    group.callback(invoke_without_command=True)(help_without_command)
    app.add_typer(group, name=name)
    return group


def _version(shown: bool) -> None:
    if shown:
        try:
            version = importlib.metadata.version("flowactors")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed: pip install -e . records it)"
        print(f"flowactors {version}")
        raise typer.Exit(0)


def build_app() -> typer.Typer:
    """The ``flowactors`` command group with every command on it."""
    app = typer.Typer(name="flowactors", help="Run, inspect and repair flowactors flows: NiFi's dataflow model on Ray.",
                      pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]})

    @app.callback(invoke_without_command=True)
    def root(ctx: typer.Context,
             version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version,
                                                   help="print flowactors' version and exit")] = False) -> None:
        help_without_command(ctx)

    @app.command("run", help="Run a flow until it is idle (or for a duration), with a live view of its "
                             "processors and queues on a terminal.")
    def run(flow: FlowArgument,
            repository: Annotated[str, typer.Option(help="folder of the repositories")] = "repository",
            until_idle: Annotated[bool, typer.Option("--until-idle", help="stop once nothing is left to do "
                                                                          "(the default)")] = False,
            duration: Annotated[Optional[float], typer.Option(help="run for this many seconds")] = None,
            timeout: Annotated[Optional[float], typer.Option(help="give up an until-idle run after this many "
                                                                  "seconds")] = None,
            address: Annotated[Optional[str], typer.Option(help="Ray address (default: an embedded local Ray)")] = None,
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

    @app.command("validate", help="Check a flow and list every problem.")
    def validate(flow: FlowArgument, extensions: ExtensionsOption = None) -> None:
        invoke(cmd_validate, flow=flow, extensions=extensions)

    @app.command("status", help="What a stopped flow's repository holds, or a flow's state on a cluster.")
    def status(flow: Annotated[Optional[str], typer.Argument(metavar="FLOW", help="a flow submitted to a cluster (with --address)",
                                                             show_default=False)] = None,
               repository: Annotated[str, typer.Option(help="a stopped flow's repository folder")] = "repository",
               address: Annotated[Optional[str], typer.Option(help="the cluster's Ray dashboard, e.g. "
                                                                   "http://HEAD:8265")] = None,
               json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        invoke(cmd_status, flow=flow, repository=repository, address=address, json=json)

    @app.command("errors", help="The processor errors the runs on a repository saw, in full (the live "
                                "view shows each as one line).")
    def errors(repository: Repository = "repository",
               processor: Annotated[Optional[str], typer.Option(help="only this processor's errors")] = None,
               last: Annotated[int, typer.Option(min=0, help="only the last N (0: all)")] = 0,
               json: Annotated[bool, typer.Option("--json", help="the errors as a JSON array")] = False) -> None:
        invoke(cmd_errors, repository=repository, processor=processor, last=last, json=json)

    from flowactors.cli import provenance, queue, state, ui
    from flowactors.ops import cluster_client

    ui.add_commands(app)              # ui, graph
    provenance.add_commands(app)      # provenance search|show|repair, lineage, replay
    queue.add_commands(app)           # queue list|empty
    state.add_commands(app)           # state list|clear
    cluster_client.add_commands(app)  # submit, stop, logs (status FLOW --address is above)
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
