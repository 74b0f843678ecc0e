"""``flowactors submit|status|stop|logs``: flows on a Ray cluster, through the Ray Jobs API.

Everything goes through the head's dashboard address (``--address http://HEAD:8265`` or
``RAY_API_SERVER_ADDRESS``), plain HTTP: the machine running the CLI needs no Ray driver connection,
no client-server port and no route to the GCS. A flow runs as a Ray job (``flowactors.driver.cluster_job run``);
its live state comes from short control jobs (``flowactors.driver.cluster_job status|stop``) that find the flow's
detached controller by name, print one result line and are deleted once read. A job is matched to
its flow by its metadata (``flowactors_flow``), so the CLI finds a flow again by name alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Optional

import typer

import flowactors
import repositories

from flowactors.cli.common import CliError, SettingOption, setting_values, invoke, key_value
from flowactors.driver.loading import load_flow
from flowactors.driver.job_result import RESULT_PREFIX
from flowactors.ops.status_view import status_text
from flowactors.sdk.settings import flow_settings

ADDRESS_ENV = "RAY_API_SERVER_ADDRESS"
DEFAULT_REPOSITORY = "~/flowactors/repositories/{flow}"
#: ``ray job stop`` and ``flowactors stop`` wait this long for a graceful stop before SIGKILL
STOP_GRACE_SECONDS = 120
CONTROL_TIMEOUT = 180.0
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
#: never uploaded with a flow's folder: flowactors' own data folders and caches
EXCLUDES = ["__pycache__/", "*.pyc", ".git/", ".venv/", "repository/"]


# ---------------------------------------------------------------------------------- connecting
def _address(address: str | None) -> str:
    address = address or os.environ.get(ADDRESS_ENV)
    if not address:
        raise CliError(f"give the cluster's dashboard address with --address http://HEAD:8265 "
                       f"(or set {ADDRESS_ENV})", 2)
    if address.startswith("ray://"):
        raise CliError(f"{address} is a Ray Client address; give the dashboard's HTTP address instead, "
                       f"e.g. --address http://HEAD:8265", 2)
    return address if re.match(r"^https?://", address) else f"http://{address}"


def connect(address: str | None):
    """A ``JobSubmissionClient`` for the dashboard at ``address``, or one clear error."""
    from ray.job_submission import JobSubmissionClient  # Ray, heavy: only for the cluster commands

    url = _address(address)
    try:
        return JobSubmissionClient(url)
    except ConnectionError:
        raise CliError(f"no Ray dashboard answers at {url}: is the head running (ray start --head) and is "
                       f"this its dashboard address (default port 8265)?") from None
    except Exception as err:
        if type(err).__name__ == "AuthenticationError":
            raise CliError(f"the Ray cluster at {url} wants an authentication token: set RAY_AUTH_MODE=token "
                           f"and provide the cluster's token as Ray's token authentication describes") from None
        raise


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "flow"


def _submission_id(flow: str, kind: str) -> str:
    return f"flowactors-{kind}-{_slug(flow)}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def flow_jobs(client, flow: str | None = None) -> list:
    """The flow jobs (newest first) of ``flow``, or of every flow."""
    jobs = [j for j in client.list_jobs()
            if (j.metadata or {}).get("flowactors_role") == "flow"
            and (flow is None or j.metadata.get("flowactors_flow") == flow)]
    return sorted(jobs, key=lambda j: j.start_time or 0, reverse=True)


def latest_job(client, flow: str):
    jobs = flow_jobs(client, flow)
    return jobs[0] if jobs else None


def job_result(client, submission_id: str) -> dict | None:
    """The ``FLOWACTORS-RESULT`` a job printed last, if any."""
    found = None
    for line in client.get_job_logs(submission_id).splitlines():
        if line.startswith(RESULT_PREFIX):
            found = line[len(RESULT_PREFIX):]
    return json.loads(found) if found is not None else None


def _status_name(status: Any) -> str:
    return getattr(status, "value", str(status))


def _control(client, flow_job, command: str) -> dict:
    """Run ``python -m flowactors.driver.cluster_job COMMAND FLOW`` on the cluster and return its result."""
    flow = flow_job.metadata["flowactors_flow"]
    runtime_env = {}
    if (flow_job.runtime_env or {}).get("py_modules"):  # flowactors was shipped with the flow: same code
        runtime_env["py_modules"] = flow_job.runtime_env["py_modules"]
    python = flow_job.metadata.get("flowactors_python", "python")
    submission_id = client.submit_job(
        entrypoint=f"{python} -m flowactors.driver.cluster_job {command} {shlex.quote(flow)}",
        submission_id=_submission_id(flow, command), runtime_env=runtime_env or None,
        metadata={"flowactors_flow": flow, "flowactors_role": "control"})
    deadline = time.monotonic() + CONTROL_TIMEOUT
    while not client.get_job_status(submission_id).is_terminal():
        if time.monotonic() > deadline:
            client.stop_job(submission_id)
            raise CliError(f"the {command} job {submission_id} did not finish in {CONTROL_TIMEOUT:.0f} s; "
                           f"is the cluster overloaded? (flowactors logs shows the flow's own log)")
        time.sleep(0.3)
    found = job_result(client, submission_id)
    if found is None:
        tail = "\n".join(client.get_job_logs(submission_id).splitlines()[-15:])
        raise CliError(f"the {command} job {submission_id} ended without a result:\n{tail}")
    try:
        client.delete_job(submission_id)
    except Exception:  # a leftover control job in the list is harmless
        pass
    if "error" in found:
        raise CliError(found["error"])
    return found


# ---------------------------------------------------------------------------------- submit
def cmd_submit(args: SimpleNamespace) -> int:
    flow_path = Path(args.flow)
    flow = load_flow(flow_path)  # the same checks as a local run, before anything is uploaded
    flow.validate()
    settings = setting_values(args.setting)

    flow_settings(flow, settings)
    repository = args.repository or DEFAULT_REPOSITORY.format(flow=_slug(flow.name))
    if not (repository.startswith("~") or os.path.isabs(repository)):
        raise CliError(f"--repository must be an absolute path on the cluster's node (or start with ~), "
                       f"not {repository!r}: a relative one would land in the job's temporary working "
                       f"directory and be lost", 2)
    env_vars = {"RAY_JOB_STOP_WAIT_TIME_S": str(STOP_GRACE_SECONDS)}
    env_vars.update(args.env)
    working_dir = Path(args.working_dir or flow_path.resolve().parent)
    try:
        relative = flow_path.resolve().relative_to(working_dir.resolve())
    except ValueError:
        raise CliError(f"the flow file {flow_path} is not inside the working directory {working_dir}", 2) from None
    runtime_env: dict[str, Any] = {"working_dir": str(working_dir), "excludes": EXCLUDES, "env_vars": env_vars}
    if args.ship_flowactors:
        runtime_env["py_modules"] = [str(Path(flowactors.__file__).parent), str(Path(repositories.__file__).parent)]
    client = connect(args.address)
    running = [j for j in flow_jobs(client, flow.name) if _status_name(j.status) not in TERMINAL]
    if running:
        raise CliError(f"flow '{flow.name}' is already running on this cluster as job {running[0].submission_id}; "
                       f"stop it first (flowactors stop {shlex.quote(flow.name)} --address {args.address})")
    entry = [args.python, "-m", "flowactors.driver.cluster_job", "run", relative.as_posix(), "--repository", repository,
             "--settings-json", json.dumps(settings)]
    if args.duration is not None:
        entry += ["--duration", str(args.duration)]
    if args.keep_running:
        entry.append("--keep-running")
    if args.timeout is not None:
        entry += ["--timeout", str(args.timeout)]
    if args.node:
        entry += ["--node", args.node]
    submission_id = client.submit_job(
        entrypoint=" ".join(shlex.quote(part) for part in entry), runtime_env=runtime_env,
        submission_id=_submission_id(flow.name, "flow"),
        metadata={"flowactors_flow": flow.name, "flowactors_role": "flow", "flowactors_repository": repository,
                  "flowactors_node": args.node or "", "flowactors_python": args.python})
    address = _address(args.address)
    name = shlex.quote(flow.name)
    print(f"submitted flow '{flow.name}' as Ray job {submission_id}\n"
          f"  repository: {repository} (on the node it runs on)\n"
          f"  follow:     flowactors status {name} --address {address}\n"
          f"  logs:       flowactors logs {name} --address {address} --follow\n"
          f"  stop:       flowactors stop {name} --address {address}\n"
          f"  dashboard:  {address} (Jobs, Actors, Metrics)")
    return 0


# ---------------------------------------------------------------------------------- status
def _describe(client, job) -> dict:
    """A flow's state from its latest job: live from its controller while it runs, else its result."""
    state = _status_name(job.status)
    info: dict[str, Any] = {"flow": job.metadata["flowactors_flow"], "job_id": job.submission_id,
                            "job_status": state, "job_message": job.message,
                            "repository": job.metadata.get("flowactors_repository"), "status": None}
    if state == "RUNNING":
        live = _control(client, job, "status")
        info["state"] = ("stopping" if live.get("stopping") else "running") if live.get("running") else "starting"
        info["status"] = live.get("status")
        info["node_ip"] = live.get("node_ip")
        info["repository"] = live.get("repository", info["repository"])
    elif state == "PENDING":
        info["state"] = "pending"
    else:
        outcome = job_result(client, job.submission_id) or {}
        info["state"] = state.lower()
        info["status"] = outcome.get("final")
        info["error"] = outcome.get("error")
        info["stopped_by"] = outcome.get("stopped_by")
        info["recovery"] = outcome.get("recovery")
        info["node_ip"] = outcome.get("node_ip")
        info["repository"] = outcome.get("repository", info["repository"])
    return info


