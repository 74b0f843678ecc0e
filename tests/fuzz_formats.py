"""The formats the fuzzers feed, each with its valid inputs (made by its real writer), the
damaged inputs drawn from them, and its public reader: what a user's damaged file reaches
(tests/test_fuzz_formats.py runs each briefly, bench/fuzz.py for minutes; docs/formats/README.md).

A ``Format`` reads one example in a folder of its own and may raise only its reader's documented
errors (``accepted``); when ``names_place`` is set, their message must name the file (or the
byte offset) too. ``check`` runs one example under a CPU-time limit and a memory bound and
raises ``Finding`` for anything else: another exception, a hang, an unbounded allocation, an
error that names no place, or a read that gives what the format does not allow.

The formats of the repositories (the FlowFile log, swap files, provenance) are in
``fuzz_repositories.py``; this module holds the registry and the flowactors-level formats.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import orjson
from hypothesis import strategies as st

from tests.fuzz_mutations import EXAMPLE_CPU_SECONDS, cpu_limit, damaged, json_documents, memory_bound


class Finding(Exception):
    """An example a reader did not handle as its format documents (the message says how);
    ``signature`` tells findings apart (the exception's type and where it came from)."""

    def __init__(self, message: str, signature: str = "") -> None:
        super().__init__(message)
        self.signature = signature or message


@dataclass
class Format:
    """One format: ``seeds(folder)`` makes its valid inputs with the real writer (once) and
    returns what ``strategy`` draws from; ``read(folder, example)`` writes the example under a
    fresh ``folder`` and reads it with the public reader."""

    name: str
    seeds: Callable[[Path], Any]
    strategy: Callable[[Any], st.SearchStrategy]
    read: Callable[[Path, Any], None]
    accepted: tuple[type[BaseException], ...]
    names_place: bool = True
    _made: dict = field(default_factory=dict, repr=False)

    def seeded(self, workdir: Path) -> Any:
        """The valid inputs, made under ``workdir`` (once a workdir)."""
        if self._made.get("workdir") != workdir:
            folder = workdir / f"{self.name}-seeds"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            self._made.update(workdir=workdir, seeds=self.seeds(folder))
        return self._made["seeds"]

    def examples(self, workdir: Path) -> st.SearchStrategy:
        """The examples to read, drawn from the valid inputs made under ``workdir``."""
        return self.strategy(self.seeded(workdir))


def check(fmt: Format, workdir: Path, example: Any, cpu_seconds: float = EXAMPLE_CPU_SECONDS) -> None:
    """Read ``example`` as ``fmt``'s public reader would; ``Finding`` unless the read is whole
    or ends in one of the format's documented errors (or within ``cpu_seconds`` of CPU time)."""
    folder = workdir / f"{fmt.name}-case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        with memory_bound(), cpu_limit(cpu_seconds):
            fmt.read(folder, example)
    except fmt.accepted as err:
        if fmt.names_place and str(folder) not in str(err) and " at byte " not in str(err):
            raise Finding(f"{fmt.name}: {type(err).__name__} names neither the file nor the offset: {err}",
                          f"{signature(err)} names no place") from err
    except Finding:
        raise
    except BaseException as err:  # a hang, MemoryError and KeyboardInterrupt alike: all but Ctrl-C are findings
        if isinstance(err, KeyboardInterrupt):
            raise
        raise Finding(f"{fmt.name}: {signature(err)}: {type(err).__name__}: {err}", signature(err)) from err


def signature(err: BaseException) -> str:
    """Where an exception came from: the last frame in flowactors' or the repositories' code (the
    reader that let it through), else the last frame."""
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if "/flowactors/" in f.filename or "/repositories/" in f.filename]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return type(err).__name__
    return f"{type(err).__name__} at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"


def expect(condition: bool, problem: str) -> None:
    """A read that returned must have returned what the format allows."""
    if not condition:
        frame = traceback.extract_stack(limit=2)[0]
        raise Finding(f"read without error but {problem}", f"wrong read at {frame.name}:{frame.lineno}")


def strings(mapping: Any) -> bool:
    return isinstance(mapping, dict) and all(type(k) is str and type(v) is str for k, v in mapping.items())


