"""All tunable settings in one object, with NiFi's defaults (docs/configuration.md lists them).

A ``Settings`` is a frozen dataclass so it can be passed to every actor unchanged and written to
JSON; ``Settings.from_dict`` rejects unknown keys with the list of known ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


class SettingsError(ValueError):
    """A setting that does not exist or has a value of the wrong kind."""


#: the lowest value each numeric setting takes, and whether that value itself is allowed
LIMITS: dict[str, tuple[float, bool]] = {
    "checkpoint_interval": (0, False), "flowfile_map_size": (1024**2, True), "content_sections": (1, True),
    "max_appendable_claim_size": (1, True), "max_flowfiles_per_claim": (0, True),
    "archive_max_retention": (0, True), "archive_max_usage_percent": (0, True), "archive_check_interval": (0, False),
    "swap_threshold": (1, True), "swap_batch_size": (1, True), "partition_swap_threshold": (1, True),
    "partition_swap_batch_size": (1, True), "back_pressure_object_threshold": (0, True),
    "back_pressure_data_size_threshold": (0, True), "provenance_rollover_interval": (0, False),
    "provenance_rollover_bytes": (1, True), "provenance_journal_count": (1, True),
    "provenance_block_size": (1, True), "provenance_index_shard_size": (1, True),
    "provenance_max_storage_time": (0, False), "provenance_max_storage_size": (1, True),
    "default_batch_size": (1, True), "administrative_yield": (0, True), "executors": (0, True),
}


@dataclass(frozen=True)
class Settings:
    # --- FlowFile repository (write-ahead log) ---
    #: fsync the content and the WAL at every commit (survives power loss); off survives the death
    #: of every process (the data is in the OS page cache), as NiFi's ``always.sync``.
    always_sync: bool = False
    #: seconds between checkpoints (NiFi 2.x: 20 s).
    checkpoint_interval: float = 20.0
    #: maximum size the LMDB map may grow to, in bytes.
    flowfile_map_size: int = 64 * 1024**3

    # --- content repository ---
    #: names of the content containers, relative to ``<repository>/content`` unless absolute.
    content_containers: tuple[str, ...] = ("default",)
    #: sections (subdirectories) a container is split into.
    content_sections: int = 1024
    #: contents are appended into one resource claim until it reaches this size (NiFi 2.x: 50 KB).
    max_appendable_claim_size: int = 50 * 1024
    #: at most this many contents per resource claim (0: no limit).
    max_flowfiles_per_claim: int = 100
    archive_enabled: bool = True
    #: seconds an archived claim is kept (NiFi 2.x: 3 h).
    archive_max_retention: float = 3 * 3600.0
    #: archived claims are removed, oldest first, while the disk is fuller than this (NiFi: 90 %).
    archive_max_usage_percent: float = 90.0
    #: seconds between runs of the archive age-off.
    archive_check_interval: float = 60.0

    # --- connection queues ---
    swap_threshold: int = 20_000
    swap_batch_size: int = 10_000
    #: the same for a load-balanced connection's partition for another node, which swaps early
    #: (as NiFi's remote partitions do): data waiting for a node should not hold memory
    partition_swap_threshold: int = 1_000
    partition_swap_batch_size: int = 1_000
    back_pressure_object_threshold: int = 10_000
    back_pressure_data_size_threshold: int = 1024**3

    # --- provenance repository ---
    provenance_enabled: bool = True
    #: names of the provenance containers, relative to ``<repository>/provenance`` unless absolute.
    provenance_containers: tuple[str, ...] = ("default",)
    #: seconds between journal rollovers (the seed's 30 s; NiFi 2.x: 10 min or 100 MB).
    provenance_rollover_interval: float = 30.0
    #: journals also roll over once they hold this many bytes (NiFi 2.x: 100 MB).
    provenance_rollover_bytes: int = 100 * 1024**2
    provenance_journal_count: int = 4
    provenance_block_size: int = 1024 * 1024
    provenance_index_shard_size: int = 500 * 1024**2
    #: seconds events are kept (the seed: 24 h; NiFi 2.x: 30 days).
    provenance_max_storage_time: float = 24 * 3600.0
    provenance_max_storage_size: int = 10 * 1024**3
    #: attributes indexed for search beyond the built-in fields (uuid, filename, ...).
    provenance_indexed_attributes: tuple[str, ...] = ()

    # --- processors ---
    #: FlowFiles a session takes from its queue at once when the processor does not say.
    default_batch_size: int = 1000
    #: seconds a processor sleeps after ``on_trigger`` raised (NiFi's administrative yield: 30 s).
    administrative_yield: float = 1.0

    # --- placement (flowactors.engine.placement) ---
    #: "shared": a few executor actors per node host many processor tasks and the queues beside
    #: them; "isolated": an actor per processor task and per queue (the first version's mapping).
    placement: str = "shared"
    #: executor actors per node with the shared placement; 0: one per CPU Ray gives the node.
    executors: int = 0

    # --- Spark (flowactors.spark; docs/spark.md lists the keys) ---
    #: the flow's Spark service: executors, executor_cores, executor_memory, start, configs, ...
    spark: dict[str, Any] = field(default_factory=dict)

    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, (low, inclusive) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, (int, float)) and (value < low or (value == low and not inclusive)):
                bound = f"at least {low}" if inclusive else f"more than {low}"
                raise SettingsError(f"setting '{name}' must be {bound}, not {value!r}")
        if self.archive_max_usage_percent > 100:
            raise SettingsError(f"setting 'archive_max_usage_percent' is a percentage (0-100), "
                                f"not {self.archive_max_usage_percent!r}")
        for name in ("content_containers", "provenance_containers"):
            if not getattr(self, name):
                raise SettingsError(f"setting '{name}' needs at least one container name")

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Settings":
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise SettingsError(f"unknown settings {unknown}; known settings are {sorted(known)}")
        converted = {}
        for name, value in values.items():
            default = known[name].default
            if isinstance(default, tuple):
                value = tuple(value) if isinstance(value, (list, tuple)) else value
            expected = type(default) if default is not dataclasses.MISSING else dict
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise SettingsError(f"setting '{name}' must be {expected.__name__}, not {value!r}")
            converted[name] = value
        return cls(**converted)


def flow_settings(flow: Any, overrides: dict[str, Any] | None = None) -> Settings:
    """A flow's settings (``Flow.settings``) with ``overrides`` on top, checked: what every engine
    runs the flow with."""
    return Settings.from_dict({**flow.settings, **(overrides or {})})
