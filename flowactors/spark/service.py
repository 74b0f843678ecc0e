"""The Spark service: one Spark session per flow, owned by one Ray actor the Spark processors share.

RayDP keeps one Spark driver per process, and every processor task is a process of its own, so
the session lives in a dedicated actor, ``SparkServiceActor``, named ``<flow>.spark``. It is a flow
service (``flowactors.sdk.flow_service``, ``SPARK_SERVICE``): the engine creates it at flow start
when a processor of the flow uses it and stops Spark and the actor at flow stop; Spark itself starts on the
first job or at flow start, as ``flow.settings["spark"]["start"]`` says (``SparkSettings``).

Data crosses as Arrow through Ray's object store, never as rows of Python objects: a processor
``ray.put``s the Arrow table of a bin's records; the service reads it without a copy, hands it to
the JVM as an Arrow stream, runs the job, collects the result as Arrow record batches and returns
it as an Arrow table (the return value goes through the object store). A job that fails (bad SQL,
a user function that raises, a Spark task that fails) comes back as ``JobResult.error``: the
processor routes its inputs to failure. Failing to start Spark (no Java, the wrong Java, RayDP
not coming up) raises ``SparkStartError`` naming the cause; it is remembered, not retried.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Mapping

import pyarrow as pa
import ray

from flowactors.sdk.flow_service import FlowServiceError

#: Java major versions Spark 3.5 through RayDP is known to work with here (see docs/spark.md).
SUPPORTED_JAVA = (17,)
#: Java 17 closes these packages; Spark and the Ray Java workers RayDP starts need them open.
ADD_OPENS = (
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.lang.ref", "java.io", "java.net", "java.nio",
    "java.nio.charset", "java.math", "java.text", "java.time", "java.security", "java.util",
    "java.util.concurrent", "java.util.concurrent.atomic", "java.util.regex", "jdk.internal.misc", "sun.nio.ch",
    "sun.nio.cs", "sun.nio.fs", "sun.security.action", "sun.util.calendar",
)
JAVA_OPTIONS_KEYS = ("spark.executor.extraJavaOptions", "spark.driver.extraJavaOptions",
                     "spark.ray.raydp_app_master.extraJavaOptions")
FIRST_USE, FLOW_START = "first-use", "flow-start"
#: RayDP names its master actor after the Spark application with this suffix
RAYDP_MASTER_SUFFIX = "_SPARK_MASTER"
SERVICE_SUFFIX = "spark"


class SparkError(RuntimeError):
    """Spark could not be used; the message says why."""


class SparkStartError(SparkError):
    """Spark did not start: no Java, the wrong Java, or RayDP failed. Nothing was lost."""


class SparkServiceError(SparkError):
    """The Spark service actor is missing or died."""


class SparkSettingsError(ValueError):
    """``flow.settings["spark"]`` has an unknown key or a value of the wrong kind."""


@dataclass(frozen=True)
class SparkSettings:
    """The flow's Spark settings, from ``flow.settings["spark"]`` (docs/spark.md lists them)."""

    #: Spark executors RayDP starts as Ray actors, each with ``executor_cores`` CPUs of the cluster
    executors: int = 1
    executor_cores: int = 1
    executor_memory: str = "1G"
    #: "first-use": Spark starts with the first job (a flow that never needs it never pays);
    #: "flow-start": at flow start, so the first bin does not wait ~20 s and a broken Java stops the start
    start: str = FIRST_USE
    #: extra Spark configs, e.g. {"spark.sql.shuffle.partitions": "8"}; extraJavaOptions are
    #: appended to the --add-opens flags Java 17 needs
    configs: dict[str, str] = field(default_factory=dict)
    #: seconds to wait for the first executor to register before giving up with SparkStartError
    start_timeout: float = 180.0
    #: Spark's application name (default: the service's actor name)
    app_name: str = ""

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> "SparkSettings":
        values = dict(values or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise SparkSettingsError(f"unknown Spark settings {unknown}; known: {sorted(known)}")
        converted: dict[str, Any] = {}
        for name, value in values.items():
            default = known[name].default
            expected = dict if default is MISSING else type(default)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or isinstance(value, bool):
                raise SparkSettingsError(f"Spark setting '{name}' must be {expected.__name__}, not {value!r}")
            converted[name] = value
        settings = cls(**converted)
        problems = settings.problems()
        if problems:
            raise SparkSettingsError("; ".join(problems))
        return settings

    def problems(self) -> list[str]:
        problems = []
        if self.executors < 1 or self.executor_cores < 1:
            problems.append("Spark settings 'executors' and 'executor_cores' must be 1 or more")
        if not re.fullmatch(r"\d+[kKmMgGtT]?[bB]?", self.executor_memory.strip()):
            problems.append(f"Spark setting 'executor_memory' is {self.executor_memory!r}; write e.g. '512M' or '2G'")
        if self.start not in (FIRST_USE, FLOW_START):
            problems.append(f"Spark setting 'start' is {self.start!r}; use '{FIRST_USE}' or '{FLOW_START}'")
        bad = [k for k, v in self.configs.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            problems.append(f"Spark 'configs' keys and values must be strings (not: {bad})")
        return problems

    def spark_configs(self) -> dict[str, str]:
        """The configs RayDP starts Spark with: the Java 17 flags, Arrow, UTC, then the user's."""
        flags = " ".join(f"--add-opens=java.base/{module}=ALL-UNNAMED" for module in ADD_OPENS)
        cores = self.executors * self.executor_cores
        configs = {
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
            "spark.ui.enabled": "false",
            **{k: v for k, v in self.configs.items() if k not in JAVA_OPTIONS_KEYS},
        }
        for key in JAVA_OPTIONS_KEYS:
            configs[key] = f"{flags} {self.configs.get(key, '')}".strip()
        return configs


# ---------------------------------------------------------------------------------- Java
def _java_major(version_output: str) -> tuple[int, str] | None:
    """(major version, the line it came from) from ``java -version`` output; 1.8 is 8."""
    for line in version_output.splitlines():
        match = re.search(r'version "(\d+)(?:\.(\d+))?', line)
        if match:
            major = int(match.group(1))
            if major == 1 and match.group(2):
                major = int(match.group(2))
            return major, line.strip()
    return None


def check_java(env: Mapping[str, str] | None = None) -> str:
    """Check the Java that Spark and RayDP will run; returns its version line.

    RayDP runs ``java`` from PATH; Spark's launcher prefers ``$JAVA_HOME/bin/java``. Both must be
    a supported version. Raises SparkStartError naming what is missing or wrong, and what to do.
    """
    env = os.environ if env is None else env
    install = ("install Java 17 (e.g. `apt-get install openjdk-17-jre-headless`) and put it on PATH "
               "or set JAVA_HOME to it")
    candidates: list[tuple[str, str]] = []
    java_home = env.get("JAVA_HOME")
    if java_home:
        home_java = os.path.join(java_home, "bin", "java")
        if not os.access(home_java, os.X_OK):
            raise SparkStartError(f"Spark cannot start: JAVA_HOME is {java_home!r} but {home_java} does not exist "
                                  f"or cannot be run; fix JAVA_HOME or {install}")
        candidates.append(("JAVA_HOME", home_java))
    path_java = shutil.which("java", path=env.get("PATH", ""))
    if path_java is None:
        raise SparkStartError(f"Spark cannot start: Java was not found (no `java` on PATH "
                              f"{env.get('PATH', '')!r}); Spark through RayDP needs Java 17: {install}")
    candidates.append(("PATH", path_java))
    found = ""
    for where, java in candidates:
        try:
            done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60,
                                  env=dict(env))
        except (OSError, subprocess.TimeoutExpired) as err:
            raise SparkStartError(f"Spark cannot start: running `{java} -version` failed: {err}") from None
        parsed = _java_major(done.stderr + done.stdout)
        if parsed is None:
            raise SparkStartError(f"Spark cannot start: `{java} -version` did not print a Java version "
                                  f"(exit code {done.returncode}: {(done.stderr or done.stdout).strip()[:200]!r})")
        major, line = parsed
        if major not in SUPPORTED_JAVA:
            wanted = " or ".join(str(v) for v in SUPPORTED_JAVA)
            raise SparkStartError(f"Spark cannot start: Java {major} found at {java} (from {where}: {line}); "
                                  f"Spark 3.5 through RayDP here needs Java {wanted}: {install}")
        found = found or f"{line} ({java})"
    return found


# ---------------------------------------------------------------------------------- jobs
@dataclass
class JobResult:
    """What a job gives back: the result as one Arrow table, or the error that stopped it."""

    table: pa.Table | None
    error: str | None = None
    input_rows: int = 0
    seconds: float = 0.0


class SqlJob:
    """A Spark SQL query over the input registered as a temporary view."""

    def __init__(self, query: str):
        self.query = query

    def __call__(self, spark, frame):
        return spark.sql(self.query)


class FunctionJob:
    """A user's function DataFrame -> DataFrame applied to the input."""

    def __init__(self, function: Callable):
        self.function = function

    def __call__(self, spark, frame):
        return self.function(frame)


def describe_error(err: BaseException) -> str:
    """One readable line or two for a failed job: the error type and Spark's own message."""
    while isinstance(err, ray.exceptions.RayTaskError) and err.cause is not None:
        err = err.cause  # the error raised in the remote process, not Ray's wrapper around it
    java = getattr(err, "java_exception", None)
    if java is not None:  # Py4JJavaError: the Java exception and its root cause, no stack trace
        try:
            text = str(java.toString())
            root = java
            while root.getCause() is not None and root.getCause() != root:
                root = root.getCause()
            if root != java:
                text = f"{text.splitlines()[0]} caused by {root.toString()}"
        except Exception:
            text = str(err)
    else:
        text = str(err)
    name = type(err).__name__
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # terminal colours
    lines = [line for line in text.strip().splitlines() if line.strip()]
    summary = " ".join(lines[:3]) if lines else name
    summary = re.sub(r"\s+", " ", summary)
    if len(summary) > 1000:
        summary = summary[:997] + "..."
    return summary if summary.startswith(name) else f"{name}: {summary}"


_SPARK_SAFE_INTS = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}


