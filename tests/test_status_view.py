"""The status view's pieces: an error as one line, rates from two statuses, plain text off a terminal."""

from __future__ import annotations

from flowactors.ops.status_view import one_line, rates, status_text


def status(flowfiles_in: int, bytes_read: int, total_in: int, bytes_in: int, errors=()) -> dict:
    return {"flow": "f", "processors": [{
        "name": "p", "type": "T", "flowfiles_in": flowfiles_in, "flowfiles_out": 0, "bytes_read": bytes_read,
        "bytes_written": 0, "tasks": 1, "errors": len(errors), "back_pressure": False, "idle": False,
        "recent_errors": list(errors)}],
        "queues": [{"id": "a:success->p", "queued": 3, "in_flight": 0, "bytes": 10, "back_pressure": True,
                    "total_in": total_in, "total_out": 0, "bytes_in": bytes_in}]}


def test_an_error_is_its_first_line_without_colour_codes():
    ray_error = "\x1b[36mray::Executor.trigger()\x1b[39m (pid=1)\n" + "\n".join(f"  File x, line {n}" for n in range(139))
    assert one_line(ray_error) == "ray::Executor.trigger() (pid=1)"
    assert one_line("\n\n  ValueError: boom  \nmore") == "ValueError: boom"
    assert one_line("x" * 500).endswith("...") and len(one_line("x" * 500)) == 160


def test_rates_come_from_consecutive_statuses():
    speeds = rates(status(10, 1000, 20, 4000), status(30, 3000, 60, 8000), 2.0)
    assert speeds[("processor", "p")] == {"in": 10.0, "out": 0.0, "bytes": 1000.0}
    assert speeds[("queue", "a:success->p")] == {"in": 20.0, "out": 0.0, "bytes": 2000.0}
    # a counter that went down (a restarted component) counts from zero
    assert rates(status(50, 0, 0, 0), status(5, 0, 0, 0), 1.0)[("processor", "p")]["in"] == 5.0


def test_plain_text_has_rates_back_pressure_and_one_line_errors():
    error = {"at": 1.0, "where": "on_trigger", "error": "\x1b[31mboom\x1b[0m\nTraceback line"}
    text = status_text(status(1, 1, 1, 1, [error]))
    assert "\x1b" not in text and "Traceback" not in text
    assert "in/s" in text and "bytes/s" in text and "YES" in text
    assert "  p: on_trigger: boom" in text.splitlines()


def test_services_say_where_they_are_enabled():
    given = status(1, 1, 1, 1)
    given["services"] = [{"name": "json-in", "type": "JsonTreeReader", "enabled": 2},
                         {"name": "Main/registry", "type": "AvroSchemaRegistry", "enabled": 0}]
    assert ("services: json-in (JsonTreeReader, enabled in 2 executors), Main/registry (AvroSchemaRegistry, not "
            "enabled)") in status_text(given, width=200).splitlines()
