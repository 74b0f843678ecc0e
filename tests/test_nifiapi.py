"""The pure-Python ``nifiapi`` package on its own: NiFi's names, NiFi's conversions, no JVM, no Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nifiapi import properties as p
from nifiapi._host import Host, HostStateManager, HostStateMap
from nifiapi.__jvm__ import ArrayList, JvmHolder, NoJvmError
from nifiapi.componentstate import Scope, StateException, StateManager
from nifiapi.documentation import ProcessorConfiguration, multi_processor_use_case, use_case
from nifiapi.flowfilesource import FlowFileSourceResult
from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.logging import Logger, LogLevel
from nifiapi.recordtransform import CachingAttributeMap, RecordTransform, RecordTransformResult

V = p.StandardValidators
ROOT = Path(__file__).resolve().parent.parent


def test_importing_nifiapi_needs_neither_a_jvm_nor_ray_nor_flowactors():
    code = ("import sys, nifiapi.properties, nifiapi.flowfiletransform, nifiapi.flowfilesource, "
            "nifiapi.recordtransform, nifiapi.componentstate, nifiapi.logging, nifiapi.documentation, "
            "nifiapi.relationship, nifiapi.__jvm__\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('ray', 'flowactors', 'py4j')]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("validator, good, bad", [
    (V.NON_EMPTY_VALIDATOR, ["x", " "], [""]),
    (V.INTEGER_VALIDATOR, ["-5", "+7", "2147483647"], ["2147483648", "1.0", "x", ""]),
    (V.POSITIVE_INTEGER_VALIDATOR, ["1"], ["0", "-1"]),
    (V.NON_NEGATIVE_INTEGER_VALIDATOR, ["0", "9"], ["-1"]),
    (V.POSITIVE_LONG_VALIDATOR, ["9223372036854775807"], ["9223372036854775808", "0"]),
    (V.LONG_VALIDATOR, ["-9223372036854775808"], ["1e3"]),
    (V.NUMBER_VALIDATOR, ["3.5", "-2", "12abc"], ["abc"]),
    (V.PORT_VALIDATOR, ["0", "65535"], ["65536", "-1"]),
    (V.BOOLEAN_VALIDATOR, ["true", "FALSE"], ["yes", "1"]),
    (V.HOSTNAME_PORT_LIST_VALIDATOR, ["a:1", "a:1, b.example:65535"], ["a", "a:0", "http://a:80", "a:x"]),
    (V.URL_VALIDATOR, ["http://a.b/c", "file:///tmp/x"], ["a.b/c", "mailto:x@y"]),
    (V.URI_VALIDATOR, ["urn:x", "http://a/b%20c"], ["a b", "http://a/%zz"]),
    (V.REGULAR_EXPRESSION_VALIDATOR, [r"a+\d"], ["a("]),
    (V.TIME_PERIOD_VALIDATOR, ["30 sec", "1.5 hours", "2 WEEKS", "5ms"], ["30", "3 fortnights", "sec"]),
    (V.DATA_SIZE_VALIDATOR, ["10 MB", "1.5kb", "3 B"], ["10", "10 PB", "MB"]),
])
def test_standard_validators_accept_and_refuse_what_the_java_ones_do(validator, good, bad):
    assert [v for v in good if validator.problem(v)] == []
    assert [v for v in bad if not validator.problem(v)] == []


def test_validators_that_defer_to_evaluation_pass_a_value_holding_an_expression():
    assert V.INTEGER_VALIDATOR.problem("${n}", expression_applies=True) is None
    assert V.INTEGER_VALIDATOR.problem("${n}") is not None  # the property does not evaluate it
    assert V.NON_EMPTY_VALIDATOR.problem("", expression_applies=True) is not None  # NiFi's: no shortcut
    assert V.REGULAR_EXPRESSION_VALIDATOR.problem("(${x}", expression_applies=True) is not None
    result = V.INTEGER_VALIDATOR.validate("Count", "x")
    assert (result.subject, result.valid, result.input) == ("Count", False, "x") and result.explanation


def value(text):
    return p.PythonPropertyValue(None, text, False, False, None)


def test_property_value_conversions_follow_nifi():
    assert value("5").asInteger() == 5 and value(None).asInteger() is None
    with pytest.raises(ValueError):
        value("5.0").asInteger()  # Python's int(), as NiFi's
    assert [value(v).asBoolean() for v in ("TRUE", "true", "yes", None)] == [True, True, False, None]
    assert value("2.5").asFloat() == 2.5 and value("7").asLong() == 7
    assert value("30 sec").asTimePeriod(p.TimeUnit.MILLISECONDS) == 30000
    assert value("1.5 hours").asTimePeriod(p.TimeUnit.MINUTES) == 90
    assert value("2 weeks").asTimePeriod(p.TimeUnit.DAYS) == 14
    assert value("500 ms").asTimePeriod(p.TimeUnit.SECONDS) == 1  # Java's Math.round: half up
    assert value("499 ms").asTimePeriod(p.TimeUnit.SECONDS) == 0
    assert value("2 mins").asDuration().total_seconds() == 120
    assert value("1.5 KB").asDataSize(p.DataUnit.B) == 1536.0
    assert value("1 GB").asDataSize(p.DataUnit.MB) == 1024.0
    assert value(None).asTimePeriod(p.TimeUnit.SECONDS) is None and value(None).asDataSize(p.DataUnit.B) is None
    class Services(Host):
        def getControllerService(self, reference):
            return f"the service {reference}"

    assert p.PythonPropertyValue(Services(), "keys", False, False, None).asControllerService() == "the service keys"
    assert value("").asControllerService() is None and value(None).asControllerService() is None


def test_descriptor_keeps_nifis_names_and_defaults():
    mode = p.PropertyDescriptor("Mode", "how", default_value=4, allowable_values=["a", "b"])
    assert (mode.name, mode.displayName, mode.defaultValue, mode.validators) == ("Mode", None, "4", [V.ALWAYS_VALID])
    assert mode.expressionLanguageScope == p.ExpressionLanguageScope.NONE and mode.allowableValues == ["a", "b"]
    dependency = p.PropertyDependency(mode, "a", "b")
    assert dependency.property_descriptor is mode and dependency.dependent_values == ("a", "b")
    assert mode != p.PropertyDescriptor("Mode", "how")  # identity, as NiFi's
    assert p.ResourceDefinition(allow_url=True, allow_text=True).resource_types() == [
        p.ResourceType.FILE, p.ResourceType.URL, p.ResourceType.TEXT]


class FakeHost(Host):
    """A host with no expression language: ``${x}`` evaluates to ``<x:attributes>``."""

    def __init__(self, descriptors, values, state=None):
        self.descriptors, self.values, self.state, self.yielded = descriptors, values, state, 0

    def getName(self):
        return "fake"

    def getPropertyDescriptors(self):
        return self.descriptors

    def getConfiguredValues(self):
        return self.values

    def isExpressionLanguagePresent(self, value):
        return "${" in value

    def evaluateExpressions(self, value, attributeMap, flowfileScope):
        attributes = attributeMap.getAttributes() if hasattr(attributeMap, "getAttributes") else attributeMap
        return f"<{value}:{sorted((attributes or {}).items()) if flowfileScope else 'env'}>"

    def yieldResources(self):
        self.yielded += 1

    def getStateManager(self):
        return self.state


def test_context_leaves_out_properties_whose_dependencies_are_not_met():
    mode = p.PropertyDescriptor("Mode", "", default_value="text")
    upper = p.PropertyDescriptor("Upper", "", dependencies=[p.PropertyDependency(mode, "text")], default_value="x")
    field = p.PropertyDescriptor("Field", "", dependencies=[p.PropertyDependency(mode, "json")])
    nested = p.PropertyDescriptor("Nested", "", dependencies=[p.PropertyDependency(upper)], default_value="n")
    anything = p.PropertyDescriptor("Anything", "", dependencies=[p.PropertyDependency(field)], default_value="y")
    a = p.PropertyDescriptor("A", "", default_value="1")
    b = p.PropertyDescriptor("B", "", default_value="1", dependencies=[p.PropertyDependency(a)])
    a.dependencies = [p.PropertyDependency(b)]  # a cycle is never satisfied
    context = p.ProcessContext(FakeHost([mode, upper, field, nested, anything, a, b], {"Field": "f"}))
    assert context.getName() == "fake"
    assert context.getProperty("Upper").getValue() == "x" and context.getProperty(nested).getValue() == "n"
    assert context.getProperty("Field") is None and context.getProperty(anything) is None
    assert context.getProperty("A") is None and context.getProperty("Nope") is None
    assert {d.name: v for d, v in context.getProperties().items()} == {"Mode": "text", "Upper": "x", "Nested": "n"}
    switched = p.ValidationContext(FakeHost([mode, upper, field], {"Mode": "json", "Field": "f"}))
    assert switched.getProperty(upper) is None and switched.getProperty(field).getValue() == "f"


def test_evaluation_depends_on_the_scope():
    scopes = p.ExpressionLanguageScope
    descriptors = [p.PropertyDescriptor("F", "", expression_language_scope=scopes.FLOWFILE_ATTRIBUTES),
                   p.PropertyDescriptor("E", "", expression_language_scope=scopes.ENVIRONMENT),
                   p.PropertyDescriptor("N", "")]
    host = FakeHost(descriptors, {"F": "${a}.txt", "E": "${HOME}", "N": "${a}"})
    context = p.ProcessContext(host)
    attributes = CachingAttributeMap(type("M", (), {"getAttributes": lambda self: {"a": "1"}})())
    assert context.getProperty("F").evaluateAttributeExpressions(attributes).getValue() == "<${a}.txt:[('a', '1')]>"
    assert context.getProperty("E").evaluateAttributeExpressions({"a": "1"}).getValue() == "<${HOME}:env>"
    literal = context.getProperty("N")
    assert literal.evaluateAttributeExpressions({"a": "1"}) is literal and literal.getValue() == "${a}"
    assert context.newPropertyValue("${b}").evaluateAttributeExpressions(None).getValue() == "<${b}:[]>"
    context.yield_resources()
    assert host.yielded == 1


class MemoryState(HostStateManager):
    def __init__(self):
        self.maps = {}

    def getState(self, scope):
        version, values = self.maps.get(scope, (None, {}))
        return MemoryMap(version, values)

    def setState(self, state, scope):
        if any(not isinstance(v, str) for v in state.values()):
            raise TypeError("values must be strings")
        version = self.maps.get(scope, (None, {}))[0]
        self.maps[scope] = (str(int(version or 0) + 1), dict(state))

    def replace(self, oldValue, newValue, scope):
        if self.maps.get(scope, (None, {}))[0] != oldValue.version:
            return False
        self.setState(newValue, scope)
        return True

    def clear(self, scope):
        self.setState({}, scope)


class MemoryMap(HostStateMap):
    def __init__(self, version, values):
        self.version, self.values = version, values

    def getStateVersion(self):
        return self.version

    def get(self, key):
        return self.values.get(key)

    def toMap(self):
        return dict(self.values)


def test_state_manager_wraps_the_host_and_turns_its_errors_into_state_exceptions():
    manager = StateManager(MemoryState())
    empty = manager.getState(Scope.LOCAL)
    assert empty.getStateVersion() is None and empty.toMap() == {}
    manager.setState({"k": "v"}, Scope.LOCAL)
    read = manager.getState(Scope.LOCAL)
    assert (read.getStateVersion(), read.get("k"), read.get("x")) == ("1", "v", None)
    assert manager.replace(read, {"k": "w"}, Scope.LOCAL) is True
    assert manager.replace(read, {"k": "z"}, Scope.LOCAL) is False  # read is stale now
    manager.clear(Scope.LOCAL)
    assert manager.getState(Scope.LOCAL).toMap() == {}
    with pytest.raises(StateException) as raised:
        manager.setState({"k": 1}, Scope.LOCAL)
    # NiFi's message exactly (its python-test-extensions' TestStateManagerException checks it), the reason chained
    assert str(raised.value) == "Set state failed" and "values must be strings" in str(raised.value.__cause__)


def test_results_encode_text_as_utf8_and_keep_bytes():
    assert FlowFileTransformResult("success", contents="é").getContents() == "é".encode()
    assert FlowFileTransformResult("success", contents=b"\xff").getContents() == b"\xff"
    assert FlowFileSourceResult("success", {"a": "1"}).getAttributes() == {"a": "1"}
    assert FlowFileSourceResult("success").getContents() is None
    result = RecordTransformResult({"a": 1})
    assert (result.getRelationship(), result.getPartition(), result.getSchema()) == ("success", None, None)


def test_record_transform_runs_over_a_json_array_as_nifi_hands_it():
    class Upper(RecordTransform):
        def transform(self, context, record, schema, attributemap):
            return RecordTransformResult({k: str(v).upper() + attributemap.getAttribute("x") for k, v in record.items()},
                                         partition={"p": 1})

    processor = Upper()
    processor.setContext(FakeHost([], {}))
    looked_up = []
    attributes = type("A", (), {"getAttribute": lambda self, n: looked_up.append(n) or "!",
                                "getAttributes": lambda self: {"x": "!"}})()
    results = processor.transformRecord('[{"a": "b"}, {"a": "c"}]', None, attributes)
    assert [r.getRecordJson() for r in results] == ['{"a": "B!"}', '{"a": "C!"}']
    assert looked_up == ["x"]  # cached for the batch
    assert results[0].getPartition() == {"p": 1}


def test_no_jvm_stand_ins_explain_themselves():
    assert ArrayList((1, 2)) == [1, 2]
    with pytest.raises(NoJvmError, match="jvm.java.util.ArrayList is a Java object"):
        JvmHolder.jvm.java.util.ArrayList()

    class Bare(FlowFileTransform):  # never calls super().__init__(): still usable
        def __init__(self, jvm):
            self.jvm = jvm

        def transform(self, context, flowFile):
            return FlowFileTransformResult("success")

    bare = Bare(JvmHolder.jvm)
    bare.setContext(FakeHost([], {}))
    assert bare.transformFlowFile(None).getRelationship() == "success"


def test_documentation_decorators_change_nothing_and_logger_filters_levels():
    class Processor:
        pass

    assert use_case("d", configuration="c")(Processor) is Processor
    configuration = ProcessorConfiguration("Other", "set X")
    assert multi_processor_use_case("d", [configuration])(Processor) is Processor
    assert (configuration.getProcessorType(), configuration.getConfiguration()) == ("Other", "set X")
    seen = []
    sink = type("Sink", (), {m: (lambda m: lambda self, msg, *a: seen.append((m, msg)))(m)
                             for m in ("trace", "debug", "info", "warn", "error")})()
    logger = Logger(LogLevel.INFO, sink)
    logger.debug("hidden")
    logger.info("shown")
    logger.error("too")
    assert seen == [("info", "shown"), ("error", "too")]
