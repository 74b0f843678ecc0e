"""How an engine reaches a queue or a repository, wherever it was placed: one ``call`` for all.

A *link* stands for one component (a connection's queue, a repository) as seen from one processor
task. ``link.call(method, *args)`` starts the call and returns a pending result; ``resolve`` waits
for a list of them at once, so a commit's offers to several queues overlap. The links differ only
in transport, which is what placement decides:

* ``LoopLink``: an async component on this process's event loop (a queue hosted in the same
  executor as the processor): a local call, nothing pickled.
* ``HostedLink``: a component hosted in another executor actor: one batched actor call.
* ``ActorLink``: a component in an actor of its own (isolated placement, repository actors).
* ``ObjectLink`` / ``QueueObjectLink``: a plain object in this process (the in-process engine and
  the unit-test runner), called at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, Protocol, Sequence

import ray


class Link(Protocol):
    def call(self, method: str, *args: Any) -> Any:
        """Start ``method(*args)`` on the component; returns a pending result for ``resolve``."""


def completed(function: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
    """Run ``function`` now and hand back its result (or exception) as a finished future."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    try:
        future.set_result(function(*args))
    except BaseException as err:  # handed to whoever resolves it, as a remote error would be
        future.set_exception(err)
    return future


def resolve(pending: Sequence[Any]) -> list[Any]:
    """The results of pending calls, in order; Ray's are fetched in one ``ray.get``. A failure is
    raised as it comes (the callers decide what a failure means: before or after the log)."""
    refs = [p for p in pending if isinstance(p, ray.ObjectRef)]
    fetched = iter(ray.get(refs) if refs else ())
    return [next(fetched) if isinstance(p, ray.ObjectRef) else p.result() for p in pending]


def call_now(link: Link, method: str, *args: Any) -> Any:
    """One call, waited for."""
    return resolve([link.call(method, *args)])[0]


class ObjectLink:
    """A component that is a plain object in this process, called directly."""

    def __init__(self, target: Any):
        self.target = target

    def call(self, method: str, *args: Any) -> concurrent.futures.Future:
        return completed(getattr(self.target, method), *args)


class QueueObjectLink(ObjectLink):
    """A ``ConnectionQueue`` in this process, driven by one thread: nothing can arrive while its
    caller waits, so a wait for data or for room returns at once with what is there."""

    def call(self, method: str, *args: Any) -> concurrent.futures.Future:
        if method == "poll":  # (max_count, wait)
            return completed(self.target.poll, args[0])
        if method == "wait_not_full":
            return completed(self.target.state)
        return super().call(method, *args)


class ActorLink:
    """A component in a Ray actor of its own: one actor call per ``call``."""

    def __init__(self, handle: Any):
        self.handle = handle

    def call(self, method: str, *args: Any) -> ray.ObjectRef:
        return getattr(self.handle, method).remote(*args)


class LoopLink:
    """An async component on an event loop of this process, called from another thread of it (a
    processor task reaching a queue hosted in its own executor): no pickling, no actor call."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop):
        self.target = target
        self.loop = loop

    def call(self, method: str, *args: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(getattr(self.target, method)(*args), self.loop)


class HostedLink:
    """A component hosted in an executor actor, addressed by its key there.

    It also answers ``link.method.remote(*args)`` as an actor handle would, so operations code
    written for a queue actor (queue admin, replay, recovery) works on a hosted queue unchanged.
    """

    def __init__(self, executor: Any, key: str):
        self.executor = executor
        self.key = key

    def call(self, method: str, *args: Any) -> ray.ObjectRef:
        return self.executor.call_hosted.remote(self.key, method, *args)

    def __getattr__(self, method: str) -> "_RemoteMethod":
        if method.startswith("__"):
            raise AttributeError(method)
        return _RemoteMethod(self, method)

    def __reduce__(self):
        return HostedLink, (self.executor, self.key)


class _RemoteMethod:
    __slots__ = ("link", "method")

    def __init__(self, link: HostedLink, method: str):
        self.link = link
        self.method = method

    def remote(self, *args: Any) -> ray.ObjectRef:
        return self.link.call(self.method, *args)
