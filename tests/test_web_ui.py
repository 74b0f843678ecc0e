"""The flow page in a real headless Chromium (Selenium, the system's chromedriver) over a real flow
on real Ray: the graph's live counts against the controller's status, back pressure, a bulletin,
provenance search, a lineage and a group opened.

``FLOWACTORS_SCREENSHOTS=docs/images`` makes the test write the README's screenshots there
(otherwise it takes none).
"""

from __future__ import annotations

import re
import sys
import threading
import time

import pytest
import ray.cloudpickle

from flowactors.engine.controller import FlowController
from flowactors.engine.repository_services import ProvenanceRepositoryService
from flowactors import Flow, Processor, Relationship
from flowactors.cli.ui import flow_page
from flowactors.driver.running import processor_totals, queue_totals, run_flow
from flowactors.engine.transport import call_now
from flowactors.ops.lineage_view import condense
from flowactors.ops.web.address import read_address
from flowactors.processors import Funnel, GenerateFlowFile, MergeContent, SplitText
from tests.provenance_flows import FAST

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

from tests.browser import MISSING, By, Select, browser, shoot, wait_for  # noqa: F401 (browser: a fixture)

if MISSING:
    pytest.skip(MISSING, allow_module_level=True)

pytestmark = pytest.mark.ray

GENERATED = 4
#: 8 lines: each FORK has more splits than a lineage view shows, so the lineage has a group to open
TEXT = "".join(f"line {i}\n" for i in range(8))
HOLD_THRESHOLD = 3
WAIT = 60
#: FAST, and an on_trigger running a second is named as stuck; the run's stop waits a second for it
SETTINGS = {**FAST, "long_trigger_seconds": 1.0, "stop_grace_seconds": 1.0}


class Unwell(Processor):
    """Fails as it is scheduled: one bulletin, with a second line and a traceback."""

    input_required = False
    relationships = [Relationship("success")]

    def on_scheduled(self, context):
        raise RuntimeError("the disk is on fire\nsecond line of the story")

    def on_trigger(self, context, session):
        context.yield_()


class Stuck(Processor):
    """Its first trigger never returns (a remote call with no timeout, say)."""

    input_required = False
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        threading.Event().wait(3600)


def watched_flow() -> Flow:
    """generate (8 lines, 4 times) -> split -> fan -> merge (3 at a time) and -> hold, which runs
    once an hour: its queue fills to the threshold and stays there (back pressure)."""
    flow = Flow("page-live", settings=SETTINGS)
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "Custom Text": TEXT, "Max FlowFiles": GENERATED, "filename": "letters.txt"})
    split = flow.add(SplitText, "split", properties={"Line Split Count": 1}, auto_terminate=["original", "failure"])
    fan = flow.add(Funnel, "fan")
    merge = flow.add(MergeContent, "merge", properties={
        "Minimum Number of Entries": 3, "Maximum Number of Entries": 3, "Max Bin Age": "20 sec"},
        auto_terminate=["merged", "original", "failure"])
    hold = flow.add(Funnel, "hold", run_schedule="1 hour", auto_terminate=["success"])
    flow.add(Unwell, "unwell", auto_terminate=["success"])
    flow.add(Stuck, "stuck", auto_terminate=["success"])
    flow.connect(generate, split, name="to-split")
    flow.connect(split, fan, "splits", name="splits")
    flow.connect(fan, merge, name="to-merge")
    flow.connect(fan, hold, name="to-hold", back_pressure_object_threshold=HOLD_THRESHOLD)
    return flow


