"""Spark processors: a bin of FlowFiles' records goes through Spark and comes back as FlowFiles.

``ExecuteSparkSQL`` runs a Spark SQL query over the records; ``TransformWithSpark`` applies a
user's PySpark function DataFrame -> DataFrame. Both bin FlowFiles across triggers as MergeContent
does (count, size, max age, correlation attribute), so one Spark job serves many small FlowFiles.

A bin goes like this: each FlowFile's records are read into Arrow through the Record Reader
service; one that cannot be read goes to failure alone. The rest are combined into one Arrow
table, put in Ray's object store and run on the flow's Spark service
(``flowactors.spark.service``). The result is written through the Record Writer service as
FlowFiles of at most Max Records Per FlowFile records and about Max FlowFile Size bytes each; they
go to success, the inputs to original, all in one commit.

Provenance links the inputs to the outputs through the Spark job: a JOIN event makes a job
FlowFile from the inputs (its uuid is the outputs' ``spark.job.id``), and a FORK event makes the
outputs from it. The job FlowFile is never queued; it exists in provenance only, as the step
where the records went through Spark.

A job that fails (bad SQL, a function that raises, a Spark task that fails), and a result the
writer cannot write, send every input of the bin to failure with the reason in ``spark.error``;
nothing is emitted for it. When Spark is not there at all (it did not start, the service died),
the trigger rolls back: the bin's FlowFiles return to the queue, unchanged, and the error shows
in the processor's status.

Definitions saved when these processors took record formats (Input Format, Output Format,
Schema, CSV Delimiter, CSV Header) are refused by validation with the services to add instead
(``flowactors.sdk.record_formats``; docs/spark.md).
"""

from __future__ import annotations

import importlib
import logging
import math
from typing import BinaryIO, Callable, Mapping, Sequence

import pyarrow as pa
import ray

from flowactors.sdk import FlowFile
from flowactors.sdk import record_formats as formats
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.binning import Bin, BinPacker, bin_limit_problems
from flowactors.sdk.relationships import reason as one_line
from flowactors.sdk.records import (RecordError, RecordReaderFactory, RecordSetWriter, RecordSetWriterFactory,
                                    WriteResult)
from flowactors.sdk.records.spooling import written_attributes
from flowactors.spark.service import (SPARK_SERVICE, FunctionJob, JobResult, SparkError, SparkServiceError, SqlJob,
                                      find_service, service_name)

log = logging.getLogger(__name__)

SUCCESS = Relationship("success", "The results of the Spark jobs")
ORIGINAL = Relationship("original", "The FlowFiles whose records went into a successful Spark job")
FAILURE = Relationship("failure", "FlowFiles whose records could not be read, or whose Spark job failed "
                                  "(the reason is in 'spark.error')")
ERROR_ATTRIBUTE = "spark.error"
SERVICE_PROPERTY = "Spark Service"


def _function_problem(value: str) -> str | None:
    module, _, name = value.strip().rpartition(":") if ":" in value else value.strip().rpartition(".")
    if not module or not name or not name.isidentifier():
        return f"{value!r} is not 'package.module:function'"
    return None


RECORD_READER = PropertyDescriptor("Record Reader", "The controller service that reads each FlowFile's records",
                                   required=True, service=RecordReaderFactory)
RECORD_WRITER = PropertyDescriptor("Record Writer", "The controller service that writes the results", required=True,
                                   service=RecordSetWriterFactory)
#: the properties that chose record formats before readers and writers were services
FORMER_READ = ("Input Format", "Schema", "CSV Delimiter", "CSV Header")
FORMER_WRITE = ("Output Format",)
#: the formats those properties defaulted to
FORMER_DEFAULTS = {"Input Format": formats.CSV, "Output Format": formats.PARQUET}
#: records written first when splitting by size, to measure what a record costs as the writer writes it
PROBE_RECORDS = 64
#: a file name extension for the standard writers' MIME types
EXTENSIONS = {"text/csv": "csv", "application/json": "json", "application/parquet": "parquet",
              "application/avro-binary": "avro", "application/xml": "xml", "text/plain": "txt"}