def cmd_cluster_status(args: SimpleNamespace) -> int:

    client = connect(args.address)
    if not args.flow:
        latest: dict[str, Any] = {}
        for job in flow_jobs(client):
            latest.setdefault(job.metadata["flowactors_flow"], job)
        rows = [{"flow": f, "job_id": j.submission_id, "job_status": _status_name(j.status),
                 "repository": j.metadata.get("flowactors_repository")} for f, j in sorted(latest.items())]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print(f"{len(rows)} flow(s) on {_address(args.address)}")
            for row in rows:
                print(f"  {row['flow']}: {row['job_status']} (job {row['job_id']}, repository {row['repository']})")
        return 0
    job = latest_job(client, args.flow)
    if job is None:
        raise CliError(f"no flow '{args.flow}' was submitted to {_address(args.address)}", 2)
    info = _describe(client, job)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        where = f" on {info['node_ip']}" if info.get("node_ip") else ""
        print(f"flow '{info['flow']}': {info['state']}{where} (job {info['job_id']} {info['job_status']}), "
              f"repository {info['repository']}")
        if info.get("stopped_by"):
            print(f"stopped by {info['stopped_by']}")
        if info.get("error") or (info["job_status"] == "FAILED" and info.get("job_message")):
            print(f"error: {info.get('error') or info['job_message']}")
        if info["status"]:
            print(status_text(info["status"]))
    return 1 if info["job_status"] == "FAILED" else 0