# --- the run error log (flowactors/ops/error_log.py, docs/formats/error-log.md) ----------------------


def _error_log_seeds(folder: Path) -> tuple[list, list[bytes]]:
    from flowactors.ops.error_log import ErrorLog

    log = ErrorLog(folder)
    errors = [{"at": 1795688189.93, "where": "on_trigger", "error": "OSError: [Errno 28] No space left on device",
               "traceback": "Traceback (most recent call last):\n  ...", "node": None},
              {"at": 1795688190.5, "where": "on_scheduled", "error": "ValueError: bad\u00e9", "node": "n1"}]
    log.record({"flow": "orders", "processors": [{"name": "put", "recent_errors": errors}]})
    raw = log.path.read_bytes()
    return [json.loads(line) for line in raw.splitlines()], [raw, *raw.splitlines(keepends=True)]


def _error_log_examples(seeds: tuple[list, list[bytes]]) -> st.SearchStrategy[bytes]:
    documents, raw = seeds
    line = json_documents(documents, raw)
    return st.lists(line, min_size=1, max_size=4).map(lambda lines: b"\n".join(lines)) | damaged(raw)


def _read_error_log(folder: Path, data: bytes) -> None:
    from flowactors.cli.common import CliError
    from flowactors.cli.main import cmd_errors
    from flowactors.ops.error_log import FILE_NAME, read_errors

    (folder / FILE_NAME).write_bytes(data)
    entries, _unreadable = read_errors(folder)
    for entry in entries:
        expect(isinstance(entry["at"], (int, float)) and all(type(entry[k]) is str for k in
                                                          ("processor", "where", "error")), f"an entry {entry!r}")
    for as_json in (False, True):   # what `flowactors errors` prints of it
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                cmd_errors(SimpleNamespace(repository=str(folder), processor=None, last=None, json=as_json))
            except CliError as err:
                expect(str(folder) in str(err), f"the command's error names no file: {err}")


# --- the cluster's files (flowactors/engine/cluster/, docs/formats/cluster-*.md) ---------------------


def _topology_seeds(folder: Path) -> tuple[list, list[bytes]]:
    from flowactors.engine.cluster.topology import ClusterNode, write_topology

    write_topology(folder, "demo", [ClusterNode("n0", "flowactors-node:n0"),
                                    ClusterNode("10.0.0.12", "node:10.0.0.12")])
    raw = (folder / "cluster.json").read_bytes()
    return [orjson.loads(raw)], [raw]


def _read_topology(folder: Path, data: bytes) -> None:
    from flowactors.engine.cluster.topology import read_topology

    (folder / "cluster.json").write_bytes(data)
    nodes = read_topology(folder)
    expect(nodes is not None and all(type(n.name) is str and type(n.resource) is str for n in nodes),
           f"nodes {nodes!r}")


def _cluster_state_seeds(folder: Path) -> tuple[list, list[bytes]]:
    from flowactors.engine.cluster.cluster_state import FILE_NAME, ClusterStateService

    service = ClusterStateService(str(folder))
    service.set("orders/stamp", {"next": "42", "seen": "a,b"})
    service.set("orders/list", {})
    service.replace("orders/stamp", 0, {"next": "43"})
    raw = (folder / FILE_NAME).read_bytes()
    return [orjson.loads(raw)], [raw]


def _read_cluster_state(folder: Path, data: bytes) -> None:
    from flowactors.engine.cluster.cluster_state import FILE_NAME, ClusterStateService

    (folder / FILE_NAME).write_bytes(data)
    service = ClusterStateService(str(folder))
    for component in list(service._states):
        version, values = service.get(component)
        expect(type(version) is int and version >= 0 and strings(values), f"{component}: {version!r} {values!r}")


def _cluster_errors() -> tuple[type[BaseException], ...]:
    from flowactors.engine.errors import ClusterStateError, TopologyError

    return (TopologyError, ClusterStateError)


# --- flow definitions (flowactors/sdk/flow.py, flowactors/driver/loading.py) -------------------------