def unsettled(status: dict) -> list[str]:
    """What is still moving: empty once the flow is steady (back pressure on, every FlowFile
    made, the failure recorded, every processor idle or held up; ``hold`` waits for its hour)."""
    processors, queues = processor_totals(status), queue_totals(status)
    waits = [] if queues["to-hold"]["back_pressure"] else ["no back pressure on to-hold"]
    if processors["generate"]["flowfiles_out"] != GENERATED:
        waits.append(f"generate made {processors['generate']['flowfiles_out']}")
    if processors["unwell"]["errors"] != 1:
        waits.append(f"unwell has {processors['unwell']['errors']} errors")
    if not processors["stuck"]["stuck_seconds"]:
        waits.append("stuck is not named as stuck yet")
    waits += [f"{p['name']} is busy" for p in status["processors"]
              if p["running"] and not p["idle"] and not p["back_pressure"] and p["name"] not in ("hold", "stuck")]
    return waits


@pytest.fixture
def running(ray_session, repository):
    """The flow running on Ray with its page, until the test ends: (page url, controller link)."""
    flow = watched_flow()
    stop = threading.Event()
    controller: list = []
    failure: list = []
    with flow_page(flow, repository, enabled=True) as hooks:
        page_started = hooks["on_started"]

        def started(link):
            page_started(link)
            controller.append(link)

        def run():
            try:
                run_flow(flow, repository, settings=SETTINGS, until=lambda status: stop.is_set(),
                         on_started=started, on_status=hooks["on_status"])
            except BaseException as err:   # the test reports it
                failure.append(err)

        thread = threading.Thread(target=run, name="flow")
        thread.start()
        try:
            deadline = time.monotonic() + WAIT
            while not controller and not failure and time.monotonic() < deadline:
                time.sleep(0.1)
            assert controller, failure or "the flow did not start"
            while waits := unsettled(call_now(controller[0], FlowController.status)):
                assert time.monotonic() < deadline, waits
                time.sleep(0.2)
            yield read_address(repository).url, controller[0]
        finally:
            stop.set()
            thread.join(WAIT)
    assert not thread.is_alive(), f"the flow did not stop within {WAIT} s"
    assert not failure, failure


def drawn_lineage(driver) -> set[str]:
    """The ids of the lineage nodes the page shows."""
    return {n.get_attribute("data-node") for n in driver.find_elements(By.CSS_SELECTOR, "#lineage g.node")}


#: every text of the graph that does not fit its box, measured by the browser
OVERFLOWING = """
const out = [];
for (const group of document.querySelectorAll('#graph g.processor, #graph g.connection')) {
  const box = group.querySelector('rect').getBBox();
  for (const text of group.querySelectorAll('text')) {
    const b = text.getBBox();
    if (b.x < box.x || b.x + b.width > box.x + box.width) out.push(text.textContent);
  }
}
return out;
"""


