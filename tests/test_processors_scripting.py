"""ExecuteScript, InvokeScriptedProcessor and ScriptedLookupService on Python scripts: NiFi's
TestExecuteJython / TestInvokeJython cases with NiFi's own Jython test scripts (run unmodified),
and scripts shaped as published flows write them."""

from __future__ import annotations

import sys
import textwrap

import pytest

from flowactors.processors.scripting import ExecuteScript, InvokeScriptedProcessor
from flowactors.sdk.script_api.loader import compiled, python2_rewritten
from flowactors.processors.scripting import ScriptError
from flowactors.testing import ProcessorRunner


def body(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def execute(script: str, content: bytes = b"test content", attributes=None, engine: str = "in-process",
            **properties) -> ProcessorRunner:
    runner = ProcessorRunner(ExecuteScript, {"Script Engine": "python", "Script Body": body(script), **properties},
                             engine=engine)
    runner.enqueue(content, attributes or {})
    runner.run(raise_errors=False)
    return runner


# ---------------------------------------------------------------------------------- ExecuteScript
@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_nifi_script_body_puts_an_attribute(engine):
    runner = execute("""
        from org.apache.nifi.processors.script import ExecuteScript
        flowFile = session.get()
        flowFile = session.putAttribute(flowFile, "from-content", "test content")
        session.transfer(flowFile, ExecuteScript.REL_SUCCESS)
    """, engine=engine)
    [flowfile] = runner.output("success")
    assert flowfile.attributes["from-content"] == "test content" and runner.errors == []


PUBLISHED_JSON_SCRIPT = """
    import json
    import java.io
    from org.apache.commons.io import IOUtils
    from java.nio.charset import StandardCharsets
    from org.apache.nifi.processor.io import StreamCallback

    class PyStreamCallback(StreamCallback):
        def __init__(self):
            pass

        def process(self, inputStream, outputStream):
            text = IOUtils.toString(inputStream, StandardCharsets.UTF_8)
            obj = json.loads(text)
            obj['greeting'] = greeting.evaluateAttributeExpressions(flowFile).getValue()
            outputStream.write(bytearray(json.dumps(obj, sort_keys=True).encode('utf-8')))

    flowFile = session.get()
    if (flowFile != None):
        flowFile = session.write(flowFile, PyStreamCallback())
        flowFile = session.putAttribute(flowFile, "filename", flowFile.getAttribute('filename').split('.')[0] + '_t.json')
        session.transfer(flowFile, REL_SUCCESS)
"""


def test_published_stream_callback_script_with_dynamic_property():
    runner = execute(PUBLISHED_JSON_SCRIPT, b'{"name": "caf\xc3\xa9"}', {"filename": "in.json", "who": "bob"},
                     greeting="hello ${who}")
    [flowfile] = runner.output("success")
    assert runner.read(flowfile) == '{"greeting": "hello bob", "name": "caf\\u00e9"}'.encode()
    assert flowfile.attributes["filename"] == "in_t.json"


def test_read_callback_output_callback_create_remove_and_attributes():
    runner = execute("""
        from org.apache.nifi.processor.io import InputStreamCallback, OutputStreamCallback
        from org.apache.commons.io import IOUtils
        from java.nio.charset import StandardCharsets

        class Reader(InputStreamCallback):
            def process(self, inputStream):
                self.text = IOUtils.toString(inputStream, StandardCharsets.UTF_8)

        class Writer(OutputStreamCallback):
            def __init__(self, data):
                self.data = data
            def process(self, outputStream):
                outputStream.write(bytearray(self.data.encode('utf-8')))

        flowFile = session.get()
        reader = Reader()
        session.read(flowFile, reader)
        for index, word in enumerate(reader.text.split()):
            child = session.create(flowFile)
            child = session.write(child, Writer(word.upper()))
            child = session.putAllAttributes(child, {'index': str(index), 'parent.size': str(flowFile.getSize())})
            child = session.removeAttribute(child, 'doomed')
            session.transfer(child, REL_SUCCESS)
        log.info("split {} into {} words", flowFile.getAttribute('filename'), index + 1)
        session.remove(flowFile)
    """, b"alpha beta", {"filename": "words.txt", "doomed": "x"})
    children = runner.output("success")
    assert [runner.read(f) for f in children] == [b"ALPHA", b"BETA"]
    assert [f.attributes["index"] for f in children] == ["0", "1"]
    assert all(f.attributes["parent.size"] == "10" and "doomed" not in f.attributes for f in children)
    assert runner.errors == [] and runner.input_count == 0


def test_java_streams_buffers_readers_and_batches():
    runner = ProcessorRunner(ExecuteScript, {"Script Body": body("""
        import re
        from jarray import zeros
        from java.io import BufferedReader, InputStreamReader, ByteArrayOutputStream
        from java.nio.charset import Charset
        from org.python.core.util import StringUtil

        for flowFile in session.get(10):
            stream = session.read(flowFile)
            first = BufferedReader(InputStreamReader(stream, Charset.forName('ISO-8859-1'))).readLine()
            stream.close()

            def copy(inputStream, outputStream):
                gathered = ByteArrayOutputStream()
                buf = zeros(3, 'b')
                while True:
                    count = inputStream.read(buf)
                    if count == -1:
                        break
                    gathered.write(buf, 0, count)
                text = StringUtil.fromBytes(gathered.toByteArray())
                outputStream.write(StringUtil.toBytes(text[::-1]))

            flowFile = session.write(flowFile, copy)
            flowFile = session.removeAllAttributes(flowFile, re.compile('tmp[.].*'))
            session.transfer(session.putAttribute(flowFile, 'first', first), REL_SUCCESS)
    """)})
    runner.enqueue(b"caf\xe9\nline two", {"tmp.a": "1", "tmp.b": "2", "keep": "3"})
    runner.enqueue(b"\xff\xfeodd", {})
    runner.run()
    first, second = runner.output("success")
    assert runner.read(first) == b"owt enil\n\xe9fac" and first.attributes["first"] == "caf\xe9"
    assert runner.read(second) == b"ddo\xfe\xff"   # bytes that are not UTF-8 survive the text round trip
    assert "tmp.a" not in first.attributes and "tmp.b" not in first.attributes and first.attributes["keep"] == "3"


def test_property_value_conversions():
    runner = execute("""
        from java.util.concurrent import TimeUnit
        flowFile = session.get()
        values = [period.asTimePeriod(TimeUnit.MILLISECONDS), count.asInteger() + 1, flag.asBoolean(),
                  count.isSet(), context.getProperty('Script Engine').getValue()]
        session.transfer(session.putAttribute(flowFile, 'values', repr(values)), REL_SUCCESS)
    """, period="2 secs", count="41", flag="TRUE")
    assert runner.output("success")[0].attributes["values"] == "[2000, 42, True, True, 'python']"


def test_python2_print_and_except_forms_run():
    runner = execute("""
        flowFile = session.get()
        try:
            int('x')
        except ValueError, e:
            print "caught", e
            flowFile = session.putAttribute(flowFile, 'caught', 'yes')
        session.transfer(flowFile, REL_SUCCESS)
    """)
    [flowfile] = runner.output("success")
    assert flowfile.attributes["caught"] == "yes"


def test_script_that_raises_rolls_back_penalized_with_one_line():
    runner = execute("""
        flowFile = session.get()
        flowFile = session.putAttribute(flowFile, 'touched', 'yes')
        raise ValueError('no good\\nat all')
    """)
    [error] = runner.errors
    assert isinstance(error, ScriptError)
    assert str(error) == "the script failed at line 3 of <Script Body>: ValueError: no good at all"
    [queued] = runner.queues["input"].listing(10)
    assert queued.is_penalized() and "touched" not in queued.attributes
    assert runner.output("success") == runner.output("failure") == []


def test_script_that_routes_nothing_is_an_error_and_loses_nothing():
    runner = execute('flowFile = session.get()\nflowFile = session.putAttribute(flowFile, "a", "b")')
    [error] = runner.errors
    assert "neither transferred nor removed" in str(error)
    [queued] = runner.queues["input"].listing(10)
    assert queued.is_penalized() and "a" not in queued.attributes


@pytest.mark.parametrize("line, named", [
    ("from org.apache.nifi.components.state import Scope", "org.apache.nifi.components.state"),
    ("from org.apache.nifi.processor.io import StreamCallbackX", "org.apache.nifi.processor.io.StreamCallbackX"),
    ("import javax.xml.parsers", "javax.xml"),
])
def test_unoffered_java_class_fails_naming_it(line, named):
    runner = execute(line + "\n")
    [error] = runner.errors
    assert f"ImportError: the Java class or package '{named}' is not offered" in str(error)
    assert "\n" not in str(error) and runner.input_count == 1


def test_shim_modules_exist_only_while_a_script_runs():
    runner = execute("""
        import sys
        from org.apache.commons.io import IOUtils
        flowFile = session.get()
        session.transfer(session.putAttribute(flowFile, 'seen', str('org.apache.commons.io' in sys.modules)), REL_SUCCESS)
    """)
    assert runner.output("success")[0].attributes["seen"] == "True"
    assert "org.apache.commons.io" not in sys.modules and "org" not in sys.modules
    with pytest.raises(ImportError):
        __import__("org.apache.commons.io")


def test_importing_the_processors_leaves_the_import_system_alone():
    """The scripts' finder joins sys.meta_path at the first script's run only: a flow without
    scripts (any process importing flowactors.processors) never has it."""
    import subprocess
    check = ("import sys; import flowactors.processors; from flowactors.sdk.script_api import loader; "
             "print(loader._FINDER in sys.meta_path)")
    found = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "False"
    execute("flowFile = session.get()\nsession.transfer(flowFile, REL_SUCCESS)\n")
    from flowactors.sdk.script_api import loader
    assert loader._FINDER in sys.meta_path


def test_module_directory_and_script_file(tmp_path):
    (tmp_path / "test_external_module.py").write_text(
        "class ExternalModule :\n\n    def __init__(self) :\n        pass\n\n"
        "    def testHelloWorld(self) :\n        return \"helloWorld\"\n")
    script = tmp_path / "script.py"
    script.write_text("from org.apache.nifi.processors.script import ExecuteScript\n"
                      "from test_external_module import ExternalModule\n"
                      "externalModule = ExternalModule()\n"
                      "flowFile = session.get()\n"
                      "flowFile = session.putAttribute(flowFile, \"key\", externalModule.testHelloWorld())\n"
                      "session.transfer(flowFile, ExecuteScript.REL_SUCCESS)\n")
    runner = ProcessorRunner(ExecuteScript, {"Script File": str(script), "Module Directory": str(tmp_path)})
    runner.enqueue(b"a")
    runner.enqueue(b"b")
    runner.run(2)
    assert [f.attributes["key"] for f in runner.output("success")] == ["helloWorld", "helloWorld"]
    assert "test_external_module" not in sys.modules


@pytest.mark.parametrize("values, problem", [
    ({"Script Engine": "Groovy", "Script Body": "x"}, "'Groovy' scripts cannot run in flowactors"),
    ({"Script Body": "x", "Script File": "/tmp/x.py"}, "exactly one of Script File and Script Body"),
    ({}, "exactly one of Script File and Script Body"),
    ({"Script File": "/no/such.py"}, "cannot read Script File /no/such.py"),
    ({"Script Body": "def (:\n"}, "does not compile: line 1"),
])
def test_validation_refuses_with_one_line(values, problem):
    [found] = ExecuteScript.validate_properties(values)
    assert problem in found and "\n" not in found


def test_compiled_once_per_text():
    text = "x = 1\n"
    assert compiled(text, "<Script Body>") is compiled(text, "<Script Body>")
    assert python2_rewritten("    print 'a', b  # note\nprint\n") == "    print('a', b) # note\nprint()\n"


# ---------------------------------------------------------------------------------- InvokeScriptedProcessor
UPDATE_ATTRIBUTE = '''
import sys
import traceback
from org.apache.nifi.processor import Processor
from org.apache.nifi.processor import Relationship
from org.apache.nifi.components import PropertyDescriptor
from org.apache.nifi.processor.util import StandardValidators

class UpdateAttributes(Processor) :
    __rel_success = Relationship.Builder().description("Success").name("success").build()

    def __init__(self) :
        pass

    def initialize(self, context) :
        pass

    def getRelationships(self) :
        return set([self.__rel_success])

    def validate(self, context) :
        pass

    def getPropertyDescriptors(self) :
        descriptor = PropertyDescriptor.Builder().name("for-attributes").addValidator(StandardValidators.NON_EMPTY_VALIDATOR).build()
        return [descriptor]

    def onPropertyModified(self, descriptor, newValue, oldValue) :
        pass

    def onTrigger(self, context, sessionFactory) :
        session = sessionFactory.createSession()
        try :
            # ensure there is work to do
            flowfile = session.get()
            if flowfile is None :
                return

            # extract some attribute values
            fromPropertyValue = context.getProperty("for-attributes").getValue()
            fromAttributeValue = flowfile.getAttribute("for-attributes")

            # set an attribute
            flowfile = session.putAttribute(flowfile, "from-property", fromPropertyValue)
            flowfile = session.putAttribute(flowfile, "from-attribute", fromAttributeValue)

            # transfer
            session.transfer(flowfile, self.__rel_success)
            session.commitAsync()
        except :
            print sys.exc_info()[0]
            print "Exception in TestReader:"
            print '-' * 60
            traceback.print_exc(file=sys.stdout)
            print '-' * 60

            session.rollback(true)
            raise

processor = UpdateAttributes()
'''

ALWAYS_INVALID = '''
from org.apache.nifi.processor import Processor
from org.apache.nifi.components import ValidationResult

class AlwaysInvalid(Processor) :

    def __init__(self) :
        pass

    def initialize(self, context) :
        pass

    def getRelationships(self) :
        pass

    def validate(self, context) :
        error = ValidationResult.Builder().subject("Processor Error").valid(False).explanation("Never valid.").build()
        return [error]

    def getPropertyDescriptors(self) :
        pass

    def onPropertyModified(self, descriptor, newValue, oldValue) :
        pass

    def onTrigger(self, context, sessionFactory) :
        pass

processor = AlwaysInvalid()
'''

# NiFi's test_compress.py and its callbacks package (Jython 2: implicit relative imports, print
# statements, jarray buffers). Its compression itself cannot run on Python 3: it gives bz2 the str
# of Jython's StringUtil.fromBytes, which Jython's bytes-like str allowed
COMPRESS = {
    "test_compress.py": '''
import traceback
from callbacks import Compress, Decompress
from org.apache.nifi.processor import Processor
from org.apache.nifi.processor import Relationship
from org.apache.nifi.components import PropertyDescriptor

class CompressFlowFile(Processor) :
    __rel_success = Relationship.Builder().description("Success").name("success").build()

    def __init__(self) :
        pass

    def initialize(self, context) :
        pass

    def getRelationships(self) :
        return set([self.__rel_success])

    def validate(self, context) :
        pass

    def getPropertyDescriptors(self) :
        descriptor = PropertyDescriptor.Builder().name("mode").allowableValues("compress", "decompress").required(True).build()
        return [descriptor]

    def onPropertyModified(self, descriptor, newValue, oldValue) :
        pass

    def onTrigger(self, context, sessionFactory) :
        session = sessionFactory.createSession()
        try :
            # ensure there is work to do
            flowfile = session.get()
            if flowfile is None :
                return

            if context.getProperty("mode").getValue() == "compress" :
                flowfile = session.write(flowfile, Compress())
            else :
                flowfile = session.write(flowfile, Decompress())

            # transfer
            session.transfer(flowfile, self.__rel_success)
            session.commitAsync()
        except :
            print sys.exc_info()[0]
            print "Exception in TestReader:"
            print '-' * 60
            traceback.print_exc(file=sys.stdout)
            print '-' * 60

            session.rollback(true)
            raise

processor = CompressFlowFile()
''',
    "callbacks/__init__.py": "\nfrom read_first_line import ReadFirstLine\nfrom compress import Compress\n"
                             "from decompress import Decompress\n",
    "callbacks/read_first_line.py": '''
import sys
import traceback
from org.apache.nifi.processor.io import InputStreamCallback
from java.io import BufferedReader, InputStreamReader

class ReadFirstLine(InputStreamCallback) :
    __line = None;

    def __init__(self) :
        pass

    def getLine(self) :
        return self.__line

    def process(self, input) :
        try :
            reader = InputStreamReader(input)
            bufferedReader = BufferedReader(reader)
            self.__line = bufferedReader.readLine()
        except :
            print "Exception in Reader:"
            print '-' * 60
            traceback.print_exc(file=sys.stdout)
            print '-' * 60
            raise
        finally :
            if bufferedReader is not None :
                bufferedReader.close()
            if reader is not None :
                reader.close()
''',
}
for _kind, _make in (("Compress", "BZ2Compressor"), ("Decompress", "BZ2Decompressor")):
    _method = "compress" if _kind == "Compress" else "decompress"
    COMPRESS[f"callbacks/{_kind.lower()}.py"] = f'''
import sys
import traceback
import bz2
from jarray import zeros
from org.python.core.util import StringUtil
from org.apache.nifi.processor.io import StreamCallback

class {_kind}(StreamCallback) :
    __line = None;

    def __init__(self) :
        pass

    def process(self, input, output) :
        try :
            comp = bz2.{_make}()
            buf = zeros(8192, "b")
            while True :
                bytes_read = input.read(buf)
                if(bytes_read == -1) :
                    break
                output.write(comp.{_method}(StringUtil.fromBytes(buf, 0, bytes_read)))
''' + ("            output.write(comp.flush())\n" if _kind == "Compress" else "") + f'''        except :
            print "Exception in {_kind}:"
            print '-' * 60
            traceback.print_exc(file=sys.stdout)
            print '-' * 60
            raise
'''


def write_files(root, files: dict[str, str]):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_invoke_update_attribute_from_property_and_attribute(tmp_path, engine):
    (tmp_path / "test_update_attribute.py").write_text(UPDATE_ATTRIBUTE)
    runner = ProcessorRunner(InvokeScriptedProcessor, {"Script Engine": "python", "Script File":
                                                       str(tmp_path / "test_update_attribute.py"),
                                                       "for-attributes": "value-1"}, engine=engine)
    assert set(runner.queue_ids) == {"input", "success"}
    runner.enqueue(b"", {"for-attributes": "value-2"})
    runner.run()
    [flowfile] = runner.output("success")
    assert flowfile.attributes["from-property"] == "value-1" and flowfile.attributes["from-attribute"] == "value-2"


def test_invoke_always_invalid_and_declared_property_checks(tmp_path):
    (tmp_path / "test_invalid.py").write_text(ALWAYS_INVALID)
    assert InvokeScriptedProcessor.validate_properties({"Script File": str(tmp_path / "test_invalid.py")}) == [
        "Processor Error: Never valid."]
    (tmp_path / "update.py").write_text(UPDATE_ATTRIBUTE)
    assert InvokeScriptedProcessor.validate_properties({"Script File": str(tmp_path / "update.py"),
                                                        "for-attributes": ""}) == [
        "property 'for-attributes': must not be empty"]


def test_invoke_compress_script_declares_its_mode_property(tmp_path):
    write_files(tmp_path, COMPRESS)
    properties = {"Script File": str(tmp_path / "test_compress.py"), "Module Directory": str(tmp_path)}
    assert InvokeScriptedProcessor.validate_properties({**properties, "mode": "compress"}) == []
    [problem] = InvokeScriptedProcessor.validate_properties({**properties, "mode": "squash"})
    assert problem == "property 'mode' is 'squash'; allowed: compress, decompress"
    assert InvokeScriptedProcessor.validate_properties(properties) == ["property 'mode' is required"]


TEST_READER = '''
import sys
import traceback
from callbacks import ReadFirstLine
from org.apache.nifi.processor import Processor
from org.apache.nifi.processor import Relationship

class ReadContentAndStoreAsAttribute(Processor) :
    __rel_success = Relationship.Builder().description("Success").name("success").build()

    def __init__(self) :
        pass

    def initialize(self, context) :
        pass

    def getRelationships(self) :
        return set([self.__rel_success])

    def validate(self, context) :
        pass

    def getPropertyDescriptors(self) :
        pass

    def onPropertyModified(self, descriptor, newValue, oldValue) :
        pass

    def onTrigger(self, context, sessionFactory) :
        session = sessionFactory.createSession()
        try :
            # ensure there is work to do
            flowfile = session.get()
            if flowfile is None :
                return

            reader = ReadFirstLine()
            session.read(flowfile, reader);

            # set an attribute
            flowfile = session.putAttribute(flowfile, "from-content", reader.getLine())
            # transfer
            session.transfer(flowfile, self.__rel_success)
            session.commitAsync()
        except :
            print sys.exc_info()[0]
            print "Exception in TestReader:"
            print '-' * 60
            traceback.print_exc(file=sys.stdout)
            print '-' * 60

            session.rollback(True)
            raise

processor = ReadContentAndStoreAsAttribute()
'''


def test_invoke_reader_with_callbacks_package(tmp_path):
    """NiFi's testReadFlowFileContentAndStoreInFlowFileAttribute, its Module Directory by expression."""
    write_files(tmp_path, {**COMPRESS, "test_reader.py": TEST_READER})
    runner = ProcessorRunner(InvokeScriptedProcessor, {
        "Script File": str(tmp_path / "test_reader.py"),
        "Module Directory": str(tmp_path.parent) + "/${literal('" + tmp_path.name.upper() + "'):toLower()}"})
    runner.enqueue(b"test content\r\nsecond line")
    runner.run()
    [flowfile] = runner.output("success")
    assert flowfile.attributes["from-content"] == "test content"


def test_invoke_on_trigger_error_rolls_back(tmp_path):
    script = UPDATE_ATTRIBUTE.replace('fromAttributeValue = flowfile.getAttribute("for-attributes")',
                                      'fromAttributeValue = 1 / 0').replace("rollback(true)", "rollback(True)")
    runner = ProcessorRunner(InvokeScriptedProcessor, {"Script Body": script, "for-attributes": "v"})
    runner.enqueue(b"", {"for-attributes": "a"})
    runner.run(raise_errors=False)
    [error] = runner.errors
    assert "ZeroDivisionError" in str(error) and "<Script Body>" in str(error)
    [queued] = runner.queues["input"].listing(10)
    assert queued.is_penalized() and runner.output("success") == []


# ---------------------------------------------------------------------------------- a NiFi flow
def test_a_nifi_flow_of_a_command_and_a_script_runs_in_process(tmp_path):
    """GetFile -> ExecuteStreamCommand (upper case) -> ExecuteScript (a dynamic property into an
    attribute and the content) -> PutFile, as NiFi exports it (every property, internal names)."""
    from flowactors import run_flow
    from flowactors.driver.nifi_export import flow_from_nifi
    from nifi_flows import STANDARD, connection, group, processor, snapshot

    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    (source / "a.txt").write_text("alpha")
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(source), "Keep Source File": "false",
                                                        "Minimum File Age": "0 sec"})
    command = processor(root, "upper", STANDARD + "ExecuteStreamCommand", {
        "Working Directory": None, "Command Path": sys.executable, "argumentsStrategy": "Command Arguments Property",
        "Command Arguments": "-c|import sys; sys.stdout.write(sys.stdin.read().upper())", "Argument Delimiter": "|",
        "Ignore STDIN": "false", "Output Destination Attribute": None, "Max Attribute Length": "256",
        "Output MIME Type": "text/plain"}, auto_terminate=("original", "nonzero status"))
    script = processor(root, "script", "org.apache.nifi.processors.script.ExecuteScript", {
        "Script Engine": "python", "Script File": None, "Module Directory": None, "suffix": "${filename}",
        "Script Body": body("""
            from org.apache.nifi.processor.io import StreamCallback
            from org.apache.commons.io import IOUtils
            from java.nio.charset import StandardCharsets

            class Append(StreamCallback):
                def process(self, inputStream, outputStream):
                    text = IOUtils.toString(inputStream, StandardCharsets.UTF_8)
                    outputStream.write(bytearray((text + '-' + value).encode('utf-8')))

            flowFile = session.get()
            if flowFile is not None:
                value = suffix.evaluateAttributeExpressions(flowFile).getValue()
                flowFile = session.write(flowFile, Append())
                session.transfer(session.putAttribute(flowFile, 'filename', 'done-' + value), REL_SUCCESS)
        """)}, auto_terminate=("failure",))
    put = processor(root, "put", STANDARD + "PutFile", {"Directory": str(out)}, auto_terminate=("success", "failure"))
    links = [connection(root, get, command, ("success",)), connection(root, command, script, ("output stream",)),
             connection(root, script, put, ("success",))]
    definition = snapshot(group(root, "scripts", None, None, processors=[get, command, script, put],
                                connections=links), {})
    final = run_flow(flow_from_nifi(definition), tmp_path / "repository", engine="in-process", timeout=60,
                     until=lambda status: any(p["name"] == "put" and p["flowfiles_in"] >= 1
                                              for p in status["processors"]))
    assert not final.get("timed_out"), final
    assert {p.name: p.read_text() for p in out.iterdir()} == {"done-a.txt": "ALPHA-a.txt"}


