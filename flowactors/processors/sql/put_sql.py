"""PutSQL: the SQL statement of each FlowFile run against a database (NiFi's PutSQL; docs/sql.md,
"Writing").

**The statement** is SQL Statement evaluated for the FlowFile or, unset, its content (UTF-8). Its
``?`` placeholders (outside literals, quoted names and comments) take the FlowFile's
``sql.args.N.value`` typed by ``sql.args.N.type`` (JDBC's type numbers) and read as
``sql.args.N.format`` says (``jdbc_parameters``), converted to the driver's placeholders.

**Transactions.** A trigger takes up to Batch Size FlowFiles. FlowFiles that share a
``fragment.identifier`` (Support Fragmented Transactions, ``fragment.count`` above 1) are one
transaction, in ``fragment.index`` order, run once all ``fragment.count`` are there: until then
they go back to the queue penalized, and to failure once the newest of them has waited longer than
Transaction Timeout; a group whose fragment attributes do not agree goes to failure whole. Any
other FlowFiles with the same statement text are sent together with ``executemany`` in one
transaction; when that fails, each is run again in a transaction of its own, so that only the
FlowFiles at fault are routed away from success.

**Routing** (NiFi's rule): a database error that may pass when tried again (``is_transient``) or a
database that cannot be reached sends to ``retry`` (penalized), any other to ``failure``, with
``error.message`` (and ``error.sql.state``, ``error.code`` where the driver gives them); a
fragmented transaction goes whole, to retry when any of it would. With Rollback On Failure the
whole trigger is one transaction instead, and an error rolls it and the session back (the
FlowFiles stay queued) and yields.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from flowactors.processors._common import boolean_property
from flowactors.processors._common import route_failure as common_route_failure
from flowactors.processors.sql.jdbc_parameters import for_dialect, jdbc_value, parameter_types
from flowactors.processors.sql.table_schema import (StatementError, driver_sql, is_transient,
                                                    mysql_error_number, placeholder_count, prepared_sql, run_as_written,
                                                    sql_state)
from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.services import DatabaseUnavailableError, DBCPService, database_error_text
from repositories.model import now_millis

log = logging.getLogger(__name__)

SUCCESS = Relationship("success", "FlowFiles whose statement ran")
RETRY = Relationship("retry", "FlowFiles that met a database error that may pass when tried again, penalized")
FAILURE = Relationship("failure", "FlowFiles whose statement cannot run as it is (bad SQL or parameters, a "
                                  "constraint violated), or whose fragmented transaction is incomplete too long")
GENERATED_KEY = "sql.generated.key"
#: the most FlowFiles a trigger takes while it gathers the fragments of a transaction
_GATHER_LIMIT = 10_000


class PutSQL(Processor):
    """Runs each FlowFile's SQL statement with its ``sql.args`` parameters (see the module
    docstring). Writes ``sql.generated.key`` with Obtain Generated Keys. Provenance: SEND to the
    database's URL (without its password)."""

    description = "Runs each FlowFile's SQL statement (UPDATE, INSERT, ...) with parameters from its attributes"
    NIFI_TYPE = "org.apache.nifi.processors.standard.PutSQL"
    properties = (
        PropertyDescriptor("JDBC Connection Pool", "The connection pool to the database", required=True,
                           service=DBCPService),
        PropertyDescriptor("SQL Statement", "The statement to run (unset: the FlowFile's content)",
                           expression_language=True),
        boolean_property("Support Fragmented Transactions", True, "Run FlowFiles of one fragment.identifier as one "
                         "transaction once all fragment.count are there"),
        PropertyDescriptor("Transaction Timeout", "How long an incomplete fragmented transaction waits before it "
                           "goes to failure (unset: for ever)", validator=validators.DURATION),
        PropertyDescriptor("Batch Size", "The most FlowFiles taken in one trigger", required=True, default="100",
                           validator=validators.POSITIVE_INTEGER),
        boolean_property("Obtain Generated Keys", False, "Write the key an INSERT generated in sql.generated.key"),
        boolean_property("Rollback On Failure", False, "On an error roll the session back (the FlowFiles stay "
                         "queued) and yield, instead of routing to failure or retry"),
    )
    relationships = (SUCCESS, RETRY, FAILURE)
    NIFI_PROPERTY_NAMES = {"putsql-sql-statement": "SQL Statement", "rollback-on-failure": "Rollback On Failure"}
    NIFI_FIXED = {"Database Session AutoCommit": "false", "database-session-autocommit": "false"}

    def on_trigger(self, context: ProcessContext, session) -> None:
        batch = session.get_batch(context.property("Batch Size").as_int())
        if not batch:
            return
        units, waiting, broken = _units(context, batch, session)
        if broken and context.property("Rollback On Failure").as_bool():
            log.error("%s: %s; rolling the session back, its FlowFiles stay queued", context.name, broken[0][1])
            session.rollback()
            context.yield_()
            return
        for group, err in broken:
            for flowfile in group:
                _fail(context, session, flowfile, err, FAILURE)
        if waiting:
            until = now_millis() + int(session.penalty_duration * 1000)
            session.give_back([f.uuid for f in waiting], lambda taken, _now: taken._replace(penalized_until=until))
        if not units:
            return
        pool = context.service("JDBC Connection Pool", DBCPService)
        if context.property("Rollback On Failure").as_bool():
            self._all_or_nothing(context, session, pool, units)
            return
        for unit in units:
            outcome, url = _run_unit(context, session, pool, unit)
            failed = [r for _, r in outcome if isinstance(r, Exception)]
            if len(unit) > 1 and failed and not _fragmented(unit) and \
                    not any(isinstance(e, DatabaseUnavailableError) for e in failed):
                outcome = []   # find the FlowFiles at fault: each in a transaction of its own
                for flowfile in unit:
                    alone, url = _run_unit(context, session, pool, [flowfile])
                    outcome += alone
            _route(context, session, outcome, url)

    def _all_or_nothing(self, context: ProcessContext, session, pool: DBCPService, units: list) -> None:
        """Rollback On Failure: the whole trigger is one transaction, rolled back with the session on
        any error."""
        try:
            outcome: list[tuple[FlowFile, Any]] = []
            with pool.connection() as connection, connection.begin():
                url = _url(connection)
                for unit in units:
                    outcome += _execute(context, session, connection, unit)
        except Exception as err:
            _ours(err)
            log.error("%s: %s; rolling the session back, its FlowFiles stay queued", context.name, database_error_text(err))
            session.rollback()
            context.yield_()
            return
        _route(context, session, outcome, url)