def _definition_seeds(folder: Path) -> tuple[list, list[bytes]]:
    from flowactors import Flow
    from flowactors.processors import GenerateFlowFile, PutFile, RouteOnAttribute, UpdateAttribute

    flow = Flow("hello", {"swap_threshold": 30000}, parameter_context="env")
    flow.add_parameter_context("env", {"dir": "out/hello"})
    generate = flow.add(GenerateFlowFile, properties={"File Size": "1 KB", "Batch Size": 100}, run_schedule="1 sec")
    tag = flow.add(UpdateAttribute, properties={"greeting": "hello ${filename:substringBefore('-')}"},
                   concurrent_tasks=2)
    route = flow.add(RouteOnAttribute, properties={"big": "${fileSize:gt(10)}"}, auto_terminate=["unmatched"])
    put = flow.add(PutFile, properties={"Directory": "#{dir}"}, auto_terminate=["success", "failure"])
    flow.connect(generate, tag, back_pressure_object_threshold=100, prioritizers=["NewestFlowFileFirst"])
    flow.connect(tag, route)
    flow.connect(route, put, "big", load_balance="round-robin", flowfile_expiration="5 min")
    text = flow.to_json().encode()
    return [orjson.loads(text)], [text]


def _nifi_seeds(folder: Path) -> tuple[list, list[bytes]]:
    from tests.nifi_flows import orders_flow

    documents = [orders_flow("in", "out", 10)]
    return documents, [orjson.dumps(d) for d in documents]


def _read_definition(folder: Path, data: bytes) -> None:
    from flowactors.driver.loading import load_flow

    path = folder / "flow.json"
    path.write_bytes(data)
    load_flow(path).validate()


def _definition_errors() -> tuple[type[BaseException], ...]:
    from flowactors.driver.errors import FlowLoadError
    from flowactors.sdk.flow import FlowValidationError

    return (FlowValidationError, FlowLoadError)


# --- FlowFile Stream v3 (flowactors/processors/packaging.py, docs/formats/flowfile-stream-v3.md) -----


def _v3_seeds(folder: Path) -> list[bytes]:
    from flowactors.processors.packaging import write_flowfile

    packages = []
    for flowfiles in ([({"filename": "a.txt", "path": "./"}, b"hello")],
                      [({}, b""), ({"k" * 70000: "v", "\u00e9": "x" * 300}, b"\x00" * 40), ({"a": "b"}, b"z")]):
        out = io.BytesIO()
        for attributes, content in flowfiles:
            write_flowfile(out, attributes, io.BytesIO(content), len(content))
        packages.append(out.getvalue())
    return packages


class _Unseekable(io.RawIOBase):
    """A stream that cannot seek (a socket, a pipe): the reader's other path."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self._data.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)


def _read_v3(folder: Path, data: bytes) -> None:
    from flowactors.processors.packaging import FlowFileStreamReader

    for stream in (io.BytesIO(data), io.BufferedReader(_Unseekable(data))):
        reader = FlowFileStreamReader(stream)
        for packaged in reader:
            expect(strings(packaged.attributes) and packaged.size >= 0, f"a header {packaged!r}")
            while reader.read(1 << 16):
                pass


def _v3_errors() -> tuple[type[BaseException], ...]:
    from flowactors.processors.packaging import PackageError

    return (PackageError,)


def _definitions(seeds: tuple[list, list[bytes]]) -> st.SearchStrategy[bytes]:
    return json_documents(*seeds)


def formats() -> list[Format]:
    """Every format, the repositories' first."""
    from tests.fuzz_repositories import repository_formats

    return [
        *repository_formats(),
        Format("error-log", _error_log_seeds, _error_log_examples, _read_error_log, _error_log_errors()),
        Format("cluster-topology", _topology_seeds, _definitions, _read_topology, _cluster_errors()),
        Format("cluster-state", _cluster_state_seeds, _definitions, _read_cluster_state, _cluster_errors()),
        Format("flow-definition", _definition_seeds, _definitions, _read_definition, _definition_errors(),
               names_place=False),
        Format("nifi-flow-export", _nifi_seeds, _definitions, _read_definition, _definition_errors(),
               names_place=False),
        Format("flowfile-stream-v3", _v3_seeds, lambda seeds: damaged(seeds), _read_v3, _v3_errors()),
    ]


def _error_log_errors() -> tuple[type[BaseException], ...]:
    from flowactors.ops.error_log import ErrorLogError

    return (ErrorLogError,)
