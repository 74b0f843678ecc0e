"""Cluster-scoped state's keeper (flowactors/engine/cluster/cluster_state.py): compare-and-set,
versions, durability across a reopen, and a damaged file refused by name. The multi-node run is
tests/test_cluster_nodes.py::test_cluster_scoped_state_is_shared_by_every_node."""

from __future__ import annotations

import re
import threading

import orjson
import pytest

from flowactors.engine.cluster.cluster_state import FILE_NAME, ClusterStateService
from flowactors.engine.errors import ClusterStateError


def test_versions_grow_and_replace_is_compare_and_set(tmp_path):
    keeper = ClusterStateService(str(tmp_path))
    assert keeper.get("f/p") == (-1, {})
    assert keeper.replace("f/p", -1, {"next": "1"}) is True
    assert keeper.replace("f/p", -1, {"next": "9"}) is False          # someone else won version -1
    assert keeper.get("f/p") == (0, {"next": "1"})
    assert keeper.set("f/p", {"next": 2}) == 1 and keeper.get("f/p") == (1, {"next": "2"})
    assert keeper.set("f/p", {}) == 2 and keeper.get("f/p") == (2, {})   # a clear is a version too
    assert keeper.get("f/other") == (-1, {})


def test_racing_replaces_each_win_once(tmp_path):
    keeper = ClusterStateService(str(tmp_path))
    taken: list[int] = []

    def stamp() -> None:
        for _ in range(25):
            while True:
                version, values = keeper.get("f/seq")
                number = int(values.get("next", "1"))
                if keeper.replace("f/seq", version, {"next": str(number + 1)}):
                    taken.append(number)
                    break

    threads = [threading.Thread(target=stamp) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == list(range(1, 101))


def test_every_answered_change_is_on_disk(tmp_path):
    keeper = ClusterStateService(str(tmp_path))
    keeper.set("f/p", {"k": "v"})
    keeper.replace("f/q", -1, {"a": "b"})
    again = ClusterStateService(str(tmp_path))
    assert again.get("f/p") == (0, {"k": "v"}) and again.get("f/q") == (0, {"a": "b"})
    data = orjson.loads((tmp_path / FILE_NAME).read_bytes())
    assert data == {"flowactors_cluster_state": 1, "components": {"f/p": {"version": 0, "values": {"k": "v"}},
                                                                  "f/q": {"version": 0, "values": {"a": "b"}}}}
    assert not (tmp_path / "cluster-state.tmp").exists()


@pytest.mark.parametrize("content, message", [
    (b"{not json", "is damaged"),
    (b'{"flowactors_cluster_state": 2, "components": {}}', "not cluster state of format 1 (found 2)"),
    (b'{"flowactors_cluster_state": 1, "components": {"f/p": {"version": "x", "values": {}}}}', "is damaged"),
])
def test_a_damaged_or_foreign_file_is_refused_by_name(tmp_path, content, message):
    (tmp_path / FILE_NAME).write_bytes(content)
    with pytest.raises(ClusterStateError, match=re.escape(message)) as caught:
        ClusterStateService(str(tmp_path))
    assert str(tmp_path / FILE_NAME) in str(caught.value)


def test_a_failed_write_stores_nothing(tmp_path, monkeypatch):
    keeper = ClusterStateService(str(tmp_path))
    keeper.set("f/p", {"k": "1"})

    def full(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ClusterStateService, "_write", full)
    with pytest.raises(OSError):
        keeper.replace("f/p", 0, {"k": "2"})
    assert keeper.get("f/p") == (0, {"k": "1"})
