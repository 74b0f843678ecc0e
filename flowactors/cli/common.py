"""What the flowactors commands share: the one error a command reports, the options several
take, parsing ``--setting`` pairs, and running a command's handler so that a user mistake is one
line and an exit status, never a traceback (``invoke``, ``exit_status``).
"""

from __future__ import annotations

import functools
import json
import sys
from types import SimpleNamespace
from typing import Annotated, Any, Callable, NoReturn, Optional, Sequence

import typer

from flowactors.driver.errors import FlowLoadError, RunOptionError
from flowactors.driver.loading import load_flow
from flowactors.engine.errors import FlowStartError
from flowactors.engine.errors import NoSuchEventError, ReplayError
from flowactors.ops.lineage_render import RenderError
from flowactors.ops.provenance_tools import ContentGoneError
from flowactors.sdk.flow import Flow, FlowValidationError
from flowactors.sdk.settings import Settings, SettingsError, flow_settings
from repositories.content import ContentRepositoryError
from repositories.flowfile import FlowFileRepositoryError
from repositories.lock import RepositoryInUseError
from repositories.provenance import ProvenanceFormatError


class CliError(Exception):
    """A problem to show the user as one message."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def setting_values(pairs: Sequence[str] | None) -> dict[str, Any]:
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
    except (FlowValidationError, SettingsError, FlowLoadError, RunOptionError) as err:
        print(f"flowactors: {err}", file=sys.stderr)
        return 2
    except CliError as err:
        print(f"flowactors: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt as err:
        print(f"flowactors: interrupted{f' by {err}' if str(err) else ''}", file=sys.stderr)
        return 130
    except Exception as err:  # repository and start-up errors carry their own advice
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


FlowOption = Annotated[Optional[str], typer.Option("--flow", help="the flow (.py/.json), for its settings and "
                                                                   "connections")]


def optional_flow(args: SimpleNamespace) -> Flow | None:
    return load_flow(args.flow) if args.flow else None


def resolve_settings(args: SimpleNamespace, flow: Flow | None) -> Settings:
    """The settings the flow ran with: the flow's own, then ``--setting`` overrides."""
    overrides = setting_values(args.setting)
    if flow is not None:
        return flow_settings(flow, overrides)
    return Settings.from_dict(overrides)


def guarded(handler: Callable[[SimpleNamespace], int]) -> Callable[[SimpleNamespace], int]:
    """Turn the repositories' refusals into one-line messages (exit 2: bad input, 1: cannot);
    the flow repository's and the lock's are ``invoke``'s own (exit 1)."""

    @functools.wraps(handler)
    def run(args: SimpleNamespace) -> int:
        try:
            return handler(args)
        except (NoSuchEventError, FileNotFoundError, RenderError) as err:
            raise CliError(str(err), 2) from None
        except ValueError as err:   # a search filter the index cannot answer, a bad setting value
            if isinstance(err, ProvenanceFormatError):
                raise CliError(str(err), 1) from None
            raise CliError(str(err), 2) from None
        except (ContentGoneError, ReplayError, ContentRepositoryError) as err:
            raise CliError(str(err), 1) from None

    return run
