"""ScriptedLookupService on Python scripts: a lookup service a script defines (NiFi's
TestScriptedLookupService cases, in Python), serving LookupRecord, and a script whose lookup fails."""

from __future__ import annotations

import textwrap

import pytest

from flowactors.services.scripted_lookup import ScriptedLookupService
from flowactors.testing import ProcessorRunner, enable_service


def body(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


LOOKUP = '''
from java.util import Optional

class PythonLookupService(object):
    lookupTable = {'Hello': 'Hi', 'World': 'there'}

    def setLogger(self, logger):
        self.logger = logger

    def onEnabled(self, context):
        self.logger.info("in onEnabled")
        self.suffix = context.getProperty("suffix").getValue() or ""

    def lookup(self, coordinates):
        key = list(coordinates.values())[0]
        value = self.lookupTable.get(key)
        return Optional.ofNullable(None if value is None else value + self.suffix)

    def getRequiredKeys(self):
        return set(['key'])

lookupService = PythonLookupService()
'''


def test_scripted_lookup_service():
    service = enable_service(ScriptedLookupService, {"Script Engine": "python", "Script Body": LOOKUP, "suffix": "!"})
    assert service.required_keys() == {"key"}
    assert service.lookup({"key": "Hello"}) == "Hi!" and service.lookup({"key": "World"}) == "there!"
    assert service.lookup({"key": "Nope"}) is None


def test_scripted_lookup_service_without_lookup_service_refuses_to_enable():
    with pytest.raises(Exception, match="assigns no 'lookupService'"):
        enable_service(ScriptedLookupService, {"Script Body": "x = 1\n"})


def test_scripted_lookup_service_serves_lookup_record():
    from flowactors.processors.records.lookup_record import LookupRecord
    from flowactors.services import JsonRecordSetWriter, JsonTreeReader

    runner = ProcessorRunner(LookupRecord, {
        "Record Reader": "reader", "Record Writer": "writer", "Lookup Service": "lookup",
        "Routing Strategy": "Route to 'matched' or 'unmatched'", "key": "/word", "Result RecordPath": "/answer"},
        services={"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {}),
                  "lookup": (ScriptedLookupService, {"Script Body": LOOKUP, "suffix": "?"})})
    runner.enqueue(b'[{"word": "Hello"}]')
    runner.enqueue(b'[{"word": "Bye"}]')
    runner.run(2)
    assert [runner.read(f) for f in runner.output("matched")] == [b'[{"word":"Hello","answer":"Hi?"}]']
    assert len(runner.output("unmatched")) == 1


def test_a_scripted_lookup_that_raises_sends_the_flowfile_to_failure_with_one_line():
    """Bad input for ScriptedLookupService: the script's lookup raises; LookupRecord keeps the
    FlowFile (to failure, unchanged) and says what failed and at which line of the script."""
    from flowactors.processors.records.lookup_record import LookupRecord
    from flowactors.services import JsonRecordSetWriter, JsonTreeReader

    failing = body("""
        class Failing(object):
            def lookup(self, coordinates):
                raise KeyError('table gone')

        lookupService = Failing()
    """)
    runner = ProcessorRunner(LookupRecord, {
        "Record Reader": "reader", "Record Writer": "writer", "Lookup Service": "lookup", "key": "/word",
        "Result RecordPath": "/answer"},
        services={"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {}),
                  "lookup": (ScriptedLookupService, {"Script Body": failing})})
    runner.enqueue(b'[{"word": "Hello"}]')
    runner.run()
    [failed] = runner.output("failure")
    assert runner.read(failed) == b'[{"word": "Hello"}]'
    reason = failed.attributes["flowactors.failure.reason"]
    assert "the script failed at line 3 of <Script Body>: KeyError: 'table gone'" in reason and "\n" not in reason
