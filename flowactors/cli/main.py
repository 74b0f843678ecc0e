"""The ``flowactors`` command: run, validate and inspect flows.

A user mistake (a bad flow, a missing file, a repository that cannot be opened) ends with one clear
message and exit status 2 (bad input) or 1 (could not run), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sys
from pathlib import Path
from typing import Any, Sequence

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
    ``extensions``) or a ``.py`` file (its ``flow`` variable or ``build_flow()``)."""
    path = Path(path)
    if not path.is_file():
        raise CliError(f"no flow file at {path}", 2)
    if path.suffix == ".json":
        return Flow.from_json(path.read_bytes(), extensions=extensions)
    if path.suffix != ".py":
        raise CliError(f"{path}: a flow is a .py or .json file", 2)
    module_name = f"flowactors_user_flow_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(module)  # processors defined in the file reach the actors
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


def _settings(pairs: Sequence[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CliError(f"--setting takes KEY=VALUE, not {pair!r}", 2)
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings


def cmd_validate(args: argparse.Namespace) -> int:
    flow = load_flow(args.flow, args.extensions)
    flow.validate()
    print(f"flow '{flow.name}' is valid: {len(flow.processors)} processors, {len(flow.connections)} connections")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Exit status: 0 done, 1 timed out, 3 a processor reported errors (``--fail-on-error``),
    4 stalled (FlowFiles left that the processors keep failing on; they stay queued), 5 a
    stateless trigger failed (nothing of it was kept)."""
    from flowactors.engine.runner import run_flow, stall_message

    flow = load_flow(args.flow, args.extensions)
    duration = args.duration
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM stops as gracefully as Ctrl-C
    try:
        final = run_flow(flow, args.repository, until_idle=duration is None, duration=duration,
                         show_status=not args.quiet, settings=_settings(args.setting), address=args.address,
                         timeout=args.timeout, engine=args.engine, stall_seconds=args.stall_seconds,
                         failure_ports=args.failure_port, trigger_timeout=args.trigger_timeout,
                         nodes=_nodes(args.nodes))
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


def cmd_status(args: argparse.Namespace) -> int:
    """Queued FlowFiles per connection, read from a (stopped) flow's repository; or, given a flow's
    name or ``--address``, the state of a flow on a Ray cluster (``flowactors.ops.cluster_client``)."""
    if args.flow or args.address:
        from flowactors.ops.cluster_client import cmd_cluster_status

        return cmd_cluster_status(args)
    from repositories.flowfile import FlowFileRepositoryError, WriteAheadFlowFileRepository

    path = Path(args.repository)
    if not (path / "flowfile").exists():
        raise CliError(f"no FlowFile repository in {path} (expected {path / 'flowfile'})", 2)
    try:
        repo = WriteAheadFlowFileRepository(path / "flowfile", create=False)
        try:
            counts = repo.queue_counts()
            swapped = repo.swap_files()
            problem = verify_records(repo, counts)
        finally:
            repo.close()
    except FlowFileRepositoryError as err:
        counts, swapped, problem = {}, [], str(err)
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


def verify_records(repo, counts: dict[str, int]) -> str | None:
    """Read every queued record, as the next start will: None if each decodes and every queue's
    count matches its records, else what is wrong (the library's message names the file)."""
    from repositories.flowfile import FlowFileRepositoryError

    found: dict[str, int] = {}
    try:
        for queue, batch in repo.recover(include_swapped=True):
            found[queue] = found.get(queue, 0) + len(batch)
    except FlowFileRepositoryError as err:
        return str(err)
    wrong = {q: (counts.get(q, 0), n) for q, n in found.items() if counts.get(q, 0) != n}
    wrong.update({q: (c, 0) for q, c in counts.items() if c and q not in found})
    if wrong:
        listing = ", ".join(f"'{q}' counts {c} but holds {n}" for q, (c, n) in sorted(wrong.items()))
        return (f"queue counts do not match the records in {repo.path}: {listing}. Starting the flow "
                f"rebuilds the counts from the records")
    return None


EXTENSIONS_HELP = ("a folder of NiFi Python processors that a NiFi flow definition uses (repeatable; "
                   "default: FLOWACTORS_PYTHON_EXTENSIONS, folders separated by the path separator)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flowactors", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a flow on Ray until it is idle or for a duration")
    run.add_argument("flow", help="flow.py or flow.json")
    run.add_argument("--repository", default="repository", help="folder of the repositories (default: ./repository)")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--until-idle", action="store_true", help="stop once nothing is left to do (default)")
    mode.add_argument("--duration", type=float, help="run for this many seconds")
    run.add_argument("--timeout", type=float, help="give up an until-idle run after this many seconds")
    run.add_argument("--address", help="Ray address (default: an embedded local Ray)")
    run.add_argument("--engine", choices=ENGINES, default="ray",
                     help="ray (default): processors in Ray actors; in-process: this process, no Ray; "
                          "stateless: the whole flow as one transaction a trigger, in memory")
    run.add_argument("--stateless", dest="engine", action="store_const", const="stateless",
                     help="the same as --engine stateless: trigger until the sources have nothing left")
    run.add_argument("--failure-port", action="append", default=[], metavar="PORT",
                     help="stateless: an output port whose FlowFiles fail the trigger (repeatable)")
    run.add_argument("--trigger-timeout", type=float, metavar="S", help="stateless: the longest one trigger may take")
    run.add_argument("--nodes", metavar="all|N|NAME,...",
                     help="run the flow on several nodes of the Ray cluster (--address), each over "
                          "REPOSITORY/nodes/NAME, with load-balanced connections between them (docs/cluster.md)")
    run.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                     help="override a setting (docs/configuration.md), e.g. always_sync=true")
    run.add_argument("--quiet", action="store_true", help="no status table")
    run.add_argument("--extensions", action="append", metavar="DIR", help=EXTENSIONS_HELP)
    run.add_argument("--json", action="store_true", help="print the final status as JSON")
    run.add_argument("--fail-on-error", action="store_true", help="exit 3 if any processor reported an error")
    run.add_argument("--stall-seconds", type=float, default=STALL_SECONDS, metavar="S",
                     help="end an until-idle run (exit 4) once nothing moved for S seconds while processors "
                          f"kept failing (default {STALL_SECONDS:g})")
    run.set_defaults(handler=cmd_run)

    validate = sub.add_parser("validate", help="check a flow and list every problem")
    validate.add_argument("flow")
    validate.add_argument("--extensions", action="append", metavar="DIR", help=EXTENSIONS_HELP)
    validate.set_defaults(handler=cmd_validate)

    status = sub.add_parser("status", help="what a stopped flow's repository holds, or a flow's state on a cluster")
    status.add_argument("flow", nargs="?", help="a flow submitted to a cluster (with --address)")
    status.add_argument("--repository", default="repository", help="a stopped flow's repository folder")
    status.add_argument("--address", help="the cluster's Ray dashboard, e.g. http://HEAD:8265")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=cmd_status)

    from flowactors.cli.provenance import add_subcommands

    add_subcommands(sub)  # provenance search|show, lineage, replay

    from flowactors.cli.queue import add_subcommands as add_queue_subcommands

    add_queue_subcommands(sub)  # queue list|empty

    from flowactors.cli.state import add_subcommands as add_state_subcommands

    add_state_subcommands(sub)  # state list|clear

    from flowactors.ops.cluster_client import add_subcommands as add_cluster_subcommands

    add_cluster_subcommands(sub)  # submit, stop, logs (status FLOW --address is above)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except FlowValidationError as err:
        print(f"flowactors: {err}", file=sys.stderr)
        return 2
    except SettingsError as err:
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

        known = (FlowStartError, OSError)
        try:
            from repositories.flowfile import FlowFileRepositoryError

            known += (FlowFileRepositoryError,)
        except ImportError:
            pass
        if isinstance(err, known):
            print(f"flowactors: {getattr(err, 'cause', None) or err}", file=sys.stderr)  # Ray: the remote error
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
