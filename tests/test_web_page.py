"""The flow page's server without a browser: the token, the address file, rates and bulletins,
and ``flowactors ui`` finding (or not finding) a page. The browser tests are in test_web_ui.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from typer.testing import CliRunner
from flowactors.cli.main import build_app

from flowactors import Flow
from flowactors.ops.web.address import ADDRESS_FILE, NoPageError, PageAddress, read_address, write_address
from flowactors.ops.web.server import FlowPage, StatusHistory, is_loopback
from flowactors.processors import Funnel, GenerateFlowFile


def small_flow() -> Flow:
    flow = Flow("page-test")
    flow.connect(flow.add(GenerateFlowFile, "make"), flow.add(Funnel, "sink", auto_terminate=["success"]), name="made")
    return flow


def get(url: str, headers: dict | None = None) -> tuple[int, bytes, dict]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def test_bound_beyond_loopback_a_page_gets_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0")
    assert FlowPage(small_flow(), ".", host="0.0.0.0").token   # generated, never bound here
    assert FlowPage(small_flow(), ".").token is None


def test_a_request_without_the_token_is_refused(tmp_path):
    with FlowPage(small_flow(), tmp_path, token="s3cret") as page:
        base = page.url.split("?")[0]
        assert page.url.endswith("/?token=s3cret")
        for path in ("", "static/page.js", "api/status", "api/meta", "api/graph.svg", "api/provenance"):
            status, body, _ = get(base + path)
            assert status == 401, path
            assert b"this flow page needs its token" in body
            assert get(base + path, {"X-Flowactors-Token": "wrong"})[0] == 401
        status, body, headers = get(base + "?token=s3cret")
        assert status == 200 and b"flowactors" in body
        assert "flowactors_token=s3cret" in headers["Set-Cookie"] and "HttpOnly" in headers["Set-Cookie"]
        assert get(base + "static/page.js", {"Cookie": "flowactors_token=s3cret"})[0] == 200
        status, body, _ = get(base + "api/meta", {"X-Flowactors-Token": "s3cret"})
        assert status == 200 and json.loads(body)["processors"] == ["make", "sink"]


def test_a_page_without_a_token_answers_to_loopback_names_only(tmp_path):
    with FlowPage(small_flow(), tmp_path) as page:
        assert get(page.url + "api/meta")[0] == 200
        assert get(page.url.replace("127.0.0.1", "localhost") + "api/meta")[0] == 200
        status, body, _ = get(page.url + "api/meta", {"Host": "attacker.example:80"})
        assert status == 403
        assert json.loads(body)["error"] == ("this flow page answers to 127.0.0.1 and localhost only, "
                                             "not attacker.example:80")


def test_a_page_bound_to_another_loopback_address_answers_its_own_address(tmp_path):
    """127.0.1.1 (the machine's name on Debian) is loopback: no token, and the printed address answers."""
    with FlowPage(small_flow(), tmp_path, host="127.0.1.1") as page:
        assert page.token is None and page.url.startswith("http://127.0.1.1:")
        assert get(page.url + "api/meta")[0] == 200
        status, body, _ = get(page.url + "api/meta", {"Host": "attacker.example:80"})
        assert status == 403
        assert json.loads(body)["error"] == ("this flow page answers to 127.0.1.1, 127.0.0.1 and localhost only, "
                                             "not attacker.example:80")


def test_the_address_file_lives_while_the_page_does(tmp_path):
    page = FlowPage(small_flow(), tmp_path).start()
    try:
        address = read_address(tmp_path)
        assert address.url == page.url and address.flow == "page-test" and address.pid == os.getpid()
        assert oct((tmp_path / ADDRESS_FILE).stat().st_mode & 0o777) == "0o600"
        result = CliRunner().invoke(build_app(), ["ui", "--repository", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert result.output.strip() == f"flow 'page-test': {page.url}"
        status, body, _ = get(page.url + "api/status")
        assert status == 200 and json.loads(body)["started"] is False   # no status yet: starting
    finally:
        page.stop()
    assert not (tmp_path / ADDRESS_FILE).exists()
    result = CliRunner().invoke(build_app(), ["ui", "--repository", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == (f"flowactors: no flow with a page runs on {tmp_path} (no {ADDRESS_FILE}); start one "
                                     f"with 'flowactors run FLOW --ui --repository {tmp_path}'")


def test_a_page_whose_address_cannot_be_written_stops_serving(tmp_path):
    import socket
    import threading

    page = FlowPage(small_flow(), tmp_path / "no-such-folder")
    with pytest.raises(FileNotFoundError):
        page.start()
    assert not [t for t in threading.enumerate() if t.name == "flowactors-page"]
    port = int(page.url.rsplit(":", 1)[1].strip("/"))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_ui_says_a_flow_that_left_its_address_behind_has_stopped(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)
    import socket

    write_address(tmp_path, PageAddress(url="http://127.0.0.1:9/", flow="old", pid=pid,
                                        hostname=socket.gethostname(), started=0.0))
    result = CliRunner().invoke(build_app(), ["ui", "--repository", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == (f"flowactors: the flow 'old' that served a page on {tmp_path} (pid {pid}) has "
                                     f"stopped; no flow runs there")
    assert (tmp_path / ADDRESS_FILE).exists()   # a read-only command changes nothing


def test_an_address_file_of_another_version_is_named(tmp_path):
    (tmp_path / ADDRESS_FILE).write_text('{"version": 7}')
    with pytest.raises(NoPageError, match="a page address of version 7; this flowactors reads version 1"):
        read_address(tmp_path)


def test_rates_come_from_the_statuses_of_the_window():
    history = StatusHistory()

    def status(out: int, queued_in: int) -> dict:
        processor = {"name": "make", "flowfiles_in": 0, "flowfiles_out": out, "bytes_written": out * 10,
                     "bytes_read": out * 2, "recent_errors": []}
        return {"flow": "f", "started": True, "processors": [processor],
                "queues": [{"id": "made", "count": 1, "total_in": queued_in, "total_out": 0}]}

    assert history.view() is None
    history.add(status(0, 0), now=100.0)
    history.add(status(50, 40), now=102.0)
    view = history.view()
    assert view["processors"][0]["out_per_second"] == 25.0
    assert view["processors"][0]["bytes_per_second"] == 300.0   # read and written, as the terminal counts
    assert view["queues"][0]["in_per_second"] == 20.0
    history.add(status(100, 80), now=110.0)   # the first look left the window
    assert history.view()["processors"][0]["out_per_second"] == pytest.approx(50 / 8)


def test_a_restarted_component_s_counters_count_from_zero():
    """A component restarted by the controller starts its counters again: its rate is what it did
    since, never negative."""
    history = StatusHistory()

    def status(out: int) -> dict:
        return {"processors": [{"name": "p", "flowfiles_in": out, "flowfiles_out": out, "bytes_written": out,
                                "bytes_read": 0, "recent_errors": []}],
                "queues": [{"id": "q", "count": 0, "total_in": out, "total_out": out}]}

    history.add(status(1000), now=100.0)
    history.add(status(40), now=104.0)   # restarted: 40 since
    processor, = history.view()["processors"]
    queue, = history.view()["queues"]
    assert processor["in_per_second"] == processor["out_per_second"] == processor["bytes_per_second"] == 10.0
    assert queue["in_per_second"] == queue["out_per_second"] == 10.0


def test_an_error_is_one_line_in_the_bulletins_and_whole_on_click():
    raw = "RuntimeError: \x1b[31mboom\x1b[0m\nTraceback (most recent call last):\n  line 2"
    history = StatusHistory()
    history.add({"processors": [{"name": "p", "flowfiles_in": 0, "flowfiles_out": 0, "bytes_written": 0,
                                 "recent_errors": [{"at": 1.0, "where": "on_trigger", "error": raw,
                                                    "traceback": "Traceback ...\nRuntimeError"}]}], "queues": []})
    bulletin, = history.view()["bulletins"]
    assert bulletin["line"] == "RuntimeError: boom" and "\x1b" not in bulletin["text"]
    assert "Traceback ..." in bulletin["text"]


def test_provenance_and_lineage_of_a_flow_on_the_in_process_engine(repository):
    """The page reaches the running flow's provenance through its controller on the in-process
    engine too (the browser test runs the Ray engine)."""
    import threading

    from flowactors.driver.running import processor_totals, run_flow

    flow = Flow("page-in-process", settings={"administrative_yield": 0.1})
    flow.connect(flow.add(GenerateFlowFile, "make", properties={"Max FlowFiles": 3}),
                 flow.add(Funnel, "sink", auto_terminate=["success"]), name="made")
    made = threading.Event()
    with FlowPage(flow, repository) as page:
        def on_status(status: dict) -> None:
            page.on_status(status)
            if processor_totals(status)["sink"]["flowfiles_in"] == 3:
                made.set()

        def run() -> None:
            run_flow(flow, repository, engine="in-process", on_started=page.on_started, on_status=on_status,
                     until=lambda status: stopping.is_set())

        stopping = threading.Event()
        runner = threading.Thread(target=run)
        runner.start()
        try:
            assert made.wait(60)
            status, body, _ = get(page.url + "api/provenance?type=create&component=make")
            assert status == 200, body
            events = json.loads(body)["events"]
            assert len(events) == 3 and {e["event_type"] for e in events} == {"CREATE"}
            assert [e["event_id"] for e in events] == sorted((e["event_id"] for e in events), reverse=True)
            status, body, headers = get(page.url + f"api/lineage?uuid={events[0]['flowfile_uuid']}")
            assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
            assert b"CREATE by make" in body and b"DROP by sink" in body
            for query, message in [("api/provenance?type=NOPE", "no event type 'NOPE'"),
                                   ("api/provenance?limit=0", "limit must be between 1 and 1000, not 0"),
                                   ("api/lineage?uuid=nobody", "no provenance events name FlowFile nobody")]:
                status, body, _ = get(page.url + query)
                assert status in (400, 404) and json.loads(body)["error"].startswith(message), body
        finally:
            stopping.set()
            runner.join(60)


def test_run_ui_lists_a_broken_flow_before_drawing_it(tmp_path, monkeypatch):
    """The page draws the flow as it starts: a connection to no processor is the usual listing
    (exit 2), not a traceback from the drawing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(
        "from flowactors import Flow\n"
        "from flowactors.processors import Funnel\n"
        "flow = Flow('broken')\n"
        "flow.add(Funnel, 'a', auto_terminate=['success'])\n"
        "flow.connect('a', 'nowhere', name='lost')\n")
    result = CliRunner().invoke(build_app(), ["run", "flow.py", "--ui", "--repository", str(tmp_path / "repo")])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("flowactors: flow 'broken' is not valid")
    assert "'nowhere'" in result.output and not (tmp_path / "repo" / ADDRESS_FILE).exists()
