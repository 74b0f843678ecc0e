"""HashContent."""

from __future__ import annotations

import hashlib
import os

import pytest

from flowactors.processors import HashContent
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines

DATA = os.urandom(3 * 1024 * 1024 + 5)  # several chunks


@pytest.mark.parametrize("algorithm,reference", [
    ("MD5", hashlib.md5), ("SHA-1", hashlib.sha1), ("SHA-256", hashlib.sha256), ("SHA-512", hashlib.sha512),
    ("BLAKE2b", hashlib.blake2b),
])
def test_each_algorithm_matches_hashlib(algorithm, reference):
    runner = ProcessorRunner(HashContent, {"Hash Algorithm": algorithm})
    runner.enqueue(DATA)
    runner.enqueue(b"")
    runner.run()
    big, empty = runner.output("success")
    assert big.attributes["hash.value"] == reference(DATA).hexdigest()
    assert empty.attributes["hash.value"] == reference(b"").hexdigest()


def test_default_is_sha256_attribute_name_and_event():
    runner = ProcessorRunner(HashContent, {"Hash Attribute Name": "checksum"})
    flowfile = runner.enqueue(b"abc")
    runner.run()
    [out] = runner.output("success")
    assert out.attributes["checksum"] == hashlib.sha256(b"abc").hexdigest()
    assert "hash.value" not in out.attributes
    [event] = runner.events()
    assert event.event_type == T.ATTRIBUTES_MODIFIED and event.flowfile_uuid == flowfile.uuid


def test_empty_content_can_be_a_failure():
    runner = ProcessorRunner(HashContent, {"Fail if the content is empty": True})
    runner.enqueue(b"")
    runner.enqueue(b"x")
    runner.run()
    assert [f.size for f in runner.output("failure")] == [0]
    assert [f.size for f in runner.output("success")] == [1]


def test_unreadable_content_goes_to_failure():
    runner = ProcessorRunner(HashContent)
    runner.lose_content(runner.enqueue(b"abc"))
    runner.run()
    [failed] = runner.output("failure")
    assert "hash.value" not in failed.attributes


def test_validation():
    assert HashContent.validate_properties({"Hash Algorithm": "CRC32"})
    assert HashContent.validate_properties({"Hash Attribute Name": " "})