def spark_compatible(table: pa.Table) -> pa.Table:
    """The table with types Spark's Arrow reader takes: string (not large_string), microsecond
    timestamps, signed integers, decoded dictionaries, string for all-null columns."""
    columns, changed = [], False
    for column_field, column in zip(table.schema, table.columns):
        wanted = _spark_type(column_field.type)
        if wanted != column_field.type:
            column = column.cast(wanted) if not pa.types.is_null(column_field.type) else pa.nulls(len(column), wanted)
            changed = True
        columns.append(column)
    if not changed:
        return table
    return pa.Table.from_arrays(columns, names=table.column_names)


def _spark_type(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(data_type):
        return _spark_type(data_type.value_type)
    if pa.types.is_large_string(data_type) or pa.types.is_null(data_type):
        return pa.string()
    if pa.types.is_large_binary(data_type):
        return pa.binary()
    if pa.types.is_timestamp(data_type) and data_type.unit != "us":
        return pa.timestamp("us", tz=data_type.tz)
    if pa.types.is_date64(data_type):
        return pa.date32()
    if pa.types.is_float16(data_type):
        return pa.float32()
    return _SPARK_SAFE_INTS.get(data_type, data_type)


def arrow_to_spark(spark, table: pa.Table):
    """A Spark DataFrame over an Arrow table, handed to the JVM as an Arrow stream (no pandas,
    no Python rows): what PySpark 3.5's Arrow path for pandas does, minus the pandas step."""
    from pyspark.sql import DataFrame  # PySpark, heavy: imported in the Spark service's process only
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer
    from pyspark.sql.pandas.types import from_arrow_schema

    table = spark_compatible(table)
    schema = from_arrow_schema(table.schema, prefer_timestamp_ntz=True)
    if table.num_rows == 0:
        return spark.createDataFrame([], schema)
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    batches = table.to_batches(max_chunksize=max(1, math.ceil(table.num_rows / parallelism)))
    jvm = spark._jvm
    jiter = spark.sparkContext._serialize_to_jvm(
        batches, ArrowStreamSerializer(), jvm.PythonSQLUtils.readArrowStreamFromFile,
        lambda: jvm.ArrowIteratorServer())
    return DataFrame(jvm.PythonSQLUtils.toDataFrame(jiter, schema.json(), spark._jsparkSession), spark)


def spark_to_arrow(frame) -> pa.Table:
    """The DataFrame's records as one Arrow table, collected as Arrow record batches."""
    from pyspark.sql.pandas.types import to_arrow_schema  # PySpark: the Spark service's process only

    batches = frame._collect_as_arrow()
    schema = batches[0].schema if batches else to_arrow_schema(frame.schema)
    return pa.Table.from_batches(batches, schema=schema)


# ---------------------------------------------------------------------------------- the actor
@ray.remote(num_cpus=0, max_concurrency=8)
class SparkServiceActor:
    """Owns the flow's Spark session (RayDP's driver lives in this process) and runs jobs on it."""

    def __init__(self, name: str, settings: SparkSettings):
        self.name = name
        self.settings = settings
        self._spark = None
        self._lock = threading.Lock()
        self._start_error: str | None = None
        self._info: dict[str, Any] = {}
        self._jobs = {"run": 0, "failed": 0, "input_rows": 0, "output_rows": 0, "seconds": 0.0}
        self._jobs_lock = threading.Lock()  # jobs run on several threads at once

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> dict:
        """Start Spark if it is not running (idempotent); raises SparkStartError naming the cause."""
        self._session()
        return self.status()

    def _session(self):
        with self._lock:
            if self._spark is not None:
                return self._spark
            if self._start_error is not None:
                raise SparkStartError(self._start_error)
            try:
                self._spark = self._start()
            except SparkStartError as err:
                self._start_error = str(err)
                raise
            return self._spark

    def _start(self):
        s = self.settings
        began = time.monotonic()
        java = check_java()
        needed = s.executors * s.executor_cores
        total = ray.cluster_resources().get("CPU", 0)
        if needed > total:
            raise SparkStartError(f"Spark cannot start: {s.executors} executor(s) x {s.executor_cores} core(s) need "
                                  f"{needed} CPUs but the Ray cluster has {total:g}; lower the 'executors' or "
                                  f"'executor_cores' Spark settings")
        # executors run Python (UDFs, RayDP's conversions) with this interpreter, not the system's
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        import raydp  # RayDP, heavy: only when Spark starts

        try:
            spark = raydp.init_spark(s.app_name or self.name, s.executors, s.executor_cores, s.executor_memory,
                                     configs=s.spark_configs())
        except Exception as err:
            self._stop_quietly()
            raise SparkStartError(f"Spark did not start through RayDP ({java}): {describe_error(err)}") from None

        deadline = time.monotonic() + s.start_timeout
        while len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) <= 1:  # the driver counts
            if time.monotonic() > deadline:
                self._stop_quietly()
                raise SparkStartError(
                    f"Spark started but no executor registered within {s.start_timeout:g} s; the Ray cluster "
                    f"has {ray.available_resources().get('CPU', 0):g} CPU(s) free and the executors need "
                    f"{s.executor_cores} each")
            time.sleep(0.2)
        self._info = {"java": java, "spark_version": spark.version, "start_seconds": round(time.monotonic() - began, 2)}
        return spark

    def _stop_quietly(self) -> None:
        """Undo a failed start: RayDP's stop, and its master actor, which RayDP leaves behind when
        the start failed before its cluster object existed."""
        try:
            import raydp  # RayDP, heavy: only when Spark starts

            raydp.stop_spark()
        except Exception:
            pass
        try:
            ray.kill(ray.get_actor(f"{self.settings.app_name or self.name}{RAYDP_MASTER_SUFFIX}"))
        except Exception:
            pass

    def stop(self) -> None:
        """Stop Spark (executors, RayDP's master, the driver JVM); the actor can then be killed."""
        with self._lock:
            if self._spark is not None:
                import raydp  # RayDP, heavy: only when Spark starts

                self._spark = None
                raydp.stop_spark()

    def status(self) -> dict:
        with self._jobs_lock:
            jobs = dict(self._jobs)
        return {"name": self.name, "started": self._spark is not None, "start_error": self._start_error,
                "jobs": jobs, **self._info}

    # ------------------------------------------------------------------ jobs
    def run_job(self, inputs: list, view: str, job: Callable) -> JobResult:
        """Run ``job(spark, frame)`` over the Arrow tables behind ``inputs`` (object refs), with
        the records registered as temporary view ``view``; the result comes back as Arrow.

        Each job has a session of its own (``newSession``), so views of concurrent jobs never mix.
        """
        spark = self._session()
        began = time.monotonic()
        input_rows = 0
        try:
            tables = ray.get(list(inputs))
            table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
            input_rows = table.num_rows
            session = spark.newSession()
            frame = arrow_to_spark(session, table)
            frame.createOrReplaceTempView(view)
            result = job(session, frame)
            if not hasattr(result, "_jdf"):
                raise TypeError(f"the job returned {type(result).__name__}, not a Spark DataFrame")
            output = spark_to_arrow(result)
        except Exception as err:
            with self._jobs_lock:
                self._jobs["failed"] += 1
            return JobResult(None, describe_error(err), input_rows, time.monotonic() - began)
        seconds = time.monotonic() - began
        with self._jobs_lock:
            jobs = self._jobs
            jobs["run"] += 1
            jobs["input_rows"] += input_rows
            jobs["output_rows"] += output.num_rows
            jobs["seconds"] += seconds
        return JobResult(output, None, input_rows, seconds)

    def call(self, function: Callable, *args: Any) -> Any:
        """``function(spark, *args)`` on the running session: for benchmarks and checks, not flows."""
        return function(self._session(), *args)


