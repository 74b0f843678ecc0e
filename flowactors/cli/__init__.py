"""The ``flowactors`` command: ``main`` (run, validate, status, submit, ...), with the provenance and
queue commands in modules of their own."""

from flowactors.cli.main import main

__all__ = ["main"]
