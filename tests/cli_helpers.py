"""Runs flowactors' command line in the test's own process, as tests of the commands read it."""

from __future__ import annotations

from flowactors.cli.main import main


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """``flowactors ARGS...``: its exit status and what it printed on stdout and stderr."""
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err
