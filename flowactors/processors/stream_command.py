"""ExecuteStreamCommand: a FlowFile's content piped through an external command (NiFi's).

The command runs without a shell: Command Path is the program (a name alone is looked up in
PATH), its arguments a list, from Command Arguments split at the Argument Delimiter (and at tabs
and line breaks; double quotes keep a delimiter inside an argument and are dropped, as NiFi's
``ArgumentUtils``) or from the ``command.argument.<n>`` dynamic properties in the order of n.
Every dynamic property is also an environment variable of the command (its value as written).

The content streams to the command's standard input on a thread of its own (unless Ignore
STDIN) while its standard output streams into a new FlowFile's content, so neither is ever whole
in memory; its standard error is drained alongside and its first ``MAX_ERROR_BYTES`` bytes kept
as ``execution.error``. The output FlowFile (a child of the input) goes to ``output stream`` when
the exit status is 0, else to ``nonzero status``, penalized; the input goes to ``original``; both
carry execution.status, execution.command, execution.command.args and execution.error (and
mime.type when Output MIME Type is set). With Output Destination Attribute the output (its first
Max Attribute Length bytes) becomes that attribute of the input instead, which alone goes to
``original`` whatever the status, and only ``original`` exists.

A command that cannot start (no such program, not executable, a working directory that cannot
be created or entered) raises ``CommandError``, one line naming the command or the directory:
the session rolls back and the engine penalizes the FlowFile in its queue (NiFi's
ProcessException). The command runs in a
process group of its own; whenever the trigger ends with the command still running (an error, or
Command Timeout passed: a flowactors addition) the whole group is killed, and so is every command
still running when the process exits normally, so no process is left behind. A command killed by a signal reports status 128 + the signal's number, as Java does.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import signal
import subprocess
import threading
from typing import BinaryIO, Callable, Mapping

from flowactors.processors._common import CHUNK, boolean_property, decode_prefix, iter_chunks, read_prefix
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators

log = logging.getLogger(__name__)

#: bytes of the command's standard error kept in execution.error (NiFi's 4000)
MAX_ERROR_BYTES = 4000
ARGUMENTS_PROPERTY, DYNAMIC_ARGUMENTS = "Command Arguments Property", "Dynamic Property Arguments"
#: the dynamic properties that are arguments with Dynamic Property Arguments
ARGUMENT_PATTERN = re.compile(r"command\.argument\.([0-9]+)")

ORIGINAL = Relationship("original", "The input FlowFile, with the execution's attributes")
OUTPUT_STREAM = Relationship("output stream", "The command's output, when it exited with status 0")
NONZERO_STATUS = Relationship("nonzero status", "The command's output, when it exited with another status "
                              "(penalized)")


#: the commands running in this process: killed (their groups) when it exits, so none outlives it
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


@atexit.register
def _kill_running() -> None:
    """Kill every command still running (the process is exiting)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for process in running:
        _kill_group(process)


class CommandError(RuntimeError):
    """The command could not be started; the message is one line naming it."""


def split_args(text: str | None, delimiter: str) -> list[str]:
    """``text`` split at ``delimiter``, tabs and line breaks outside double quotes; the quotes
    are dropped and empty arguments kept (NiFi's ``ArgumentUtils.splitArgs``)."""
    if text is None:
        return []
    args: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char in "\t\r\n" or char == delimiter:
            if quoted:
                current.append(char)
            else:
                args.append("".join(current))
                current = []
        elif char == '"':
            quoted = not quoted
        else:
            current.append(char)
    args.append("".join(current))
    return args


def _java_trim(text: str) -> str:
    """``text`` without the characters up to a space at either end (Java's ``String.trim``)."""
    return text.strip("".join(map(chr, range(33))))


def _single_char(value: str) -> str | None:
    return None if len(value) == 1 else "must be a single character"


