"""The ``ui`` and ``graph`` commands on a Typer application of their own, for the CLI tests of
test_flow_graph.py and test_web_page.py (the ``flowactors`` application registers them the same way)."""

from __future__ import annotations

import typer

from flowactors.cli import ui as ui_cli


def ui_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """flowactors"""

    ui_cli.register(app)
    return app
