"""How an engine reaches a queue or a repository, wherever it was placed: one ``call`` for all.

A *link* stands for one component (a connection's queue, a repository) as seen from one processor
task. ``link.call(Component.method, *args, **kwargs)`` starts the call and returns a pending
result; ``resolve`` waits for a list of them at once, so a commit's offers to several queues
overlap. The method is named by reference (``FlowFileRepositoryService.commit``): a type checker
checks the arguments against that class's method, and a rename of it reaches every caller. The
link calls the method *of that name* on its target, as a Ray actor call does, so a target of
another class (a ``ClusterController`` answering ``FlowController.status``, an in-memory
repository answering a service's method, a test's stand-in) must offer the same name and
arguments: the check is against the class named, not the target. The links differ only in
transport, which is what placement decides:

* ``LoopLink``: an async component on this process's event loop (a queue hosted in the same
  executor as the processor): a local call, nothing pickled.
* ``HostedLink``: a component hosted in another executor (on Ray, one batched actor call).
* ``ActorLink``: a component in a Ray actor of its own (isolated placement, repository actors).
* ``ThreadedLink``: a plain object in this process served by threads of its own, one call at a
  time or a few, as an actor would be (the in-process engine's repositories and controller).
* ``ObjectLink`` / ``QueueObjectLink``: a plain object in this process, called at once (the
  unit-test runner).

The lifecycle code (``flowactors.engine.controller``) reaches every component through links too,
which is what lets one controller run a flow on Ray or in one process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from typing import Any, Callable, Concatenate, ParamSpec, Protocol, Sequence, TypeVar, Union

import ray

P = ParamSpec("P")
R = TypeVar("R")
#: a call under way: a future in this process, or a Ray object reference
Pending = Union[concurrent.futures.Future, ray.ObjectRef]
#: a component's method, named by reference (``ConnectionQueue.offer``): the link calls the method
#: of its name on its target
Method = Callable[Concatenate[Any, P], R]


class Link(Protocol):
    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Pending:
        """Start ``method(*args, **kwargs)`` on the component; returns a pending result for ``resolve``."""


class QueueHosting(Protocol):
    """What an executor offers the links to the queues it hosts (``Executor.call_hosted``)."""

    async def call_hosted(self, queue_id: str, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` on the hosted queue ``queue_id``."""


def completed(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
    """Run ``function`` now and hand back its result (or exception) as a finished future."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    try:
        future.set_result(function(*args, **kwargs))
    except BaseException as err:  # handed to whoever resolves it, as a remote error would be
        future.set_exception(err)
    return future


def resolve(pending: Sequence[Pending]) -> list[Any]:
    """The results of pending calls, in order; Ray's are fetched in one ``ray.get``. A failure is
    raised as it comes (the callers decide what a failure means: before or after the log)."""
    refs = [p for p in pending if isinstance(p, ray.ObjectRef)]
    fetched = iter(ray.get(refs) if refs else ())
    return [next(fetched) if isinstance(p, ray.ObjectRef) else p.result() for p in pending]


def causes(error: BaseException) -> list[BaseException]:
    """An error and the ones inside it, outermost first: Ray wraps a remote error in each call
    that passed it on (``cause``)."""
    chain = [error]
    while (cause := getattr(chain[-1], "cause", None)) is not None:
        chain.append(cause)
    return chain


def component_lost(error: BaseException) -> bool:
    """Whether a call failed because the component's process died (or is restarting), rather
    than with an error of its own: then the call's outcome is unknown."""
    return any(isinstance(e, ray.exceptions.RayActorError) for e in causes(error))


def remote_error_line(error: BaseException) -> str | None:
    """The remote error's own last line (``Type: message``) where Ray gives it only as text (an
    actor whose creation task raised: ``ActorDiedError``), else None."""
    text = getattr(error, "error_msg", None)
    if not isinstance(error, ray.exceptions.RayActorError) or not isinstance(text, str):
        return None
    for line in reversed(text.splitlines()):
        line = _ANSI.sub("", line).strip()
        if _ERROR_LINE.match(line):
            return line
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(: |$)")


def call_now(link: Link, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Any:
    """One call, waited for."""
    return resolve([link.call(method, *args, **kwargs)])[0]


def finished(pending: Pending, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for one pending call; True once it is done."""
    if isinstance(pending, ray.ObjectRef):
        ready, _ = ray.wait([pending], timeout=timeout)
        return bool(ready)
    done, _ = concurrent.futures.wait([pending], timeout=timeout)
    return bool(done)


async def awaited(pending: Pending) -> Any:
    """A pending call's result, awaited on an event loop (a queue's swap registry)."""
    if isinstance(pending, ray.ObjectRef):
        return await pending
    return await asyncio.wrap_future(pending)


class ObjectLink:
    """A component that is a plain object in this process, called directly."""

    def __init__(self, target: Any):
        self.target = target

    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future:
        return completed(getattr(self.target, method.__name__), *args, **kwargs)


class QueueObjectLink(ObjectLink):
    """A ``ConnectionQueue`` in this process, driven by one thread: nothing can arrive while its
    caller waits, so a wait for data or for room returns at once with what is there."""

    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future:
        if method.__name__ == "poll":  # QueueHost.poll(max_count, wait): the wait is left out
            kwargs.pop("wait", None)
            return completed(self.target.poll, *args[:1], **kwargs)
        if method.__name__ == "wait_not_full":
            return completed(self.target.state)
        return super().call(method, *args, **kwargs)


class ThreadedLink:
    """A plain object in this process served by ``workers`` threads of its own: calls run one at
    a time in order with one worker, as on a Ray actor, and a caller never runs them itself."""

    def __init__(self, target: Any, workers: int = 1, name: str = "component"):
        self.target = target
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=name)

    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future:
        return self._pool.submit(getattr(self.target, method.__name__), *args, **kwargs)

    def close(self) -> None:
        """Finish the calls already started, take no more."""
        self._pool.shutdown(wait=True)


class ActorLink:
    """A component in a Ray actor of its own: one actor call per ``call``. ``name``: the actor's
    name (what the status shows for it)."""

    def __init__(self, handle: Any, name: str = ""):
        self.handle = handle
        self.name = name

    def __repr__(self) -> str:
        return f"ActorLink({self.name or self.handle!r})"

    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> ray.ObjectRef:
        return getattr(self.handle, method.__name__).remote(*args, **kwargs)


class LoopLink:
    """An async component on an event loop of this process, called from another thread of it (a
    processor task reaching a queue hosted in its own executor): no pickling, no actor call."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop):
        self.target = target
        self.loop = loop

    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future:
        """The call's future; a loop that is closed (a task left behind at stop calls after its
        executor ended) fails it with ``RuntimeError`` without making the call."""
        if self.loop.is_closed():
            return completed(_closed, self.target, method.__name__)
        return asyncio.run_coroutine_threadsafe(getattr(self.target, method.__name__)(*args, **kwargs), self.loop)


def _closed(target: Any, method: str) -> None:
    raise RuntimeError(f"{method} of {type(target).__name__}: its event loop is closed (the executor ended)")


class HostedLink:
    """A component hosted in an executor, addressed by its key there: ``call`` goes through the
    executor's ``call_hosted`` over the executor's own link (an actor on Ray, a loop in process)."""

    def __init__(self, executor: Link, key: str):
        self.executor = executor
        self.key = key

    def call(self, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Pending:
        return self.executor.call(QueueHosting.call_hosted, self.key, method.__name__, *args, **kwargs)