def test_the_page_shows_the_running_flow(running, browser):
    url, controller = running
    browser.get(url)
    graph = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#graph g.processor"), "no graph")
    assert len(graph) == 7

    # the live counts are the controller's (the flow is steady: nothing moves any more)
    status = call_now(controller, FlowController.status)

    def shown(selector: str) -> str:
        return " / ".join(t.text for t in browser.find_elements(By.CSS_SELECTOR, selector + " text.stats"))

    def counts_match(driver) -> bool:
        for p in status["processors"]:
            text = shown(f'g.processor[data-processor="{p["name"]}"]')
            if not text.startswith(f"in {p['flowfiles_in']} · out {p['flowfiles_out']} / "):
                return False
        for q in status["queues"]:
            if not shown(f'g.connection[data-connection="{q["id"]}"]').startswith(f"queued {q['count']} · "):
                return False
        return True

    wait_for(browser, counts_match, f"the graph's counts never matched the controller's status {status}")
    assert queue_totals(status)["to-hold"]["count"] >= HOLD_THRESHOLD   # shown above, as the controller says
    held = browser.find_element(By.CSS_SELECTOR, 'g.connection[data-connection="to-hold"]')
    assert "back-pressure" in held.get_attribute("class")
    assert "back-pressure" not in browser.find_element(
        By.CSS_SELECTOR, 'g.connection[data-connection="to-merge"]').get_attribute("class")
    assert re.fullmatch(r"in [\d.]+/s out [\d.]+/s", shown('g.connection[data-connection="splits"]').split(" / ")[1])
    assert browser.execute_script(OVERFLOWING) == []

    # the failing processor: one bulletin, one line; the whole text on click
    bulletin = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".bulletin"), "no bulletin")[0]
    assert len(browser.find_elements(By.CSS_SELECTOR, ".bulletin")) == 1
    line = bulletin.find_element(By.CSS_SELECTOR, ".line")
    assert line.text.endswith("unwell on_scheduled: RuntimeError: the disk is on fire")
    assert "unwell" in browser.find_element(By.CSS_SELECTOR, 'g.processor.has-errors').get_attribute("data-processor")
    # the processor stuck in on_trigger: named, and how long it has been in it
    stuck = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "g.processor.stuck"), "nothing shown stuck")
    assert [g.get_attribute("data-processor") for g in stuck] == ["stuck"]
    assert re.fullmatch(r"in 0 · out 0 / in on_trigger \d+ s", shown('g.processor[data-processor="stuck"]'))
    line.click()
    full = bulletin.find_element(By.CSS_SELECTOR, "pre")
    assert "second line of the story" in full.text and "Traceback" in full.text
    line.click()
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", held)
    shoot(browser, "ui-flow.png")

    # provenance search: the FORK events of 'split', as the flow's own provenance repository says
    provenance = call_now(controller, FlowController.repositories)["provenance"]
    forks = call_now(provenance, ProvenanceRepositoryService.search_with,
                     {"component_name": "split", "event_type": "FORK"}, 1000)
    assert len(forks) == GENERATED
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-view="provenance"]').click()
    Select(browser.find_element(By.NAME, "component")).select_by_value("split")
    Select(browser.find_element(By.NAME, "type")).select_by_value("FORK")
    browser.find_element(By.CSS_SELECTOR, "#search button").click()
    rows = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#events tbody tr"), "no events found")
    assert [int(r.get_attribute("data-event-id")) for r in rows] == [e.event_id for e in forks]
    assert {r.find_elements(By.TAG_NAME, "td")[2].text for r in rows} == {"FORK"}
    assert browser.find_element(By.ID, "search-note").text == f"{GENERATED} event(s), newest first"
    shoot(browser, "ui-provenance.png")

    # a lineage, opened from a row: the page draws the condensed view of the FlowFile's family,
    # its FORK's splits beyond the first few collapsed into a group
    uuid = forks[-1].flowfile_uuid
    lineage = call_now(provenance, ProvenanceRepositoryService.lineage, uuid)
    view = condense(lineage, uuid)
    assert view.groups, "8 splits of one FlowFile make a group"
    rows[-1].find_element(By.CSS_SELECTOR, "a.uuid").click()
    wait_for(browser, lambda d: drawn_lineage(d) == {n.id for n in view.nodes}, "the lineage was not drawn")
    shoot(browser, "ui-lineage.png")

    # the group opens on click: the page asks for the lineage with it expanded and draws that view
    group = view.groups[0]
    browser.find_element(By.CSS_SELECTOR, f'#lineage g.node.group[data-node="{group.id}"]').click()
    opened = {n.id for n in condense(lineage, uuid, expand=[group.id]).nodes}
    assert set(group.members) <= opened
    wait_for(browser, lambda d: drawn_lineage(d) == opened, "the group did not open")

    # a lineage the flow's provenance cannot answer is said on the page (the same run: one flow a module)
    uuid_field = browser.find_element(By.CSS_SELECTOR, "#lineage-form input")
    uuid_field.clear()
    uuid_field.send_keys("no-such-flowfile")
    browser.find_element(By.CSS_SELECTOR, "#lineage-form button").click()
    wait_for(browser, lambda d: "no provenance events name FlowFile no-such-flowfile" in
             d.find_element(By.ID, "lineage-note").text, "no message for an unknown uuid")