class ExecuteStreamCommand(Processor):
    """Runs an external command over each FlowFile's content (see the module docstring).

    Provenance: the output stream FlowFile is a child of the original (the session's FORK)
    with its content (CONTENT_MODIFIED); the session's ATTRIBUTES_MODIFIED for the execution attributes.
    """

    description = "Pipes each FlowFile's content through an external command, its output a new FlowFile"
    properties = (
        PropertyDescriptor("Working Directory", "The directory the command runs in (created when missing); unset: "
                           "the engine's", expression_language=True),
        PropertyDescriptor("Command Path", "The program to run; a name alone is looked up in PATH", required=True,
                           expression_language=True, validator=validators.NON_EMPTY),
        PropertyDescriptor("Command Arguments Strategy", "Where the arguments come from", default=ARGUMENTS_PROPERTY,
                           allowable_values=(ARGUMENTS_PROPERTY, DYNAMIC_ARGUMENTS)),
        PropertyDescriptor("Command Arguments", "The arguments, separated by the Argument Delimiter (Command "
                           "Arguments Property)", expression_language=True),
        PropertyDescriptor("Argument Delimiter", "The character between arguments in Command Arguments",
                           required=True, default=";", validator=_single_char),
        boolean_property("Ignore STDIN", False, "Whether to give the command no input instead of the content"),
        PropertyDescriptor("Output Destination Attribute", "When set, the output becomes this attribute of the "
                           "original instead of a FlowFile (and only 'original' remains)"),
        PropertyDescriptor("Max Attribute Length", "The most bytes of output put in Output Destination Attribute "
                           "(the rest is dropped)", default="256", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Output MIME Type", "The mime.type given the output (ignored with Output Destination "
                           "Attribute)", validator=validators.NON_EMPTY),
        PropertyDescriptor("Command Timeout", "How long the command may run before its process group is killed "
                           "(status 137); unset: no limit, as NiFi. Not in NiFi", validator=validators.DURATION),
    )
    dynamic_properties = True
    relationships = (OUTPUT_STREAM, ORIGINAL, NONZERO_STATUS)
    NIFI_TYPE = "org.apache.nifi.processors.standard.ExecuteStreamCommand"
    NIFI_PROPERTY_NAMES = {"argumentsStrategy": "Command Arguments Strategy"}

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> tuple[Relationship, ...]:
        if values.get("Output Destination Attribute"):
            return (ORIGINAL,)
        return (OUTPUT_STREAM, ORIGINAL, NONZERO_STATUS)

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfile = session.get()
        if flowfile is None:
            return
        command = context.property("Command Path").evaluate(flowfile) or ""
        args, shown_args = self._arguments(context, flowfile)
        attribute = context.property("Output Destination Attribute").raw or None
        runner = _Execution([command, *args], self._environment(context), self._directory(context, flowfile),
                            context.property("Command Timeout").as_duration())
        stdin_from = None if context.property("Ignore STDIN").as_bool() else flowfile
        if attribute is None:
            output = session.create(parent=flowfile)
            try:
                output = session.write(output, lambda out: runner.run(session, stdin_from, out.write))
            except BaseException:
                session.remove(output)
                raise
        else:
            limit = context.property("Max Attribute Length").as_int()
            kept = bytearray()
            runner.run(session, stdin_from, lambda chunk: kept.extend(chunk[:limit - len(kept)]))
            text = decode_prefix(bytes(kept), "utf-8", len(kept) >= limit)
        attributes = {"execution.error": runner.error, "execution.status": str(runner.status),
                      "execution.command": command, "execution.command.args": shown_args}
        mime = context.property("Output MIME Type").raw
        if mime and attribute is None:
            attributes["mime.type"] = mime
        if runner.status != 0:
            log.error("%s: command %s exited with status %d: %s", context.name, command, runner.status,
                      runner.error.strip()[:200])
        if attribute is not None:
            session.transfer(session.put_all_attributes(flowfile, {attribute: text, **attributes}), ORIGINAL)
            return
        output = session.put_all_attributes(output, attributes)
        if runner.status != 0:
            session.transfer(session.penalize(output), NONZERO_STATUS)
        else:
            session.transfer(output, OUTPUT_STREAM)
        session.transfer(session.put_all_attributes(flowfile, attributes), ORIGINAL)

    @staticmethod
    def _arguments(context: ProcessContext, flowfile: FlowFile) -> tuple[list[str], str]:
        """The command's arguments, and execution.command.args: Command Arguments as evaluated,
        or the dynamic arguments joined by tabs."""
        if context.property("Command Arguments Strategy").raw != DYNAMIC_ARGUMENTS:
            text = context.property("Command Arguments").evaluate(flowfile) or ""
            delimiter = context.property("Argument Delimiter").raw or ";"
            return (split_args(text, delimiter) if text.strip() else []), text
        numbered = sorted((int(match.group(1)), name) for name in context.dynamic_properties
                          if (match := ARGUMENT_PATTERN.fullmatch(name)))
        args = [context.property(name).evaluate(flowfile) or "" for _, name in numbered]
        return args, _java_trim("\t".join(args))

    @staticmethod
    def _environment(context: ProcessContext) -> dict[str, str]:
        """The engine's environment and every dynamic property (as written: NiFi's)."""
        return {**os.environ, **context.dynamic_properties}

    @staticmethod
    def _directory(context: ProcessContext, flowfile: FlowFile) -> str | None:
        """Working Directory, created when missing; one that cannot be is a ``CommandError`` (NiFi
        warns, then its command fails to start there), never a run somewhere else."""
        directory = context.property("Working Directory").evaluate(flowfile)
        if not directory or not directory.strip():
            return None
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as err:
            raise CommandError(f"cannot create working directory {directory}: {err.strerror or err}") from None
        return directory


class _Execution:
    """One run of the command: ``run`` streams the content in and the output out; then
    ``status`` and ``error`` (the start of its standard error) say how it went."""

    #: how a timeout is timed (``threading.Timer``'s signature; a test may put its own)
    timer = threading.Timer

    def __init__(self, argv: list[str], environment: dict[str, str], directory: str | None, timeout: float | None):
        self.argv, self.environment, self.directory, self.timeout = argv, environment, directory, timeout
        self.status = -1
        self.error = ""
        self.timed_out = False

    def run(self, session, stdin_from: FlowFile | None, sink: Callable[[bytes], object]) -> None:
        """Start the command, feed it ``stdin_from``'s content (None: no input), give each chunk
        of its output to ``sink``; the process group is killed if it still runs at the end."""
        try:
            process = subprocess.Popen(self.argv, stdin=subprocess.PIPE if stdin_from else subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.environment,
                                       cwd=self.directory, start_new_session=True, bufsize=0)
        except (OSError, ValueError) as err:   # ValueError: a NUL in an argument
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            where = f" in working directory {self.directory}" if self.directory else ""
            raise CommandError(f"cannot run command '{self.argv[0]}'{where}: {reason}") from None
        with _RUNNING_LOCK:
            _RUNNING.add(process)
        threads = [_thread(self._drain_errors, process.stderr)]
        feed_error: list[BaseException] = []
        if stdin_from is not None:
            threads.append(_thread(self._feed, session, stdin_from, process.stdin, feed_error))
        timer = None
        if self.timeout is not None:
            timer = self.timer(self.timeout, self._expire, (process,))
            timer.daemon = True
            timer.start()
        try:
            for chunk in iter_chunks(process.stdout, CHUNK):
                sink(chunk)
            self.status = process.wait()
            for thread in threads:
                thread.join()
        finally:
            if timer is not None:
                timer.cancel()
            if process.poll() is None:
                _kill_group(process)
            with _RUNNING_LOCK:
                _RUNNING.discard(process)
            process.stdout.close()
        if feed_error:
            raise feed_error[0]
        if self.status < 0:   # killed by a signal: Java reports 128 + its number
            self.status = 128 - self.status
        if self.timed_out:
            self.error = f"killed after Command Timeout ({self.timeout:g} s); {self.error}"

    def _expire(self, process: subprocess.Popen) -> None:
        self.timed_out = True
        _kill_group(process)

    @staticmethod
    def _feed(session, flowfile: FlowFile, stdin: BinaryIO, failed: list[BaseException]) -> None:
        """Copy the content to the command's input, then close it (a command that stops reading
        early is no error); a content that cannot be read is kept in ``failed``."""
        try:
            with session.read(flowfile) as source:
                for chunk in iter_chunks(source, CHUNK):
                    stdin.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except BaseException as err:
            failed.append(err)
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _drain_errors(self, stderr: BinaryIO) -> None:
        kept = read_prefix(stderr, MAX_ERROR_BYTES)
        for _ in iter_chunks(stderr, CHUNK):   # read to the end, or the command could block writing
            pass
        stderr.close()
        self.error = decode_prefix(kept, "utf-8", len(kept) >= MAX_ERROR_BYTES)


def _thread(target: Callable, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name="ExecuteStreamCommand")
    thread.start()
    return thread


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the command and everything it started (its process group), and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