def _url(connection: Any) -> str:
    """Where ``connection`` leads, without the password (the SEND events' transit URI)."""
    return connection.engine.url.render_as_string(hide_password=True)


def _fragmented(unit: list[FlowFile]) -> bool:
    return any(f.attributes.get("fragment.identifier") and f.attributes.get("fragment.count") != "1" for f in unit)


def _units(context: ProcessContext, batch: list[FlowFile], session) -> tuple[list, list[FlowFile], list]:
    """The trigger's work: lists of FlowFiles to run (each fragmented transaction in index order,
    and the FlowFiles without one), and the FlowFiles of transactions still incomplete. A group
    that cannot run (its attributes disagree, its timeout passed) comes third, with its error."""
    if not context.property("Support Fragmented Transactions").as_bool():
        return [batch], [], []
    taken = list(batch)
    while True:
        groups: OrderedDict[str, list[FlowFile]] = OrderedDict()
        singles = []
        for flowfile in taken:
            identifier = flowfile.attributes.get("fragment.identifier")
            if identifier is None or flowfile.attributes.get("fragment.count") == "1":
                singles.append(flowfile)
            else:
                groups.setdefault(identifier, []).append(flowfile)
        missing = sum(max(0, _count(g) - len(g)) for g in groups.values())
        if not missing or len(taken) >= _GATHER_LIMIT:
            break
        more = session.get_batch(min(missing, _GATHER_LIMIT - len(taken)))
        if not more:
            break
        taken += more
    timeout = context.property("Transaction Timeout").as_duration()
    units, waiting, broken = ([singles] if singles else []), [], []
    for group in groups.values():
        try:
            ordered = _fragments(group, timeout)
        except StatementError as err:
            broken.append((group, err))
            continue
        if ordered is None:
            waiting += group
        else:
            units.append(ordered)
    return units, waiting, broken


