"""Every repository implementation keeps the public signatures of its repository's Protocol.

A repository's Protocol (``repositories/<repository>/protocol.py``) is what the framework calls on
it; each implementation subclasses it, which mypy checks, and this test checks the same at run time
without mypy: every method and property the Protocol declares is defined by the implementation
itself (not inherited from the Protocol's empty body), with the same parameters (names, kinds,
defaults and annotations, resolved) and the Protocol's return type or a narrower one.

To cover another implementation or repository, add a row to ``IMPLEMENTATIONS``.
"""

from __future__ import annotations

import inspect
import io
import typing
from typing import Any, Callable

import pytest

from repositories.content import ContentRepository, FileSystemContentRepository, InMemoryContentRepository
from repositories.flowfile import FlowFileRepository, InMemoryFlowFileRepository, WriteAheadFlowFileRepository
from repositories.provenance import (InMemoryProvenanceRepository, ProvenanceRepository,
                                      WriteAheadProvenanceRepository)

#: (Protocol, implementation)
IMPLEMENTATIONS: list[tuple[type, type]] = [
    (ContentRepository, FileSystemContentRepository),
    (ContentRepository, InMemoryContentRepository),
    (ProvenanceRepository, WriteAheadProvenanceRepository),
    (ProvenanceRepository, InMemoryProvenanceRepository),
    (FlowFileRepository, WriteAheadFlowFileRepository),
    (FlowFileRepository, InMemoryFlowFileRepository),
]

#: types with no run-time subclasses, and the class that stands for them at run time
RUN_TIME_CLASS: dict[Any, type] = {typing.BinaryIO: io.BufferedIOBase}


def _is_protocol(klass: type) -> bool:
    return bool(klass.__dict__.get("_is_protocol", False))


def protocol_members(protocol: type) -> list[str]:
    """The public methods and properties ``protocol`` and the Protocols it extends declare."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass is not typing.Protocol and _is_protocol(klass):
            names.update(name for name, value in vars(klass).items()
                         if not name.startswith("_") and (callable(value) or isinstance(value, property)))
    return sorted(names)


def _cases() -> list[Any]:
    return [pytest.param(protocol, implementation, member,
                         id=f"{implementation.__name__}.{member}")
            for protocol, implementation in IMPLEMENTATIONS for member in protocol_members(protocol)]


def _function(owner: type, member: str) -> Callable[..., Any]:
    value = inspect.getattr_static(owner, member)
    if isinstance(value, property):
        assert value.fget is not None, f"{owner.__name__}.{member} is a property without a getter"
        return value.fget
    if isinstance(value, (classmethod, staticmethod)):
        return value.__func__
    return value


def _defined_by(implementation: type, member: str) -> type:
    return next(klass for klass in implementation.__mro__ if member in vars(klass))


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """(name, kind, default, resolved annotation) of each parameter but the first (``self``)."""
    hints = typing.get_type_hints(function)
    parameters = list(inspect.signature(function).parameters.values())[1:]
    return [(p.name, p.kind, p.default, hints.get(p.name, inspect.Parameter.empty)) for p in parameters]


def _narrows(returned: Any, promised: Any) -> bool:
    """Whether a return type of ``returned`` keeps a promise of ``promised``: the same type, or a
    subclass of it."""
    if returned == promised:
        return True
    promised = RUN_TIME_CLASS.get(promised, promised)
    return isinstance(returned, type) and isinstance(promised, type) and issubclass(returned, promised)


@pytest.mark.parametrize(("protocol", "implementation", "member"), _cases())
def test_an_implementation_keeps_its_protocols_signatures(protocol, implementation, member):
    assert protocol in implementation.__mro__, f"{implementation.__name__} does not subclass {protocol.__name__}"
    owner = _defined_by(implementation, member)
    assert not _is_protocol(owner), (
        f"{implementation.__name__} does not define {member}: it inherits the empty body of {owner.__name__}")
    promised, kept = _function(protocol, member), _function(implementation, member)
    assert isinstance(inspect.getattr_static(implementation, member), property) == isinstance(
        inspect.getattr_static(protocol, member), property), f"{member}: a property in one and not the other"
    assert _parameters(kept) == _parameters(promised), f"{implementation.__name__}.{member}'s parameters drifted"
    returned = typing.get_type_hints(kept).get("return")
    expected = typing.get_type_hints(promised).get("return")
    assert _narrows(returned, expected), (
        f"{implementation.__name__}.{member} returns {returned}, not {expected} or narrower")


def test_the_check_sees_a_drifted_signature():
    """The comparison itself: a parameter renamed, a default changed or a return type widened is
    drift; a return type narrowed is not."""

    class Promise(typing.Protocol):
        def read(self, claim: int, now: float | None = None) -> object: ...

    class Kept:
        def read(self, claim: int, now: float | None = None) -> int: ...

    class Renamed:
        def read(self, other: int, now: float | None = None) -> object: ...

    class Defaulted:
        def read(self, claim: int, now: float | None = 0.0) -> object: ...

    promised = _parameters(Promise.read)
    assert _parameters(Kept.read) == promised and _narrows(int, object)
    assert _parameters(Renamed.read) != promised
    assert _parameters(Defaulted.read) != promised
    assert not _narrows(object, int)
    assert protocol_members(Promise) == ["read"]