# ---------------------------------------------------------------------------------- stop
def cmd_stop(args: SimpleNamespace) -> int:
    client = connect(args.address)
    job = latest_job(client, args.flow)
    if job is None:
        raise CliError(f"no flow '{args.flow}' was submitted to {_address(args.address)}", 2)
    outcome = _control(client, job, "stop")  # also finds a controller whose driver died
    if not outcome.get("stopped") and _status_name(client.get_job_status(job.submission_id)) not in TERMINAL:
        client.stop_job(job.submission_id)  # not started yet: SIGTERM, and its driver stops what it started
    deadline = time.monotonic() + args.timeout
    while _status_name(client.get_job_status(job.submission_id)) not in TERMINAL:
        if time.monotonic() > deadline:
            client.stop_job(job.submission_id)  # SIGTERM: the driver stops the flow itself if it still runs
            break
        time.sleep(0.5)
    if not outcome.get("stopped"):
        print(f"flow '{args.flow}' was not running (its last job {job.submission_id} is "
              f"{_status_name(client.get_job_status(job.submission_id))})")
        return 0
    final = outcome.get("final") or {}
    queued = {q["id"]: q["count"] for q in final.get("queues", [])}
    where = f" on {outcome['node_ip']}" if outcome.get("node_ip") else ""
    print(f"flow '{args.flow}' stopped: {sum(queued.values())} FlowFiles stay queued in "
          f"{outcome.get('repository') or job.metadata.get('flowactors_repository')}{where} for the next start")
    for queue, count in sorted(queued.items()):
        if count:
            print(f"  {queue}: {count}")
    return 0