def _count(group: list[FlowFile]) -> int:
    text = group[0].attributes.get("fragment.count") or ""
    return int(text) if text.isdigit() else len(group)


def _fragments(group: list[FlowFile], timeout: float | None) -> list[FlowFile] | None:
    """The group in ``fragment.index`` order when complete, None while it waits;
    ``StatementError`` when its attributes disagree or it waited past ``timeout``."""
    counts = {f.attributes.get("fragment.count") for f in group}
    if len(counts) != 1 or None in counts:
        raise StatementError("the FlowFiles of one fragment.identifier do not all have the same fragment.count")
    count_text = counts.pop()
    if not count_text.isdigit() or int(count_text) < 1:
        raise StatementError(f"fragment.count is '{count_text}', not a positive whole number")
    indexes = []
    for flowfile in group:
        index = flowfile.attributes.get("fragment.index")
        if index is None or not index.isdigit():
            raise StatementError(f"fragment.index is {index!r}, not a whole number")
        indexes.append(int(index))
    if len(set(indexes)) != len(indexes):
        raise StatementError("two FlowFiles of one fragment.identifier have the same fragment.index")
    if len(group) >= int(count_text):
        return [f for _, f in sorted(zip(indexes, group), key=lambda pair: pair[0])]
    newest = max(f.queue_date for f in group)
    if timeout is not None and now_millis() - newest > timeout * 1000:
        raise StatementError(f"the fragmented transaction is incomplete ({len(group)} of {count_text} FlowFiles) "
                             f"after the Transaction Timeout")
    return None


def _run_unit(context: ProcessContext, session, pool: DBCPService,
              unit: list[FlowFile]) -> tuple[list[tuple[FlowFile, Any]], str]:
    """Run ``unit`` in a transaction of its own: each FlowFile with its result (a generated key
    or None) or, when the transaction failed, the error; and the database's URL."""
    url = ""
    try:
        with pool.connection() as connection, connection.begin():
            url = _url(connection)
            return _execute(context, session, connection, unit), url
    except Exception as err:
        _ours(err)
        return [(flowfile, err) for flowfile in unit], url


def _execute(context: ProcessContext, session, connection: Any, unit: list[FlowFile]) -> list[tuple[FlowFile, Any]]:
    """Run ``unit``'s statements on ``connection`` (in its transaction), consecutive equal ones with
    one executemany (unless keys are wanted; a statement without parameters is run as written,
    alone): each FlowFile with its generated key (or None)."""
    keys = context.property("Obtain Generated Keys").as_bool()
    style, dialect = connection.dialect.paramstyle, connection.dialect.name
    prepared = [(f, *_statement(context, session, f, dialect)) for f in unit]
    done: list[tuple[FlowFile, Any]] = []
    start = 0
    while start < len(prepared):
        end = start + 1
        while not keys and end < len(prepared) and prepared[end][1] == prepared[start][1]:
            end += 1
        sql = driver_sql(prepared[start][1], style, dialect)
        if keys and _is_insert(sql):
            done.append((prepared[start][0], _generated_key(connection, sql, prepared[start][2], dialect)))
        elif not prepared[start][2]:   # no parameters: as written (PostgreSQL then takes several statements)
            for flowfile, text, _ in prepared[start:end]:
                run_as_written(connection, prepared_sql(text, dialect))
                done.append((flowfile, None))
        else:
            connection.exec_driver_sql(sql, [p[2] for p in prepared[start:end]] if end - start > 1 else
                                       prepared[start][2])
            done += [(p[0], None) for p in prepared[start:end]]
        start = end
    return done


