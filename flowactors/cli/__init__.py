"""The flowactors command: ``main`` (run, validate, status, errors, submit, ...), with the provenance,
queue and state commands in modules of their own (Typer; ``flowactors --help`` lists them)."""

from flowactors.cli.main import main

__all__ = ["main"]
