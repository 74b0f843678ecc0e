"""Settings: every problem said at once, in the words of docs/configuration.md, whose table is
compared with the model here so the two cannot drift apart."""

import json
import re
from pathlib import Path

import pytest

from flowactors.sdk.settings import Settings, SettingsError, flow_settings, value_range

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def refused(values: dict) -> str:
    with pytest.raises(SettingsError) as caught:
        Settings.from_dict(values)
    return str(caught.value)


def test_a_negative_swap_threshold_is_refused_with_its_range():
    assert refused({"swap_threshold": -5}) == "setting 'swap_threshold' must be at least 1, not -5"


def test_a_misspelt_setting_gets_a_suggestion():
    assert refused({"swap_treshold": 10}) == "unknown setting 'swap_treshold'; did you mean 'swap_threshold'?"


def test_a_name_like_no_setting_lists_them_all():
    message = refused({"colour": "blue"})
    assert message.startswith("unknown setting 'colour'; the settings are: always_sync, checkpoint_interval, ")
    assert message.endswith(", spark, extra")


def test_every_problem_is_said_in_one_message():
    assert refused({"swap_treshold": 1, "checkpoint_interval": 0, "archive_max_usage_percent": 150,
                    "always_sync": "yes", "default_batch_size": True, "content_containers": [],
                    "provenance_containers": ["a", 3], "placement": "everywhere"}) == (
        "unknown setting 'swap_treshold'; did you mean 'swap_threshold'?; "
        "setting 'always_sync' must be true or false, not 'yes'; "
        "setting 'checkpoint_interval' must be more than 0, not 0; "
        "setting 'content_containers' needs at least one name; "
        "setting 'archive_max_usage_percent' must be from 0 to 100, not 150; "
        "setting 'provenance_containers' must be a list of strings (item 1 is 3); "
        "setting 'default_batch_size' must be a whole number, not True; "
        "setting 'placement' must be one of 'shared', 'isolated', not 'everywhere'")


def test_a_list_with_a_wrong_name_is_not_also_said_to_be_empty():
    assert refused({"content_containers": [1]}) == (
        "setting 'content_containers' must be a list of strings (item 0 is 1)")


def test_json_values_become_the_settings_types():
    settings = Settings.from_dict({"checkpoint_interval": 5, "content_containers": ["a", "b"], "executors": 2})
    assert settings.checkpoint_interval == 5.0 and isinstance(settings.checkpoint_interval, float)
    assert settings.content_containers == ("a", "b")
    assert settings.replace(executors=3).executors == 3 and settings.executors == 2
    assert Settings.from_dict(settings.to_dict()) == settings


def test_values_set_in_code_and_copies_are_checked_too():
    with pytest.raises(SettingsError, match="setting 'content_sections' must be at least 1, not 0"):
        Settings(content_sections=0)
    with pytest.raises(SettingsError, match="setting 'executors' must be at least 0, not -1"):
        Settings().replace(executors=-1)
    with pytest.raises(Exception):   # frozen: passed to every actor unchanged
        Settings().executors = 2


def test_flow_settings_put_overrides_on_the_flows_own():
    class Flow:
        settings = {"executors": 2, "swap_threshold": 5}

    assert flow_settings(Flow, {"swap_threshold": 7}).swap_threshold == 7
    with pytest.raises(SettingsError, match="did you mean 'executors'"):
        flow_settings(Flow, {"executor": 1})


def documented() -> dict[str, tuple[str, str, str]]:
    """Each row of docs/configuration.md's settings table: name -> (default cell, range cell, note)."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\| `(\w+)` \| (.*?) \| (.*?) \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3).strip(), match.group(4).strip())
    return rows


def test_the_documented_table_is_the_model():
    rows = documented()
    assert sorted(rows) == sorted(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        default_cell, range_cell, note = rows[name]
        default = field.get_default(call_default_factory=True)
        literal = re.match(r"`([^`]*)`", default_cell).group(1)
        assert json.loads(literal) == (list(default) if isinstance(default, tuple) else default), name
        assert range_cell == value_range(name), name
        assert note, name   # what the setting does is said here, and only here
