"""All tunable settings in one object, with NiFi's defaults (docs/configuration.md lists them).

``Settings`` is a pydantic model: each setting's type, range and default are declared once, in
its annotation and ``Field``, and the checks follow from them; docs/configuration.md's table,
compared with the model by tests/test_settings.py (names, defaults, ranges), is the one place
saying what each setting does. It is frozen, so it can be passed to every actor unchanged, and
``to_dict`` gives plain values for JSON. Every problem with the values given is reported at once,
in one ``SettingsError``, a misspelt key with the setting it probably meant.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from flowactors.sdk.suggest import did_you_mean

#: a list of names (JSON has no tuples): read as a tuple, each name a string
Names = Annotated[tuple[str, ...], Field(strict=False, min_length=1)]


class SettingsError(ValueError):
    """Settings that do not exist or have values of the wrong kind; ``problems`` lists each, one
    sentence each, and the message joins them."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class Settings(BaseModel):
    """Every setting with its default; ``Settings(name=value, ...)`` or ``from_dict`` check the values.
    What each does: docs/configuration.md."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # --- FlowFile repository (write-ahead log) ---
    always_sync: bool = False
    checkpoint_interval: float = Field(20.0, gt=0)
    flowfile_map_size: int = Field(64 * 1024**3, ge=1024**2)

    # --- content repository ---
    content_containers: Names = ("default",)
    content_sections: int = Field(1024, ge=1)
    max_appendable_claim_size: int = Field(50 * 1024, ge=1)
    max_flowfiles_per_claim: int = Field(100, ge=0)
    archive_enabled: bool = True
    archive_max_retention: float = Field(3 * 3600.0, ge=0)
    archive_max_usage_percent: float = Field(90.0, ge=0, le=100)
    archive_check_interval: float = Field(60.0, gt=0)
    content_checksums: bool = False

    # --- connection queues ---
    swap_threshold: int = Field(20_000, ge=1)
    swap_batch_size: int = Field(10_000, ge=1)
    partition_swap_threshold: int = Field(1_000, ge=1)
    partition_swap_batch_size: int = Field(1_000, ge=1)
    back_pressure_object_threshold: int = Field(10_000, ge=0)
    back_pressure_data_size_threshold: int = Field(1024**3, ge=0)

    # --- provenance repository ---
    provenance_enabled: bool = True
    provenance_containers: Names = ("default",)
    provenance_rollover_interval: float = Field(30.0, gt=0)
    provenance_rollover_bytes: int = Field(100 * 1024**2, ge=1)
    provenance_journal_count: int = Field(4, ge=1)
    provenance_block_size: int = Field(1024 * 1024, ge=1)
    provenance_index_shard_size: int = Field(500 * 1024**2, ge=1)
    provenance_max_storage_time: float = Field(24 * 3600.0, gt=0)
    provenance_max_storage_size: int = Field(10 * 1024**3, ge=1)
    provenance_indexed_attributes: Annotated[tuple[str, ...], Field(strict=False)] = ()

    # --- processors ---
    default_batch_size: int = Field(1000, ge=1)
    administrative_yield: float = Field(1.0, ge=0)
    long_trigger_seconds: float = Field(30.0, gt=0)
    stop_grace_seconds: float = Field(5.0, ge=0)

    # --- placement (flowactors.engine.placement) ---
    placement: Literal["shared", "isolated"] = "shared"
    executors: int = Field(0, ge=0)

    # --- Spark (flowactors.spark; docs/spark.md lists the keys) ---
    spark: dict[str, Any] = Field(default_factory=dict)

    extra: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise SettingsError(_problems(err)) from None

    def replace(self, **changes: Any) -> "Settings":
        """A copy with ``changes``, checked as any settings are."""
        return type(self)(**{**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Settings":
        """Settings from a flow's ``settings`` object: JSON values (lists for tuples) checked."""
        return cls(**{str(name): value for name, value in values.items()})


def value_range(name: str) -> str:
    """The range a numeric setting takes, in words ("at least 1", "from 0 to 100"); empty for
    other settings. Said in the message of a value outside it, and in docs/configuration.md."""
    low = high = None
    inclusive = True
    for rule in Settings.model_fields[name].metadata:
        if getattr(rule, "ge", None) is not None:
            low = rule.ge
        if getattr(rule, "gt", None) is not None:
            low, inclusive = rule.gt, False
        if getattr(rule, "le", None) is not None:
            high = rule.le
    if low is None:
        return ""
    low, high = _number(low), _number(high)
    if high is not None:
        return f"from {low} to {high}"
    return f"at least {low}" if inclusive else f"more than {low}"


def _number(value: float | None) -> int | float | None:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _kind(field: FieldInfo) -> str:
    """What a setting's value must be, as a user writes it in JSON."""
    annotation = field.annotation
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "a whole number"
    if annotation is float:
        return "a number"
    if getattr(annotation, "__origin__", None) is Literal:
        return "one of " + ", ".join(repr(v) for v in annotation.__args__)
    if getattr(annotation, "__origin__", None) is tuple:
        return "a list of strings"
    return "an object"


def _problems(err: ValidationError) -> list[str]:
    """One sentence per problem pydantic found, in the words of docs/configuration.md: unknown
    names first, then wrong values in the order of the table."""
    known = list(Settings.model_fields)
    unknown, problems = [], []
    for error in err.errors():
        name = str(error["loc"][0]) if error["loc"] else "?"
        if error["type"] == "extra_forbidden":
            unknown.append(f"unknown setting '{name}'; {did_you_mean(name, known, 'the settings are')}")
            continue
        field = Settings.model_fields.get(name)
        if field is None:
            problems.append(f"setting '{name}': {error['msg']}")
        elif error["type"] in ("greater_than", "greater_than_equal", "less_than_equal"):
            problems.append(f"setting '{name}' must be {value_range(name)}, not {error['input']!r}")
        elif error["type"] == "too_short":   # pydantic says it of [1] too, counting the names that passed
            if not error["input"]:
                problems.append(f"setting '{name}' needs at least one name")
        elif len(error["loc"]) > 1:   # an item of a list
            problems.append(f"setting '{name}' must be {_kind(field)} (item {error['loc'][1]} is {error['input']!r})")
        else:
            problems.append(f"setting '{name}' must be {_kind(field)}, not {error['input']!r}")
    return unknown + list(dict.fromkeys(problems))


def flow_settings(flow: Any, overrides: Mapping[str, Any] | None = None) -> Settings:
    """A flow's settings (``Flow.settings``) with ``overrides`` on top, checked: what every engine
    runs the flow with."""
    return Settings.from_dict({**flow.settings, **(overrides or {})})