def test_invoke_on_scheduled_and_on_stopped_are_called(tmp_path):
    marker = tmp_path / "stopped.txt"
    script = body("""
        from org.apache.nifi.processor import Processor, Relationship

        class Lifecycle(Processor):
            done = Relationship.Builder().name("done").build()

            def getRelationships(self):
                return set([self.done])

            def onScheduled(self, context):
                self.greeting = context.getProperty("greeting").getValue()
                self.triggers = 0

            def onTrigger(self, context, sessionFactory):
                session = sessionFactory.createSession()
                flowFile = session.get()
                if flowFile is None:
                    return
                self.triggers += 1
                session.transfer(session.putAttribute(flowFile, "greeting", self.greeting), self.done)

            def onStopped(self, context):
                open(context.getProperty("marker").getValue(), "w").write(str(self.triggers))

        processor = Lifecycle()
    """)
    runner = ProcessorRunner(InvokeScriptedProcessor, {"Script Body": script, "greeting": "hi", "marker": str(marker)})
    runner.enqueue(b"a")
    runner.enqueue(b"b")
    runner.run(3)
    assert [f.attributes["greeting"] for f in runner.output("done")] == ["hi", "hi"]
    assert marker.read_text() == "2"


def test_execute_script_without_an_incoming_connection_is_a_source(tmp_path):
    """NiFi's INPUT_ALLOWED: no incoming connection, the script runs on its schedule and makes
    FlowFiles; with one (every test above) it runs when FlowFiles wait."""
    from flowactors import Flow, run_flow
    from flowactors.processors import PutFile
    flow = Flow("scripted-source")
    source = flow.add(ExecuteScript, "make", run_schedule="10 min", properties={"Script Body": body("""
        flowFile = session.create()
        flowFile = session.putAttribute(flowFile, "filename", "made.txt")
        session.transfer(flowFile, REL_SUCCESS)
    """)}, auto_terminate=("failure",))
    put = flow.add(PutFile, "put", properties={"Directory": str(tmp_path / "out")}, auto_terminate=("success", "failure"))
    flow.connect(source, put)
    run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60,
             until=lambda status: (tmp_path / "out" / "made.txt").exists())
    assert (tmp_path / "out" / "made.txt").read_bytes() == b""


def test_ioutils_copy_gives_the_count_copied_whatever_the_stream():
    """IOUtils.copy returns the bytes copied, as Java's, into a content stream and into a
    ByteArrayOutputStream (which has no position to measure: it once gave 0)."""
    runner = ProcessorRunner(ExecuteScript, {"Script Body": body("""
        from org.apache.commons.io import IOUtils
        from java.io import ByteArrayInputStream, ByteArrayOutputStream

        flowFile = session.get()
        copied = []
        flowFile = session.write(flowFile, lambda inputStream, outputStream: copied.append(
            IOUtils.copy(inputStream, outputStream)))
        gathered = ByteArrayOutputStream()
        copied.append(IOUtils.copy(ByteArrayInputStream(b'abc'), gathered))
        copied.append(gathered.size())
        session.transfer(session.putAttribute(flowFile, 'copied', repr(copied)), REL_SUCCESS)
    """)})
    runner.enqueue(b"hello world")
    runner.run()
    [flowfile] = runner.output("success")
    assert flowfile.attributes["copied"] == "[11, 3, 3]" and runner.read(flowfile) == b"hello world"
