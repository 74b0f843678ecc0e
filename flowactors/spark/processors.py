"""Spark processors: a bin of FlowFiles' records goes through Spark and comes back as FlowFiles.

``ExecuteSparkSQL`` runs a Spark SQL query over the records; ``TransformWithSpark`` applies a
user's PySpark function DataFrame -> DataFrame. Both bin FlowFiles across triggers as MergeContent
does (count, size, max age, correlation attribute), so one Spark job serves many small FlowFiles.

A bin goes like this: each FlowFile's content is read into Arrow (CSV, JSON lines or Parquet,
schema inferred or given); one that does not parse goes to failure alone. The rest are combined
into one Arrow table, put in Ray's object store and run on the flow's Spark service
(``flowactors.spark.service``). The result is written as FlowFiles of at most Max Records Per
FlowFile records and about Max FlowFile Size bytes each, in the Output Format; they go to
success, the inputs to original, all in one commit.

Provenance links the inputs to the outputs through the Spark job: a JOIN event makes a job
FlowFile from the inputs (its uuid is the outputs' ``spark.job.id``), and a FORK event makes the
outputs from it. The job FlowFile is never queued; it exists in provenance only, as the step
where the records went through Spark.

A job that fails (bad SQL, a function that raises, a Spark task that fails) sends every input of
the bin to failure with the reason in ``spark.error``; nothing is emitted for it. When Spark is
not there at all (it did not start, the service died), the trigger rolls back: the bin's
FlowFiles return to the queue, unchanged, and the error shows in the processor's status.
"""

from __future__ import annotations

import importlib
import logging
from typing import Callable, Mapping

import ray

from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.binning import Bin, BinPacker, bin_limit_problems
from flowactors.sdk import record_formats as records
from flowactors.sdk.record_formats import ReadOptions, RecordCursor, RecordFormatError
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


def _character(value: str) -> str | None:
    return None if len(value) == 1 else "must be a single character"


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
        PropertyDescriptor("Input Format", "The format of the incoming FlowFiles' records", required=True,
                           default=records.CSV, allowable_values=records.FORMATS),
        PropertyDescriptor("Schema", "The records' columns in Spark DDL, e.g. 'id BIGINT, name STRING, amount "
                           "DOUBLE'; unset, the schema is inferred from each FlowFile (CSV, JSON lines) or read "
                           "from it (Parquet)", validator=records.schema_problem),
        PropertyDescriptor("CSV Delimiter", "The character between CSV fields", required=True, default=",",
                           validator=_character),
        PropertyDescriptor("CSV Header", "Whether the first CSV line names the columns (if not, give a Schema or "
                           "columns are named f0, f1, ...)", required=True, default="true",
                           allowable_values=("true", "false")),
        PropertyDescriptor("Attribute Columns", "Comma-separated attribute names; each becomes a string column "
                           "holding the FlowFile's value (e.g. filename), so a job can tell records apart by origin"),
        PropertyDescriptor("Table Name", "The temporary view the records are registered as", required=True,
                           default="flowfiles", validator=validators.NON_EMPTY),
        PropertyDescriptor("Output Format", "The format results are written in", required=True,
                           default=records.PARQUET, allowable_values=records.FORMATS),
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

    def on_scheduled(self, context: ProcessContext) -> None:
        p = context.property
        schema = p("Schema").evaluate()
        self._read = ReadOptions(format=p("Input Format").evaluate(),
                                 schema=records.parse_schema(schema) if schema else None,
                                 delimiter=p("CSV Delimiter").evaluate(), header=p("CSV Header").as_bool())
        self._attribute_columns = [a.strip() for a in (p("Attribute Columns").evaluate() or "").split(",") if a.strip()]
        self._view = p("Table Name").evaluate().strip()
        self._output = p("Output Format").evaluate()
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
        tables, inputs = [], []
        for flowfile in bin.flowfiles:
            try:
                with session.read(flowfile) as stream:
                    table = records.read_table(stream, self._read)
            except RecordFormatError as err:
                self._fail(session, [flowfile], str(err))
                continue
            if self._attribute_columns:
                table = records.add_attribute_columns(
                    table, {name: flowfile.attributes.get(name) for name in self._attribute_columns})
            tables.append(table)
            inputs.append(flowfile)
        if not inputs:
            return
        try:
            table = records.combine(tables)
        except RecordFormatError as err:
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
        table = result.table
        details = self.describe(context)
        job = session.create(parents=inputs)  # the Spark job, in provenance only
        job = session.put_all_attributes(job, {"spark.job.id": job.uuid, "spark.bin.reason": reason})
        session.provenance.join(inputs, job, details=details)
        outputs: list[FlowFile] = []
        if table.num_rows or self._zero_records:
            cursor = RecordCursor(table)
            counts: list[int] = []
            while True:
                output = session.create(parent=job)
                output = session.write(output, lambda out: counts.append(
                    records.write_part(out, cursor, self._output, max_records=self._max_records,
                                       max_bytes=self._max_bytes)))
                outputs.append(output)
                if not cursor.remaining:
                    break
            extension = records.EXTENSIONS[self._output]
            for index, (output, count) in enumerate(zip(list(outputs), counts)):
                outputs[index] = session.put_all_attributes(output, {
                    "filename": f"{job.uuid}.{index}.{extension}" if len(outputs) > 1 else f"{job.uuid}.{extension}",
                    "mime.type": records.MIME_TYPES[self._output], "record.count": str(count),
                    "spark.input.count": str(len(inputs)), "spark.input.records": str(result.input_rows),
                    "spark.job.seconds": f"{result.seconds:.3f}",
                    "fragment.identifier": job.uuid, "fragment.index": str(index),
                    "fragment.count": str(len(outputs))})
            session.provenance.fork(job, outputs, details=details)
        session.remove(job)
        for output in outputs:
            session.transfer(output, SUCCESS)
        for flowfile in inputs:
            session.transfer(flowfile, ORIGINAL)

    def _fail(self, session, flowfiles: list[FlowFile], error: str) -> None:
        for flowfile in flowfiles:
            flowfile = session.put_attribute(flowfile, ERROR_ATTRIBUTE, error)
            session.transfer(flowfile, FAILURE)


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
