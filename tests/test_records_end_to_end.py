"""Every standard controller service and record processor in one flow, as NiFi exports it:
imported, run end to end on the in-process and Ray engines, with the result NiFi gives
(tests/nifi_record_flow.py says what the flow does)."""

from __future__ import annotations

import pytest

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.services import STANDARD_SERVICES
from nifi_record_flow import record_flow

#: what PutFile writes: the big orders (over 5), one file a country, each line a FreeFormText record
EXPECTED = {"GB.txt": "ada (gold, west): 12.5 EUR\ncy (silver, west): 40.0 EUR\n",
            "DE.txt": "dee (gold, central): 7.75 EUR\n"}


def stored(status: dict) -> bool:
    return any(p["name"] == "Deliver/store" and p["flowfiles_in"] >= 2 for p in status["processors"])


def test_the_flow_uses_every_record_processor_and_every_record_service(tmp_path):
    flow = flow_from_nifi(record_flow(tmp_path, tmp_path / "out"))
    used = {s.type.__name__ for s in flow.services.values()}
    record_services = {name for name, module in STANDARD_SERVICES.items()   # the record family's
                       if module.startswith("flowactors.services.records") or module == "flowactors.services.lookup"}
    assert used == record_services
    assert {n.type.__name__ for n in flow.processors.values()} >= {
        "ConvertRecord", "QueryRecord", "SplitRecord", "ValidateRecord", "UpdateRecord", "PartitionRecord",
        "MergeRecord", "LookupRecord"}
    assert flow.problems() == []


@pytest.mark.parametrize("engine", ["in-process", pytest.param("ray", marks=pytest.mark.ray)])
def test_a_nifi_record_flow_runs_end_to_end(engine, tmp_path, request):
    if engine == "ray":
        request.getfixturevalue("ray_session")
    out = tmp_path / "out"
    flow = flow_from_nifi(record_flow(tmp_path, out))
    final = run_flow(flow, tmp_path / "repository", engine=engine, timeout=120, until=stored)
    assert not final.get("timed_out"), final
    assert sum(p["errors"] for p in final["processors"]) == 0, [p["recent_errors"] for p in final["processors"]]
    assert {f.name: f.read_text() for f in out.iterdir()} == EXPECTED
