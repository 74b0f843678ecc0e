"""What NiFi accepts when it loads a flow, the import accepts too: NiFi 1.x property names (NiFi
renames them itself), ports and funnels whose connections select [""], "" as unset."""

from __future__ import annotations

import pytest

from flowactors import run_flow
from flowactors.driver.nifi_export import NiFiImportError, flow_from_nifi
from flowactors.processors import FetchFile, ListFile, MergeContent, ReplaceText
from nifi_flows import group, nifi1_files_flow, processor, snapshot

CONTENTS = {"a.txt": b"apple", "b.txt": b"pear", "c.txt": b"fig"}


@pytest.fixture
def files(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    for name, data in CONTENTS.items():
        (inbox / name).write_bytes(data)
    return inbox, tmp_path / "out"


def test_a_nifi_1_export_loads_under_the_names_nifi_2_gives_its_properties(files):
    inbox, out = files
    flow = flow_from_nifi(nifi1_files_flow(str(inbox), str(out)))
    nodes = flow.processors
    assert nodes["List"].type is ListFile and nodes["List"].properties["Listing Strategy"] == "Tracking Timestamps"
    assert nodes["Fetch"].type is FetchFile
    assert nodes["Wrap"].type is ReplaceText and nodes["Wrap"].properties["Search Value"] == "(?s)(^.*$)"
    merge = nodes["Merge"]
    assert merge.type is MergeContent
    assert {k: merge.properties[k] for k in ("Header", "Footer", "Demarcator", "Maximum number of Bins")} == {
        "Header": "<", "Footer": ">", "Demarcator": ",", "Maximum number of Bins": "5"}
    # the funnel's connections selected [""]: a funnel's only relationship
    assert next(c for c in flow.connections if c.source == "funnel-1").relationships == ("success",)
    flow.validate()


def test_a_nifi_1_export_runs_as_nifi_runs_it(files, tmp_path):
    inbox, out = files
    flow = flow_from_nifi(nifi1_files_flow(str(inbox), str(out)))
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60)
    assert not final.get("timed_out")
    [merged] = list(out.iterdir())
    text = merged.read_bytes()
    assert text.startswith(b"<") and text.endswith(b">")    # header and footer, once
    assert sorted(text[1:-1].split(b",")) == sorted(b"[" + c + b"]" for c in CONTENTS.values())


def test_a_property_nifi_removes_is_accepted_and_a_renamed_one_cannot_also_hide_a_bad_value(files):
    inbox, out = files
    definition = nifi1_files_flow(str(inbox), str(out))
    listing, _, wrap = definition["flowContents"]["processors"][:3]
    listing["properties"]["Distributed Cache Service"] = "some-cache"   # NiFi 2 drops it
    flow_from_nifi(definition)
    wrap["properties"]["Line-by-Line Evaluation Mode"] = "First-Line"
    with pytest.raises(NiFiImportError, match="'Line-by-Line Evaluation Mode' = 'First-Line' is not supported"):
        flow_from_nifi(definition)


def test_an_empty_value_is_unset_as_nifi_takes_it():
    tag = processor("root", "tag", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "Store State": "Do not store state", "Stateful Variables Initial Value": "", "colour": "red"},
        auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group("root", "g", None, None, processors=[tag]), {}))
    assert flow.processors["tag"].properties == {"colour": "red"}
    tag["properties"]["Stateful Variables Initial Value"] = "0"
    with pytest.raises(NiFiImportError, match="'Stateful Variables Initial Value' = '0' is not supported"):
        flow_from_nifi(snapshot(group("root", "g", None, None, processors=[tag]), {}))