def _is_insert(sql: str) -> bool:
    return sql.lstrip().upper().startswith("INSERT") and " RETURNING " not in sql.upper()


def _generated_key(connection: Any, sql: str, params: tuple, dialect: str) -> str | None:
    """Run an INSERT and give the key it generated (PostgreSQL: the first column RETURNING gives;
    elsewhere the driver's lastrowid)."""
    if dialect == "postgresql":
        row = connection.exec_driver_sql(sql + " RETURNING *", params).first()
        return None if row is None or row[0] is None else str(row[0])
    result = connection.exec_driver_sql(sql, params)
    return None if result.lastrowid is None else str(result.lastrowid)


def _statement(context: ProcessContext, session, flowfile: FlowFile, dialect: str) -> tuple[str, tuple]:
    """The FlowFile's SQL (``?`` placeholders) and its parameters."""
    sql = context.property("SQL Statement").evaluate(flowfile)
    if sql is None or not sql.strip():
        sql = session.read_bytes(flowfile).decode("utf-8")
    if not sql.strip():
        raise StatementError("the FlowFile has no SQL statement: its content is empty and SQL Statement is not set")
    count = placeholder_count(sql, dialect)
    attributes = flowfile.attributes
    given = sorted(parameter_types(attributes))
    if given and given[-1] > count:
        raise StatementError(f"the FlowFile has sql.args.{given[-1]}.type but its statement has {count} parameter(s)")
    params = []
    for index in range(1, count + 1):
        kind = attributes.get(f"sql.args.{index}.type")
        if kind is None:
            raise StatementError(f"the statement has {count} parameter(s) but the FlowFile has no "
                                 f"sql.args.{index}.type attribute")
        params.append(jdbc_value(index, kind, attributes.get(f"sql.args.{index}.value"),
                                 attributes.get(f"sql.args.{index}.format") or ""))
    return sql, tuple(for_dialect(params, dialect))


def _route(context: ProcessContext, session, outcome: list[tuple[FlowFile, Any]], url: str) -> None:
    """Route each FlowFile by its outcome: a fragmented transaction that failed goes whole, to
    retry when any of its errors may pass."""
    errors = [result for _, result in outcome if isinstance(result, Exception)]
    if errors and _fragmented([f for f, _ in outcome]):
        relationship = RETRY if any(_relationship(e) is RETRY for e in errors) else FAILURE
        for flowfile, result in outcome:
            _fail(context, session, flowfile, result if isinstance(result, Exception) else errors[0], relationship)
        return
    for flowfile, result in outcome:
        if isinstance(result, Exception):
            _fail(context, session, flowfile, result, _relationship(result))
            continue
        if result is not None:
            flowfile = session.put_attribute(flowfile, GENERATED_KEY, result)
        session.provenance.send(flowfile, url)
        session.transfer(flowfile, SUCCESS)


def _fail(context: ProcessContext, session, flowfile: FlowFile, err: Exception, relationship: Relationship) -> None:
    extra = {"error.message": database_error_text(err)}
    state = sql_state(err)
    if state:
        extra["error.sql.state"] = state
    code = getattr(getattr(err, "orig", None), "sqlite_errorcode", None) or mysql_error_number(err)
    if code:
        extra["error.code"] = str(code)
    if relationship is RETRY:
        flowfile = session.penalize(flowfile)
    common_route_failure(context, session, flowfile, extra["error.message"], extra, relationship)


def _ours(err: Exception) -> None:
    """Raise ``err`` again when it is not a FlowFile's or the database's problem (a bug, a full
    content repository)."""
    from sqlalchemy import exc

    if isinstance(err, ContentRepositoryFullError) or not isinstance(
            err, (StatementError, DatabaseUnavailableError, exc.SQLAlchemyError, ContentRepositoryError,
                  UnicodeDecodeError)):
        raise err


def _relationship(err: Exception) -> Relationship:
    from sqlalchemy import exc

    if isinstance(err, DatabaseUnavailableError) or (isinstance(err, exc.DBAPIError) and is_transient(err)):
        return RETRY
    return FAILURE