# ---------------------------------------------------------------------------------- logs
def cmd_logs(args: SimpleNamespace) -> int:
    client = connect(args.address)
    job = latest_job(client, args.flow)
    if job is None:
        raise CliError(f"no flow '{args.flow}' was submitted to {_address(args.address)}", 2)
    if not args.follow:
        sys.stdout.write(client.get_job_logs(job.submission_id))
        return 0

    async def follow() -> None:
        async for chunk in client.tail_job_logs(job.submission_id):
            sys.stdout.write(chunk)
            sys.stdout.flush()

    asyncio.run(follow())
    return 0


# ---------------------------------------------------------------------------------- commands
Address = Annotated[Optional[str], typer.Option(help=f"the Ray dashboard, e.g. http://HEAD:8265 "
                                                     f"(default: ${ADDRESS_ENV})")]
FlowName = Annotated[str, typer.Argument(metavar="FLOW", help="the flow's name", show_default=False)]


def add_commands(app: typer.Typer) -> None:
    """Register ``submit``, ``stop`` and ``logs`` on the command group (``status FLOW --address`` is
    ``status``'s)."""

    @app.command("submit", help="Run a flow on a Ray cluster as a Ray job.")
    def submit(flow: Annotated[str, typer.Argument(metavar="FLOW", show_default=False, help=(
                   "flow.py or flow.json; its folder is uploaded as the job's working directory"))],
               address: Address = None,
               repository: Annotated[Optional[str], typer.Option(help=(
                   f"absolute repository folder on the node (default: {DEFAULT_REPOSITORY})"))] = None,
               duration: Annotated[Optional[float], typer.Option(help="run for this many seconds (default: "
                                                                      "until idle)")] = None,
               keep_running: Annotated[bool, typer.Option("--keep-running", help="run until flowactors "
                                                                                 "stop")] = False,
               timeout: Annotated[Optional[float], typer.Option(help="give up an until-idle run after this many "
                                                                     "seconds")] = None,
               node: Annotated[Optional[str], typer.Option(help=(
                   "run on this node (IP address, host name or node id; default: the node the job's driver "
                   "runs on, normally the head)"))] = None,
               setting: SettingOption = None,
               env: Annotated[Optional[list[str]], typer.Option(parser=key_value, metavar="KEY=VALUE", help=(
                   "an environment variable for the flow's processes (nothing secret: it is visible in the "
                   "job's details); repeatable"))] = None,
               working_dir: Annotated[Optional[str], typer.Option(help="upload this folder instead of the flow "
                                                                       "file's")] = None,
               ship_flowactors: Annotated[bool, typer.Option("--ship-flowactors", help=(
                   "upload this flowactors with the job (py_modules) instead of using the cluster's"))] = False,
               python: Annotated[str, typer.Option(help="the cluster's Python command")] = "python") -> None:
        if duration is not None and keep_running:
            raise typer.BadParameter("--duration and --keep-running exclude each other")
        invoke(cmd_submit, flow=flow, address=address, repository=repository, duration=duration,
               keep_running=keep_running, timeout=timeout, node=node, setting=setting, env=env or [],
               working_dir=working_dir, ship_flowactors=ship_flowactors, python=python)

    @app.command("stop", help="Stop a flow running on a cluster; queued FlowFiles stay for the next start.")
    def stop(flow: FlowName, address: Address = None,
             timeout: Annotated[float, typer.Option(help="seconds to wait for the flow's job to end before "
                                                         "stopping the job")] = 60.0) -> None:
        invoke(cmd_stop, flow=flow, address=address, timeout=timeout)

    @app.command("logs", help="The log of a flow's latest job on a cluster.")
    def logs(flow: FlowName, address: Address = None,
             follow: Annotated[bool, typer.Option("--follow", help="keep printing until the job ends")] = False
             ) -> None:
        invoke(cmd_logs, flow=flow, address=address, follow=follow)
