"""The flow page's server without a browser: the token, the address file, rates and bulletins,
and ``flowactors ui`` finding (or not finding) a page; and the controller services on the page,
in the headless Chromium of test_web_ui.py (skipped, saying why, without it) over a flow on the
in-process engine. The browser tests of the rest of the page are in test_web_ui.py."""

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
from flowactors.sdk.processor import PropertyDescriptor
from tests.service_components import KeyValues, LookUp

from tests.browser import By, browser, shoot, wait_for  # noqa: F401 (browser: a fixture)


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


# ---------------------------------------------------------------------- controller services
SECRET = "hunter2-never-on-the-page"
PARAMETER_SECRET = "param-secret-never-on-the-page"


class Vault(KeyValues):
    """A lookup with a password (set) and a token (not set), both sensitive, and a default."""

    properties = (*KeyValues.properties, PropertyDescriptor("Password", sensitive=True),
                  PropertyDescriptor("Token", sensitive=True), PropertyDescriptor("Realm", default="main"))


def services_flow() -> Flow:
    """make -> Main/look -> sink; Main/look's 'Lookup' names 'keys', whose 'Fallback' names
    'fallback'; 'Main/vault' (sensitive properties, one of them a sensitive parameter) is used by
    no processor."""
    flow = Flow("page-services", settings={"administrative_yield": 0.1})
    flow.add_parameter_context("secrets", {"pw": PARAMETER_SECRET}, sensitive=["pw"])
    flow.add_service(KeyValues, "fallback", properties={"b": "from the fallback"})
    flow.add_service(KeyValues, "keys", properties={"a": "1", "Fallback": "fallback"})
    flow.add_service(Vault, "vault", group="Main", properties={"Password": SECRET, "Journal": "#{pw}"})
    make = flow.add(GenerateFlowFile, "make", properties={"Max FlowFiles": 3, "key": "b"})
    look = flow.add(LookUp, "Main/look", properties={"Lookup": "keys"})
    flow.connect(make, look, name="made")
    flow.connect(look, flow.add(Funnel, "sink", auto_terminate=["success"]), name="looked")
    return flow


def test_the_page_describes_the_flow_s_services_and_never_a_sensitive_value(tmp_path):
    """/api/meta lists each service as NiFi's Controller Services listing does (path, type, group,
    the processors that use it, directly or through another service, as 'flowactors validate'
    says) with its properties, and each processor's references by property; a sensitive value,
    given or through a parameter, is never sent: only that it is set."""
    flow = services_flow()
    flow.validate()
    with FlowPage(flow, tmp_path) as page:
        status, body, _ = get(page.url + "api/meta")
    assert status == 200
    assert SECRET.encode() not in body and PARAMETER_SECRET.encode() not in body
    meta = json.loads(body)
    services = {s["path"]: s for s in meta["services"]}
    assert list(services) == ["fallback", "keys", "Main/vault"]
    keys = services["keys"]
    assert (keys["name"], keys["group"], keys["type"], keys["apis"]) == ("keys", "", "KeyValues",
                                                                        ["StringLookupService", "LookupService"])
    assert keys["type_name"] == "tests.service_components.KeyValues"
    assert keys["used_by"] == services["fallback"]["used_by"] == ["Main/look"]   # fallback: through keys
    assert keys["properties"] == [
        {"name": "Fallback", "value": "fallback", "set": True, "sensitive": False, "default": False,
         "service": "fallback"},
        {"name": "Journal", "value": None, "set": False, "sensitive": False, "default": False, "service": None},
        {"name": "a", "value": "1", "set": True, "sensitive": False, "default": False, "service": None}]
    vault = services["Main/vault"]
    assert (vault["name"], vault["group"], vault["used_by"]) == ("vault", "Main", [])
    assert {p["name"]: (p["value"], p["set"], p["sensitive"], p["default"]) for p in vault["properties"]} == {
        "Fallback": (None, False, False, False), "Journal": ("#{pw}", True, False, False),
        "Password": (None, True, True, False), "Token": (None, False, True, False),
        "Realm": ("main", True, False, True)}
    assert meta["processor_details"] == {
        "make": {"type": "GenerateFlowFile", "group": "", "services": []},
        "Main/look": {"type": "LookUp", "group": "Main",
                      "services": [{"property": "Lookup", "reference": "keys", "service": "keys"}]},
        "sink": {"type": "Funnel", "group": "", "services": []}}


def test_the_status_carries_the_services_states():
    history = StatusHistory()
    services = [{"name": "keys", "type": "KeyValues", "enabled": 2},
                {"name": "Main/vault", "type": "Vault", "enabled": 0}]
    history.add({"processors": [], "queues": [], "services": services}, now=1.0)
    assert history.view()["services"] == services
    history.add({"processors": [], "queues": []}, now=2.0)   # a status of a flow without services
    assert history.view()["services"] == []


@pytest.fixture
def services_page(repository):
    """services_flow running on the in-process engine with its page, every FlowFile looked up:
    (the page, the status it has)."""
    import threading

    from flowactors.driver.running import processor_totals, run_flow

    flow = services_flow()
    flow.validate()
    done, stopping, failure = threading.Event(), threading.Event(), []
    with FlowPage(flow, repository) as page:
        def on_status(status: dict) -> None:
            page.on_status(status)
            if processor_totals(status)["sink"]["flowfiles_in"] == 3:
                done.set()

        def run() -> None:
            try:
                run_flow(flow, repository, engine="in-process", on_started=page.on_started, on_status=on_status,
                         until=lambda status: stopping.is_set())
            except BaseException as err:   # the test reports it
                failure.append(err)
                done.set()

        runner = threading.Thread(target=run, name="flow")
        runner.start()
        try:
            assert done.wait(60) and not failure, failure
            yield page, page.history.view()
        finally:
            stopping.set()
            runner.join(60)
    assert not runner.is_alive() and not failure, failure