# ---------------------------------------------------------------------------------- flows
def service_name(flow_name: str) -> str:
    return f"{flow_name}.{SERVICE_SUFFIX}"


class FlowSparkService:
    """The flow's own Spark service as the engine starts and stops it (``FlowService``): an actor
    named ``<flow>.spark`` (``service_name``) on the Ray engine, for the Spark processors whose
    ``Spark Service`` property is not set (set, it names a service someone else owns)."""

    name = SERVICE_SUFFIX

    def needed_by(self, flow) -> list[str]:
        return [name for name, node in flow.processors.items()
                if SPARK_SERVICE in node.type.flow_services and not node.properties.get("Spark Service")]

    def engine_problem(self, flow, engine: str) -> str | None:
        """Spark is reached through Ray: the in-process engine runs no Spark processor at all; the
        stateless engine runs those that name a running service, not the flow's own."""
        if engine == "ray":
            return None
        processors = (self.needed_by(flow) if engine == "stateless" else
                      [name for name, node in flow.processors.items() if SPARK_SERVICE in node.type.flow_services])
        if not processors:
            return None
        return (f"{', '.join(processors)} run(s) on Spark, which flowactors reaches through Ray (RayDP): the "
                f"flow's own Spark service starts on the Ray engine only; name a running service in their "
                f"'Spark Service' property, or run this flow with engine='ray' (the default)")

    def start(self, flow, settings, name: str):
        """With ``start: flow-start`` Spark starts now and a failure stops the flow's start."""
        try:
            spark_settings = SparkSettings.from_dict(getattr(settings, "spark", None) or {})
        except SparkSettingsError as err:
            raise FlowServiceError(str(err)) from None
        actor = SparkServiceActor.options(name=name).remote(name, spark_settings)
        if spark_settings.start == FLOW_START:
            try:
                ray.get(actor.start.remote())
            except BaseException as err:
                ray.kill(actor)
                cause = getattr(err, "cause", None)
                if isinstance(cause, SparkStartError):
                    raise FlowServiceError(str(cause)) from None
                raise
        return actor

    def stop(self, started) -> None:
        stop_service(started)


