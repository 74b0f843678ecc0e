"""Where a running flow's page is: the address file it keeps in the repository folder.

``<repository>/ui-address.json`` (docs/ui.md, "The address file", describes it byte by byte):
written when the page starts (``repositories.fsutil.write_atomically``: to a temporary name, then renamed, so a reader never sees half of
it; mode 0600, since it holds the token of a page bound beyond this machine) and removed when it
stops. A flow that died leaves it behind: ``flowactors ui`` then finds nobody answering there and
says so, changing nothing.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from repositories.fsutil import write_atomically

ADDRESS_FILE = "ui-address.json"
VERSION = 1


class NoPageError(LookupError):
    """No page's address is in that repository folder (the message says why and what to do)."""


@dataclass(frozen=True)
class PageAddress:
    """What the address file holds (``version`` 1)."""

    url: str              # the page's address, with ``?token=`` when it needs one
    flow: str             # the flow's name
    pid: int              # the process serving the page (the flow's driver)
    hostname: str         # the machine it runs on
    started: float        # when the page started, seconds since the epoch (UTC)
    version: int = VERSION


def write_address(repository: str | os.PathLike, address: PageAddress) -> Path:
    """Write the address file atomically, mode 0600; returns its path."""
    path = Path(repository) / ADDRESS_FILE
    write_atomically(path, json.dumps(asdict(address), indent=2, sort_keys=True).encode() + b"\n", mode=0o600)
    return path


def remove_address(repository: str | os.PathLike, address: PageAddress) -> None:
    """Remove the address file if it is still this page's (a later run may have replaced it)."""
    path = Path(repository) / ADDRESS_FILE
    try:
        if read_address(repository) == address:
            path.unlink()
    except (NoPageError, FileNotFoundError):
        pass


def read_address(repository: str | os.PathLike) -> PageAddress:
    """The page address in ``repository``, or ``NoPageError`` saying why there is none."""
    path = Path(repository) / ADDRESS_FILE
    if not Path(repository).is_dir():
        raise NoPageError(f"no repository folder at {repository}")
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise NoPageError(f"no flow with a page runs on {repository} (no {ADDRESS_FILE}); start one with "
                          f"'flowactors run FLOW --ui --repository {repository}'") from None
    except (OSError, ValueError) as err:
        raise NoPageError(f"{path} cannot be read as a page address: {err}") from None
    if not isinstance(raw, dict) or raw.get("version") != VERSION:
        found = raw.get("version") if isinstance(raw, dict) else None
        raise NoPageError(f"{path} is a page address of version {found!r}; this flowactors reads version {VERSION}")
    try:
        return PageAddress(**raw)
    except TypeError as err:
        raise NoPageError(f"{path} is not a page address: {err}") from None


def on_this_machine(address: PageAddress) -> bool:
    return address.hostname == socket.gethostname()


def process_alive(pid: object) -> bool:
    """Whether the process ``pid`` may still run on this machine (signal 0 checks, sends nothing):
    False only when no such process exists; one owned by someone else, or a value that is no pid,
    counts as alive (say what a file says rather than guess)."""
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except ProcessLookupError:
        return False
    except (OSError, ValueError, TypeError, OverflowError):
        pass  # not ours to signal, or not a pid: say what the file says
    return True