def cells(row) -> list[str]:
    return [td.text for td in row.find_elements(By.CSS_SELECTOR, ":scope > td")]


def test_the_page_lists_the_services_and_a_processor_s_references(services_page, browser):
    """The Controller Services listing: each service's path, type, group, state (as the flow's
    status says) and users; a click shows its properties, a sensitive one only as set or not; a
    processor clicked on the graph shows the services its properties name, which lead to the
    listing."""
    page, status = services_page
    enabled = {s["name"]: s["enabled"] for s in status["services"]}
    assert enabled["keys"] >= 1 and enabled["fallback"] >= 1 and enabled["Main/vault"] == 0

    def state(path: str) -> str:
        n = enabled[path]
        return f"enabled in {n} executor{'s' if n != 1 else ''}" if n else "not enabled"

    browser.get(page.url)
    rows = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#service-table tr.service"), "no services")
    assert browser.find_element(By.ID, "service-count").text == "3"
    assert not browser.find_element(By.CSS_SELECTOR, "#services .empty").is_displayed()
    expected = [["fallback", "KeyValues", "(the flow)", state("fallback"), "Main/look"],
                ["keys", "KeyValues", "(the flow)", state("keys"), "Main/look"],
                ["Main/vault", "Vault", "Main", "not enabled", "no processor"]]
    wait_for(browser, lambda d: [cells(r) for r in rows] == expected,
             f"the listing never showed {expected}: {[cells(r) for r in rows]}")

    def service(path: str):
        return browser.find_element(By.CSS_SELECTOR, f'tr.service[data-service="{path}"]')

    def properties(path: str) -> dict[str, str]:
        detail = browser.find_element(By.CSS_SELECTOR, f'tr.service-detail[data-service="{path}"]')
        assert detail.is_displayed()
        return {r.get_attribute("data-property"): r.find_element(By.TAG_NAME, "td").text
                for r in detail.find_elements(By.CSS_SELECTOR, "table.properties tr")}

    assert not browser.find_element(By.CSS_SELECTOR, 'tr.service-detail[data-service="keys"]').is_displayed()
    service("keys").click()
    assert properties("keys") == {"Fallback": "fallback", "Journal": "no value set", "a": "1"}
    service("Main/vault").click()
    assert properties("Main/vault") == {"Fallback": "no value set", "Journal": "#{pw}",
                                        "Password": "sensitive value set", "Token": "no value set",
                                        "Realm": "main (default)"}
    assert "StringLookupService" in browser.find_element(
        By.CSS_SELECTOR, 'tr.service-detail[data-service="Main/vault"]').text
    source = browser.page_source
    assert SECRET not in source and PARAMETER_SECRET not in source
    # a property naming a service leads to it
    browser.find_element(By.CSS_SELECTOR, 'tr.service-detail[data-service="keys"] a').click()
    assert browser.find_elements(By.CSS_SELECTOR, "tr.service.selected") == [service("fallback")]
    assert "open" in service("fallback").get_attribute("class")

    # a processor on the graph: its references by property, their states live
    panel = browser.find_element(By.ID, "processor-detail")
    assert not panel.is_displayed()
    browser.find_element(By.CSS_SELECTOR, 'g.processor[data-processor="Main/look"]').click()
    assert panel.is_displayed() and browser.find_element(By.ID, "detail-name").text == "Main/look"
    assert browser.find_element(By.ID, "detail-type").text == "LookUp in group Main"
    assert [g.get_attribute("data-processor") for g in browser.find_elements(By.CSS_SELECTOR, "g.processor.selected")
            ] == ["Main/look"]
    references = browser.find_elements(By.CSS_SELECTOR, "#detail-services tbody tr")
    assert [cells(r) for r in references] == [["Lookup", "keys", state("keys")]]
    shoot(browser, "ui-services.png")
    assert not panel.find_element(By.CSS_SELECTOR, ".empty").is_displayed()
    references[0].find_element(By.TAG_NAME, "a").click()
    assert browser.find_elements(By.CSS_SELECTOR, "tr.service.selected") == [service("keys")]
    # a processor that names no service says so; one a service lists is a click away
    browser.find_element(By.CSS_SELECTOR, 'g.processor[data-processor="make"]').click()
    assert browser.find_element(By.ID, "detail-name").text == "make"
    assert panel.find_element(By.CSS_SELECTOR, ".empty").text == "uses no controller service"
    assert not browser.find_element(By.ID, "detail-services").is_displayed()
    service("fallback").find_element(By.CSS_SELECTOR, "td.used-by a").click()
    assert browser.find_element(By.ID, "detail-name").text == "Main/look"
    panel.find_element(By.CSS_SELECTOR, ".close").click()
    assert not panel.is_displayed() and not browser.find_elements(By.CSS_SELECTOR, "g.processor.selected")


def test_a_flow_without_services_says_it_has_none(tmp_path, browser):
    with FlowPage(small_flow(), tmp_path) as page:
        browser.get(page.url)
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#graph g.processor"), "no graph")
        assert browser.find_element(By.ID, "service-count").text == "0"
        assert browser.find_element(By.CSS_SELECTOR, "#services .empty").text == "the flow has no controller services"
        assert not browser.find_element(By.ID, "service-table").is_displayed()
