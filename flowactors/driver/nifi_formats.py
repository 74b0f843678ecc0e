"""The shapes NiFi and NiFi Registry write a flow in, read as the one the import takes.

The import (``nifi_export``) reads a flow definition: an object whose ``flowContents`` is the
process group, with ``parameterContexts`` by name (and ``externalControllerServices``). NiFi and
NiFi Registry write that definition in several wrappings; ``nifi_definition`` unwraps each:

* NiFi's **Download flow definition** and NiFi Registry's export of a version (a
  ``VersionedFlowSnapshot``: ``snapshotMetadata``, ``flow``, ``bucket`` around ``flowContents``):
  the definition as it is;
* a version as **NiFi Registry stores it** (its flow storage): ``{"header": {"dataModelVersion":
  "3"}, "content": {"flowSnapshot": <snapshot>}}``, or with data model 2 and older
  ``{"header": ..., "content": <process group>}`` (a group alone: no parameter contexts);
* the snapshot as **NiFi's REST API** wraps it (``VersionedFlowSnapshotEntity``,
  ``ProcessGroupImportEntity``): ``{"versionedFlowSnapshot": <snapshot>, ...}``;
* a NiFi instance's **flow.json.gz** (a ``VersionedDataflow``, NiFi 1.16 and later, 1.x and 2.x
  alike): ``{"encodingVersion", "rootGroup", "parameterContexts": [...], "controllerServices",
  "reportingTasks", ...}``. Its parameter contexts are a list (a definition has them by name) and
  its sensitive values are encrypted with the instance's key (``enc{...}``), which flowactors
  cannot read: they are left out as a download leaves them out (a sensitive parameter is then read
  from the environment, docs/nifi-flows.md). Its controller-level services serve reporting tasks
  only (no processor can reference them): they are not read; its reporting tasks and connectors
  (NiFi 2's, each running a flow of its own) are kept for the import to report.

Gzip (flow.json.gz) is undone by the caller (``flowactors.driver.loading``).
"""

from __future__ import annotations

from typing import Any, Mapping

#: how NiFi marks a value encrypted with the instance's sensitive-properties key (flow.json.gz)
ENCRYPTED = ("enc{", "}")


def nifi_definition(data: Any) -> dict[str, Any] | None:
    """The NiFi flow definition ``data`` holds in any of the shapes of the module docstring, or
    None when ``data`` is none of them (a flowactors definition, say)."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("flowContents"), dict):
        return data
    if isinstance(data.get("versionedFlowSnapshot"), dict):
        return nifi_definition(data["versionedFlowSnapshot"])
    content = data.get("content")
    if isinstance(data.get("header"), dict) and isinstance(content, dict):
        if isinstance(content.get("flowSnapshot"), dict):
            return nifi_definition(content["flowSnapshot"])
        return {"flowContents": content}   # data model 2: the process group alone
    if isinstance(data.get("rootGroup"), dict) and "encodingVersion" in data:
        return _from_dataflow(data)
    return None


def _from_dataflow(dataflow: Mapping[str, Any]) -> dict[str, Any]:
    """A NiFi instance's flow.json (``VersionedDataflow``) as a definition (the module docstring)."""
    contexts: dict[str, Any] = {}
    for index, context in enumerate(dataflow.get("parameterContexts") or []):
        if not isinstance(context, dict):
            contexts[f"parameterContexts[{index}]"] = context   # the shape check names it
            continue
        parameters = [_parameter(p) for p in context.get("parameters") or []] \
            if isinstance(context.get("parameters"), list) else context.get("parameters")
        contexts[str(context.get("name") or context.get("identifier") or index)] = {**context, "parameters": parameters}
    return {"flowContents": _without_encrypted(dataflow["rootGroup"]), "parameterContexts": contexts,
            "reportingTasks": dataflow.get("reportingTasks"), "connectors": dataflow.get("connectors")}


def _encrypted(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(ENCRYPTED[0]) and value.endswith(ENCRYPTED[1])


def _parameter(parameter: Any) -> Any:
    """A parameter of flow.json, its encrypted value left out and marked sensitive."""
    if isinstance(parameter, dict) and _encrypted(parameter.get("value")):
        return {key: value for key, value in parameter.items() if key != "value"} | {"sensitive": True}
    return parameter


def _without_encrypted(value: Any) -> Any:
    """``value`` (a part of flow.json) with every encrypted property value unset (null), as NiFi's
    download of the same flow leaves sensitive values out; a copy, the input is not changed."""
    if isinstance(value, dict):
        return {key: None if _encrypted(item) else _without_encrypted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_encrypted(item) for item in value]
    return value
