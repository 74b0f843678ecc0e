"""``flowactors ui`` (find a running flow's page) and ``flowactors graph`` (draw a flow), and the
``flowactors run --ui`` side: ``flow_page`` serves the page for the length of a run.

``add_commands(app)`` adds the two commands to the Typer application. Every mistake is a
``CliError`` said by ``flowactors.cli.main.invoke``: one line on standard error and exit status 2
(bad input) or 1 (cannot be done), never a traceback.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import webbrowser
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from flowactors.cli.common import CliError, invoke, one_of
from flowactors.driver.errors import FlowLoadError
from flowactors.driver.loading import load_flow
from flowactors.ops.flow_graph import DIRECTIONS, to_svg
from flowactors.ops.png import PictureError, PngError, check_picture, svg_to_png
from flowactors.ops.web.address import NoPageError, on_this_machine, process_alive, read_address

#: what ``flowactors graph`` writes
PICTURES = (".svg", ".png")
#: seconds ``flowactors ui`` waits for a page to answer
ANSWER_WAIT = 3.0

#: the options ``flowactors run`` takes for its page (the run command declares them with these)
UiFlag = Annotated[bool, typer.Option("--ui", help="serve the flow's page while it runs (docs/ui.md); "
                                                  "'flowactors ui' finds it")]
UiHost = Annotated[str, typer.Option("--ui-host", help="address the page listens on; any other than "
                                                       "127.0.0.1/localhost requires the token it prints")]
UiPort = Annotated[int, typer.Option("--ui-port", min=0, max=65535, help="port of the page (0: a free one)")]


def _direction(text: str) -> str:
    """``--direction``: one of ``DIRECTIONS`` (``cli.main.one_of``)."""
    return one_of(DIRECTIONS)(text)


@contextmanager
def flow_page(flow: Any, repository: str | Path, *, enabled: bool, host: str = "127.0.0.1", port: int = 0,
              engine: str = "ray") -> Iterator[dict]:
    """For ``flowactors run --ui``: the keyword arguments to give ``run_flow`` (none without
    ``enabled``), the page served and its address printed meanwhile, its address file removed after.

    ``with flow_page(flow, repo, enabled=ui, host=ui_host, port=ui_port, engine=engine) as hooks:
    run_flow(flow, repo, ..., **hooks)``
    """
    if not enabled:
        yield {}
        return
    if engine == "stateless":
        raise CliError("--ui shows a flow on the ray or in-process engine; the stateless engine runs no "
                       "flow controller to watch", 2)
    flow.validate()   # the page draws the flow: a broken one is listed (FlowValidationError), not drawn
    from flowactors.ops.web.server import FlowPage, PageError  # the engine and Ray: only with --ui

    Path(repository).mkdir(parents=True, exist_ok=True)
    try:
        page = FlowPage(flow, repository, host=host, port=port).start()
    except PageError as err:
        raise CliError(str(err), 2) from None
    typer.echo(f"flow page: {page.url}", err=True)
    try:
        yield {"on_started": page.on_started, "on_status": page.on_status}
    finally:
        page.stop()


def ui(repository: Annotated[Path, typer.Option("--repository", help="the running flow's repository folder")]
       = Path("repository"),
       open_browser: Annotated[bool, typer.Option("--open", help="open the page in the browser")] = False,
       as_json: Annotated[bool, typer.Option("--json", help="print the address file's fields as JSON")] = False,
       ) -> None:
    """Print the address of the page of the flow running on a repository (started with run --ui)."""
    invoke(cmd_ui, repository=repository, open_browser=open_browser, json=as_json)


def cmd_ui(args: SimpleNamespace) -> int:
    try:
        address = read_address(args.repository)
    except NoPageError as err:
        raise CliError(str(err), 1) from None
    if on_this_machine(address) and not process_alive(address.pid):
        raise CliError(f"the flow '{address.flow}' that served a page on {args.repository} (pid {address.pid}) "
                       f"has stopped; no flow runs there", 1)
    request = urllib.request.Request(address.url.split("?")[0] + "api/meta",
                                     headers={"X-Flowactors-Token": address.url.partition("?token=")[2]})
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # the page, not a proxy
        with direct.open(request, timeout=ANSWER_WAIT) as answer:
            json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise CliError(f"the page of flow '{address.flow}' at {address.url} does not answer "
                       f"({getattr(err, 'reason', err)}); is the flow still running?", 1) from None
    if args.json:
        typer.echo(json.dumps({"url": address.url, "flow": address.flow, "pid": address.pid,
                               "hostname": address.hostname, "started": address.started}))
    else:
        typer.echo(f"flow '{address.flow}': {address.url}")
    if args.open_browser:
        webbrowser.open(address.url)
    return 0


def graph(flow: Annotated[Path, typer.Argument(help="flow.py or flow.json")],
          output: Annotated[Path, typer.Option("--output", "-o", help="the picture to write: .svg, or .png")],
          direction: Annotated[str, typer.Option("--direction", parser=_direction, metavar="DIRECTION",
                                                 help="lr: left to right; tb: top down")] = "lr",
          extensions: Annotated[list[str] | None, typer.Option(
              "--extensions", help="a folder of NiFi Python processors the flow definition uses")] = None,
          ) -> None:
    """Draw a flow's processors and connections, as the flow page shows them."""
    invoke(cmd_graph, flow=flow, output=output, direction=direction, extensions=extensions)


def cmd_graph(args: SimpleNamespace) -> int:
    try:
        output = check_picture(args.output, PICTURES, "a flow")   # before any work
    except PngError as err:
        raise CliError(str(err), 1) from None
    except PictureError as err:
        raise CliError(str(err), 2) from None
    try:
        loaded = load_flow(args.flow, args.extensions, command="graph")
    except (CliError, FlowLoadError):   # they name the file already
        raise
    except Exception as err:   # a definition that does not load: its own message
        raise CliError(f"{args.flow}: {err}", 2) from None
    try:
        svg = to_svg(loaded, args.direction)
    except ValueError as err:
        raise CliError(str(err), 2) from None
    if output.suffix.lower() == ".svg":
        output.write_text(svg, encoding="utf-8")
    else:
        try:
            output.write_bytes(svg_to_png(svg))
        except PngError as err:
            raise CliError(str(err), 1) from None
    typer.echo(f"flow '{loaded.name}': {len(loaded.processors)} processors, {len(loaded.connections)} "
               f"connections, drawn to {output}", err=True)
    return 0


def add_commands(app: typer.Typer) -> None:
    """Add ``ui`` and ``graph`` to the ``flowactors`` Typer application."""
    app.command("ui")(ui)
    app.command("graph")(graph)
