"""Reading a flow definition's JSON objects: each entry of a list of processors, services or
connections, its fields checked against a dataclass's (kind, unknown keys with "did you mean"), and
property values turned into the text components read."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Iterable, NamedTuple, Sequence

from flowactors.sdk.processor import Component
from flowactors.sdk.suggest import did_you_mean


def property_texts(processor_type: type[Component], values: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Property values as the text processors read (numbers and booleans written as text), and
    a problem for each value that has none to give (null, a list, an object), which is left out."""
    texts, problems = {}, []
    descriptors = processor_type.descriptor_map()
    for key, value in values.items():
        if isinstance(value, bool):
            texts[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            texts[key] = str(value)
        else:
            default = getattr(descriptors.get(key), "default", None)
            leave_out = f"leave it out to take its default ({default!r})" if default is not None else "leave it out"
            problems.append(f"property '{key}' is {json_kind(value)}; give its value as a string "
                            f"(\"{key}\": \"...\"), or {leave_out}")
    return texts, problems


def entries(entries: Any, kind: str, own: tuple[str, ...], table: dict[str, JsonField], problems: list[str]
             ) -> Iterable[tuple[str, dict, dict | None]]:
    """Each object of a definition's list of processors or connections, as (a label naming it,
    the object, its fields read by ``read_fields``, or None when one is wrong); an entry that is
    not an object, and a key that is neither one of ``own`` nor of ``table``, are problems."""
    if entries is not None and not isinstance(entries, list):
        problems.append(f"'{kind.replace(' ', '_')}s' must be a list of objects, not {json_kind(entries)}")
        return
    for number, entry in enumerate(entries or [], 1):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"{kind} '{name}'" if isinstance(name, str) and name else f"{kind} {number}"
        if not isinstance(entry, dict):
            problems.append(f"{label}: must be an object, not {json_kind(entry)}")
            continue
        problems.extend(f"{label}: {unknown_key(k, (*own, *table), f'a {kind} field')}"
                        for k in entry if k not in own and k not in table)
        fields, wrong = read_fields(entry, table)
        problems.extend(f"{label}: {p}" for p in wrong)
        yield label, entry, None if wrong else fields


class JsonField(NamedTuple):
    """What a definition's field takes: ``kind`` is ``str``, ``int``, ``float``, ``bool``,
    ``tuple`` (a list of names) or ``dict`` (an object); a ``required`` one must be given."""

    kind: type
    required: bool


def json_fields(cls: type, leave_out: Sequence[str]) -> dict[str, JsonField]:
    """The definition's fields of dataclass ``cls`` (but ``leave_out``), from its annotations: the
    one table of JSON kinds ``read_fields`` checks. A field without a default is required, but
    ``name`` (a name left out is made up by ``Flow.add`` and ``Flow.connect``)."""
    hints = typing.get_type_hints(cls)
    table = {}
    for f in dataclasses.fields(cls):
        if f.name in leave_out:
            continue
        hint = hints[f.name]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):   # ``X | None``
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        required = (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                    and f.name != "name")
        table[f.name] = JsonField(typing.get_origin(hint) or hint, required)
    return table


#: words for each JSON kind, in a problem
_KIND_WORDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false",
               tuple: "a list of names", dict: "an object"}


def read_fields(entry: dict, table: dict[str, JsonField]) -> tuple[dict[str, Any], list[str]]:
    """The fields of a definition's ``entry`` that ``table`` names, and a problem for each one of
    the wrong JSON kind (naming the field and the kind it takes) or required and not given. Null
    in a field that is not required takes its default, as if left out; a relationship may be
    one string."""
    values, problems = {}, []
    for key, (kind, required) in table.items():
        value = entry.get(key)
        if value is None:
            if required:
                problems.append(f"'{key}' must be {_KIND_WORDS[kind]}, not null" if key in entry else
                                f"'{key}' is missing")
            continue
        if key == "relationships" and isinstance(value, str):
            value = [value]
        if kind is tuple:
            right = isinstance(value, list) and all(isinstance(v, str) for v in value)
        elif kind in (int, float):   # JSON's true and false are not numbers; a float takes 5 too
            right = isinstance(value, (int, kind)) and not isinstance(value, bool)
        else:
            right = isinstance(value, kind)
        if right:
            values[key] = value
        else:
            problems.append(f"'{key}' must be {_KIND_WORDS[kind]}, not {json_kind(value)}")
    return values, problems


#: the JSON kind of each field of a definition's processor and connection (``read_fields``)


def properties_of(entry: dict, label: str, problems: list[str]) -> dict:
    """An entry's ``properties`` object ({} and a problem when it is not one)."""
    properties = entry.get("properties") or {}
    if not isinstance(properties, dict):
        problems.append(f"{label}: 'properties' must be an object of property names and values, "
                        f"not {json_kind(properties)}")
        return {}
    return properties


def json_kind(value: Any) -> str:
    """What a JSON value is, in the definition's words."""
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def unknown_key(key: str, known: Sequence[str], what: str) -> str:
    return f"'{key}' is not {what}; {did_you_mean(key, known, 'the fields are')}"