def stop_service(actor) -> None:
    """Stop Spark cleanly (before the actor goes), then the actor."""
    try:
        ray.get(actor.stop.remote(), timeout=120)
    except Exception:
        pass  # already dead: its Spark died with it
    ray.kill(actor)


#: the service every Spark processor names in ``flow_services``
SPARK_SERVICE = FlowSparkService()


def find_service(name: str):
    """The running Spark service actor named ``name``; SparkServiceError if there is none."""
    try:
        return ray.get_actor(name)
    except ValueError:
        raise SparkServiceError(
            f"no Spark service named '{name}' is running: a flow run by flowactors starts its own "
            f"('<flow>.spark') when a Spark processor leaves 'Spark Service' unset; otherwise start one with "
            f"flowactors.spark.start_service('{name}') and name it in 'Spark Service'") from None


def start_service(name: str, settings: Mapping[str, Any] | SparkSettings | None = None, *, start: bool = True):
    """A Spark service owned by the caller (tests, benchmarks, several flows): stop it with
    ``stop_service``. With ``start``, Spark starts now (SparkStartError if it cannot)."""
    spark_settings = settings if isinstance(settings, SparkSettings) else SparkSettings.from_dict(settings)
    actor = SparkServiceActor.options(name=name).remote(name, spark_settings)
    if start:
        try:
            ray.get(actor.start.remote())
        except BaseException as err:
            stop_service(actor)
            cause = getattr(err, "cause", None)
            raise (cause if isinstance(cause, SparkStartError) else err) from None
    return actor