class SparkRecordProcessor(Processor):
    """What Spark processors share: binning, reading records, running the job, writing results.

    Subclasses say what the job is (``spark_job``) and how provenance describes it (``describe``).
    """

    #: the flow controller starts the flow's Spark service for processors that say so
    flow_services = (SPARK_SERVICE,)
    trigger_when_empty = True  # old bins are flushed even when nothing arrives
    relationships = (SUCCESS, ORIGINAL, FAILURE)
    common_properties = (
        PropertyDescriptor(SERVICE_PROPERTY, "The Ray actor name of a Spark service someone else owns; unset, the "
                           "flow's own service ('<flow>.spark', configured by the flow's 'spark' settings) is used"),
        RECORD_READER,
        PropertyDescriptor("Attribute Columns", "Comma-separated attribute names; each becomes a string column "
                           "holding the FlowFile's value (e.g. filename), so a job can tell records apart by origin"),
        PropertyDescriptor("Table Name", "The temporary view the records are registered as", required=True,
                           default="flowfiles", validator=validators.NON_EMPTY),
        RECORD_WRITER,
        PropertyDescriptor("Max Records Per FlowFile", "At most this many result records per FlowFile",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Max FlowFile Size", "A result FlowFile is closed once it holds about this much "
                           "(a larger result becomes several FlowFiles)", required=True, default="64 MB",
                           validator=validators.DATA_SIZE),
        PropertyDescriptor("Include Zero Record FlowFiles", "Whether a job with no result records still emits "
                           "one (empty) FlowFile", required=True, default="true", allowable_values=("true", "false")),
        PropertyDescriptor("Correlation Attribute Name", "Only FlowFiles with the same value of this attribute "
                           "share a Spark job"),
        PropertyDescriptor("Minimum Number of Entries", "The fewest FlowFiles a job runs over (unless the bin is "
                           "older than Max Bin Age)", required=True, default="1", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Maximum Number of Entries", "The most FlowFiles in one job", required=True,
                           default="1000", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Minimum Group Size", "The smallest total content a job runs over (unless the bin is "
                           "older than Max Bin Age)", required=True, default="0 B", validator=validators.DATA_SIZE),
        PropertyDescriptor("Maximum Group Size", "The largest total content of one job's FlowFiles",
                           validator=validators.DATA_SIZE),
        PropertyDescriptor("Max Bin Age", "A bin this old runs whatever it holds, e.g. '30 sec'",
                           validator=validators.DURATION),
        PropertyDescriptor("Maximum number of Bins", "The most bins open at once; the oldest runs to make room",
                           required=True, default="5", validator=validators.POSITIVE_INTEGER),
    )

    def __init__(self) -> None:
        self._packer = BinPacker()
        self._service = None

    # ------------------------------------------------------------------ what subclasses say
    def spark_job(self, context: ProcessContext) -> Callable:
        """The job: a callable ``job(spark_session, frame) -> DataFrame`` run in the service."""
        raise NotImplementedError

    def describe(self, context: ProcessContext) -> str:
        return type(self).__name__

    # ------------------------------------------------------------------ configuration
    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return bin_limit_problems(values)

    @classmethod
    def validate_properties(cls, values: Mapping[str, str]) -> list[str]:
        """The problems of ``values``; a definition that still chooses record formats (the former
        properties, or their defaults with no Record Reader or Record Writer) is told which
        controller services to add and name instead (``former_format_problems``)."""
        current = {k: v for k, v in values.items() if k not in FORMER_READ + FORMER_WRITE}
        former = former_format_problems(values)
        replaced = {f"property '{p.name}' is required" for p in (RECORD_READER, RECORD_WRITER) if p.name not in values}
        return [p for p in super().validate_properties(current) if p not in replaced] + former

    def on_scheduled(self, context: ProcessContext) -> None:
        p = context.property
        self._attribute_columns = [a.strip() for a in (p("Attribute Columns").evaluate() or "").split(",") if a.strip()]
        self._view = p("Table Name").evaluate().strip()
        self._max_records = p("Max Records Per FlowFile").as_int()
        self._max_bytes = p("Max FlowFile Size").as_data_size()
        self._zero_records = p("Include Zero Record FlowFiles").as_bool()
        self._service_name = p(SERVICE_PROPERTY).evaluate() or None
        self._packer.configure(context)
        self._job = self.spark_job(context)

    def on_stopped(self, context: ProcessContext) -> None:
        """Give every binned FlowFile back to its queue, unchanged."""
        self._packer.release()

    def on_trigger(self, context: ProcessContext, session) -> None:
        # a rollback (Spark not there) returns the ready bins' FlowFiles to the queue
        for bin, reason in self._packer.take_ready(session):
            self._run_bin(context, session, bin, reason)

    # ------------------------------------------------------------------ one bin, one job
    def _run_bin(self, context: ProcessContext, session, bin: Bin, reason: str) -> None:
        reader = context.service(RECORD_READER.name, RecordReaderFactory)
        tables, inputs = [], []
        for flowfile in bin.flowfiles:
            try:
                with session.read(flowfile) as stream:
                    table = reader.create_reader(flowfile.attributes, stream, flowfile.size).read_all()
            except RecordError as err:
                self._fail(session, [flowfile], one_line(err))
                continue
            if self._attribute_columns:
                table = add_attribute_columns(
                    table, {name: flowfile.attributes.get(name) for name in self._attribute_columns})
            tables.append(table)
            inputs.append(flowfile)
        if not inputs:
            return
        try:
            table = combine(tables)
        except RecordError as err:
            self._fail(session, inputs, str(err))
            return
        result = self._submit(session, table)
        if result.error is not None:
            log.warning("%s: Spark job over %d FlowFiles failed: %s", context.name, len(inputs), result.error)
            self._fail(session, inputs, result.error)
            return
        self._emit_results(context, session, inputs, result, reason)

    def _submit(self, session, table) -> JobResult:
        """Run the job on the Spark service; SparkError (the trigger rolls back) if Spark is not there."""
        name = self._service_name or service_name(_flow_name(session))
        if self._service is None:
            self._service = find_service(name)
        ref = ray.put(table)  # the bin's records, as Arrow, into the object store
        try:
            return ray.get(self._service.run_job.remote([ref], self._view, self._job))
        except ray.exceptions.RayTaskError as err:
            cause = err.cause
            if isinstance(cause, SparkError):
                raise type(cause)(str(cause)) from None
            raise SparkServiceError(f"the Spark service '{name}' failed: {cause!r}") from None
        except ray.exceptions.RayActorError as err:
            self._service = None  # look it up again next time
            raise SparkServiceError(f"the Spark service '{name}' is gone: {err}") from None
        finally:
            del ref

    def _emit_results(self, context: ProcessContext, session, inputs: list[FlowFile], result: JobResult,
                      reason: str) -> None:
        """The result, written through the Record Writer, to success and the inputs to original;
        a result the writer cannot write sends the inputs to failure instead, with nothing emitted."""
        job = session.create(parents=inputs)  # the Spark job, in provenance only
        job = session.put_all_attributes(job, {"spark.job.id": job.uuid, "spark.bin.reason": reason})
        try:
            outputs = self._write_outputs(context, session, job, result)
        except RecordError as err:
            session.remove(job)
            log.warning("%s: the result of a Spark job over %d FlowFiles could not be written: %s", context.name,
                        len(inputs), err)
            self._fail(session, inputs, f"the result could not be written: {one_line(err)}")
            return
        details = self.describe(context)
        session.provenance.join(inputs, job, details=details)
        if outputs:
            outputs = [session.put_all_attributes(output, {
                "spark.input.count": str(len(inputs)), "spark.input.records": str(result.input_rows),
                "spark.job.seconds": f"{result.seconds:.3f}", "fragment.identifier": job.uuid,
                "fragment.index": str(index), "fragment.count": str(len(outputs))})
                for index, output in enumerate(outputs)]
            session.provenance.fork(job, outputs, details=details)
        session.remove(job)
        for output in outputs:
            session.transfer(output, SUCCESS)
        for flowfile in inputs:
            session.transfer(flowfile, ORIGINAL)

    def _write_outputs(self, context: ProcessContext, session, job: FlowFile, result: JobResult) -> list[FlowFile]:
        """The result as FlowFiles (children of ``job``) of at most Max Records Per FlowFile
        records and about Max FlowFile Size bytes, with the writer's attributes, ``record.count``
        and ``filename``; none for an empty result unless Include Zero Record FlowFiles. Raises
        RecordError (what was made removed) when the writer cannot write it."""
        table = result.table
        if not table.num_rows and not self._zero_records:
            return []
        factory = context.service(RECORD_WRITER.name, RecordSetWriterFactory)
        schema = factory.write_schema(job.attributes, table.schema)
        extension = EXTENSIONS.get(factory.mime_type())
        results, outputs = ResultCursor(table), []
        written: list[WriteResult] = []
        try:
            while True:
                output = session.create(parent=job)
                outputs.append(output)
                outputs[-1] = session.write(output, lambda out, output=output: written.append(write_part(
                    out, results, factory.create_writer(schema, out, output.attributes),
                    max_records=self._max_records, max_bytes=self._max_bytes)))
                if not results.remaining:
                    break
        except RecordError:
            for output in outputs:
                session.remove(output)
            raise
        return [session.put_all_attributes(output, {
            "filename": ".".join([job.uuid, *([str(index)] if len(outputs) > 1 else []),
                                  *([extension] if extension else [])]),
            **written_attributes(factory, write)})
            for index, (output, write) in enumerate(zip(outputs, written))]

    def _fail(self, session, flowfiles: list[FlowFile], error: str) -> None:
        for flowfile in flowfiles:
            flowfile = session.put_attribute(flowfile, ERROR_ATTRIBUTE, error)
            session.transfer(flowfile, FAILURE)


def former_format_problems(values: Mapping[str, str]) -> list[str]:
    """What a definition that chooses record formats must do instead: for the reading side and the
    writing side each, when its service property is unset (the former properties set or left at
    their defaults), the service to add and name; when it is set, the former properties to drop."""
    problems = []
    for descriptor, former, service in ((RECORD_READER, FORMER_READ, _former_reader),
                                        (RECORD_WRITER, FORMER_WRITE, _former_writer)):
        given = [name for name in former if name in values]
        if descriptor.name in values:
            problems.extend(f"property '{name}' is gone: records are read and written by the controller services "
                            f"'{RECORD_READER.name}' and '{RECORD_WRITER.name}' name; remove it" for name in given)
            continue
        reads = descriptor is RECORD_READER
        replaced = (f"{_listed(given)}, which {'is' if len(given) == 1 else 'are'} gone (remove "
                    f"{'it' if len(given) == 1 else 'them'})" if given else
                    f"'{former[0]}' ({FORMER_DEFAULTS[former[0]]} by default), which is gone")
        try:
            todo = f"To {'read' if reads else 'write'} as before, " + formats.add_service_text(service(values),
                                                                                         descriptor.name)
        except ValueError as err:
            todo = (f"The definition cannot be carried over as it is: {err}; add a "
                    f"{'reader' if reads else 'writer'} service that fits and name it in '{descriptor.name}'")
        problems.append(f"property '{descriptor.name}' is required: the controller service that "
                        f"{'reads the records' if reads else 'writes the results'}, in place of {replaced}. {todo} "
                        f"(docs/spark.md, \"Definitions from before services\")")
    return problems


def _former_reader(values: Mapping[str, str]) -> formats.ServiceDefinition:
    return formats.reader_service(values.get("Input Format", FORMER_DEFAULTS["Input Format"]),
                                  delimiter=values.get("CSV Delimiter", ","),
                                  header=values.get("CSV Header", "true") == "true", schema=values.get("Schema"))


def _former_writer(values: Mapping[str, str]) -> formats.ServiceDefinition:
    return formats.writer_service(values.get("Output Format", FORMER_DEFAULTS["Output Format"]))


def _listed(names: Sequence[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


# ---------------------------------------------------------------------------------- records
def add_attribute_columns(table: pa.Table, values: dict[str, str | None]) -> pa.Table:
    """The table with one string column per attribute, every row holding the attribute's value."""
    for name, value in values.items():
        column = pa.repeat(pa.scalar(value, pa.string()), table.num_rows)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, column)
        else:
            table = table.append_column(name, column)
    return table


def combine(tables: Sequence[pa.Table]) -> pa.Table:
    """One table of every table's records; columns are matched by name and types widened when
    needed (RecordError when they cannot be: a number in one, text in another)."""
    tables = [t for t in tables if t.num_columns] or list(tables[:1])
    try:
        return pa.concat_tables(tables, promote_options="permissive").combine_chunks()
    except pa.ArrowException as err:
        raise RecordError(f"the records do not share a schema: {one_line(err)}") from None


class ResultCursor:
    """A job's result still to be written, and what writing it has cost so far (bytes per record)."""

    def __init__(self, table: pa.Table):
        self.table = table
        self.offset = 0
        self.bytes_written = 0
        self.records_written = 0
        self._estimate = max(1.0, table.nbytes / table.num_rows) if table.num_rows else 1.0

    @property
    def remaining(self) -> int:
        return self.table.num_rows - self.offset

    @property
    def bytes_per_record(self) -> float:
        if self.records_written:
            return max(1.0, self.bytes_written / self.records_written)
        return self._estimate

    def take(self, count: int) -> pa.Table:
        part = self.table.slice(self.offset, count)
        self.offset += part.num_rows
        return part

    def learn(self, size: int, records: int) -> None:
        """``records`` records took ``size`` bytes as written."""
        self.bytes_written += size
        self.records_written += records


def write_part(out: BinaryIO, cursor: ResultCursor, writer: RecordSetWriter, *, max_records: int | None = None,
               max_bytes: int | None = None) -> WriteResult:
    """Write the cursor's next records with ``writer`` as one complete content; what it wrote.

    Stops at ``max_records`` records, or once the content reaches ``max_bytes`` - or would by the
    bytes per record seen so far - taking half the room left at a time, so the estimate is
    corrected as the content fills: a writer that writes as it goes (CSV, JSON, XML) ends about
    one record over the size at most; one that holds records back (Parquet's row groups) is
    measured when it finishes, its first content sized by the records' size in memory. At least
    one record is written when any is left (a single larger record gets a content of its own);
    with none left, an empty content (what the writer writes for no records).
    """
    start = out.tell()
    written = held = 0   # held: records written whose bytes the writer has not given out yet
    while cursor.remaining:
        limit = cursor.remaining if max_records is None else min(cursor.remaining, max_records - written)
        if limit <= 0:
            break
        if max_bytes is not None:
            size = out.tell() - start + held * cursor.bytes_per_record
            fits = math.floor((max_bytes - size) / cursor.bytes_per_record)
            if fits < 1:
                if written:
                    break
                fits = 1
            limit = min(limit, max(1, fits // 2))
            if not cursor.records_written and not written:
                limit = min(limit, PROBE_RECORDS)  # learn the real size per record first
        before = out.tell()
        for batch in cursor.take(limit).to_batches():
            writer.write_batch(batch)
        grown = out.tell() - before
        held += limit
        if grown:
            cursor.learn(grown, held)
            held = 0
        written += limit
    end = out.tell()
    result = writer.finish()
    if held:   # what the writer held back came out as it finished
        cursor.learn(out.tell() - end, held)
    return result


def _flow_name(session) -> str:
    """The flow's name, from the session's component id ('<flow>/<processor>')."""
    component = session.component_id
    suffix = "/" + session.context.name
    return component[: -len(suffix)] if component.endswith(suffix) else component.rpartition("/")[0]


class ExecuteSparkSQL(SparkRecordProcessor):
    """Runs a Spark SQL query over the records of a bin of FlowFiles; the result becomes FlowFiles.

    The records are the view named by Table Name (default ``flowfiles``): e.g. ``SELECT region,
    SUM(amount) AS total FROM flowfiles GROUP BY region``. See the module docstring for binning,
    output, provenance and failure.
    """

    description = "Runs Spark SQL over the records of a bin of FlowFiles"
    properties = (
        PropertyDescriptor("SQL Query", "Spark SQL over the view named by Table Name", required=True,
                           validator=validators.NON_EMPTY),
        *SparkRecordProcessor.common_properties,
    )

    def spark_job(self, context: ProcessContext) -> Callable:
        return SqlJob(context.property("SQL Query").evaluate())

    def describe(self, context: ProcessContext) -> str:
        query = " ".join(context.property("SQL Query").evaluate().split())
        return f"Spark SQL: {query[:500]}"


class TransformWithSpark(SparkRecordProcessor):
    """Applies a user's PySpark function DataFrame -> DataFrame to the records of a bin of FlowFiles.

    Either name an importable function in Function (``package.module:function``), or subclass
    and override ``transform(self, frame)``; the subclass is shipped to the Spark service, so the
    function may be defined in a flow script. See the module docstring for the rest.
    """

    description = "Applies a PySpark function DataFrame -> DataFrame to the records of a bin of FlowFiles"
    properties = (
        PropertyDescriptor("Function", "An importable function DataFrame -> DataFrame, 'package.module:function' "
                           "(unset when a subclass overrides transform)", validator=_function_problem),
        *SparkRecordProcessor.common_properties,
    )

    def transform(self, frame):
        """Override in a subclass: the DataFrame of the bin's records -> the result DataFrame."""
        raise NotImplementedError

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = super().custom_validate(values)
        overridden = type(self).transform is not TransformWithSpark.transform
        if not values.get("Function") and not overridden:
            problems.append("set 'Function' to 'package.module:function', or subclass TransformWithSpark and "
                            "override transform(self, frame)")
        if values.get("Function") and overridden:
            problems.append("'Function' is set but the class overrides transform; use one or the other")
        return problems

    def spark_job(self, context: ProcessContext) -> Callable:
        spec = context.property("Function").evaluate()
        if spec:
            return FunctionJob(load_function(spec))
        return FunctionJob(_SubclassTransform(type(self)))

    def describe(self, context: ProcessContext) -> str:
        spec = context.property("Function").evaluate()
        return f"Spark function {spec or type(self).__qualname__ + '.transform'}"


class _SubclassTransform:
    """Calls ``transform`` on a fresh instance of the processor's class: no task state travels."""

    def __init__(self, cls: type):
        self.cls = cls

    def __call__(self, frame):
        return self.cls.__new__(self.cls).transform(frame)


def load_function(spec: str) -> Callable:
    """The function ``package.module:function`` (or ``package.module.function``) names."""
    module_name, _, name = spec.rpartition(":") if ":" in spec else spec.rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot load the function '{spec}': {err}") from None
    if not callable(function):
        raise ValueError(f"'{spec}' is not a function")
    return function
