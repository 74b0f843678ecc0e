"""A flow's controller services as the flow page shows them (NiFi's "Controller Services" listing
and, on a processor's configuration, the services its properties name).

What leaves here goes to the browser, so a sensitive property's value never does: only whether it
is set. A service's values are shown as the flow was given them (``ServiceNode.properties``),
parameters unresolved (``#{name}``), so what a parameter resolves to never reaches the page
through a property that names it. A property naming a service (a processor's or a service's) is
resolved as the flow resolves it (``flowactors.sdk.services.visible_services``, on the resolved
values) to the path of the service it reaches: a service's name is all that shows of it.
"""

from __future__ import annotations

from typing import Any

from flowactors.sdk import services as svc
from flowactors.sdk.flow import Flow


def services_view(flow: Flow) -> list[dict[str, Any]]:
    """One entry a service of ``flow``, in the flow's order: ``path``, ``name``, ``group`` (``""``:
    the flow's own), ``type`` (class name), ``type_name`` (what a definition names),
    ``apis`` (the service APIs it provides), ``properties`` (``property_rows``) and ``used_by``:
    the processors that use it, directly or through another service, as ``flowactors validate``
    lists them (``Flow.services_used_by``)."""
    nodes = list(flow.services.values())
    used = {name: {s.path for s in flow.services_used_by([name])} for name in flow.processors}
    return [{"path": node.path, "name": node.name, "group": node.group, "type": node.type.__name__,
             "type_name": node.type.type_name(), "apis": [api.__name__ for api in node.type.apis()],
             "properties": property_rows(node, svc.visible_services(nodes, node.group)),
             "used_by": [name for name in flow.processors if node.path in used[name]]}
            for node in nodes]


def property_rows(node: svc.ServiceNode, visible: dict[str, svc.ServiceNode]) -> list[dict[str, Any]]:
    """Every property of a service, declared ones first in their order, then its dynamic ones:
    ``name``; ``value`` (as given, else the default; None when unset, and always None for a
    sensitive property); ``set`` (a value, given or default); ``sensitive``; ``default`` (the
    value is the default); ``service``: the path of the service it names, or None."""
    descriptors = node.type.descriptor_map()
    named = svc.references(node.type, node.property_values)
    rows = []
    for name in [*descriptors, *(n for n in node.properties if n not in descriptors)]:
        descriptor = descriptors.get(name)
        given = node.properties.get(name)
        value = given if given is not None else (descriptor.default if descriptor else None)
        sensitive = bool(descriptor and descriptor.sensitive)
        target = visible.get(named[name]) if name in named else None
        rows.append({"name": name, "value": None if sensitive else value, "set": value is not None,
                     "sensitive": sensitive, "default": given is None and value is not None,
                     "service": target.path if target else None})
    return rows


def processors_view(flow: Flow) -> dict[str, dict[str, Any]]:
    """Each processor of ``flow`` by name: ``type`` (class name), ``group`` (the process group its
    name gives), ``services``: its properties that name a service, in its declared order, each
    ``{"property", "reference"`` (the value), ``"service"`` (the path it reaches; None when none
    is in reach)``}``."""
    nodes = list(flow.services.values())
    view = {}
    for name, node in flow.processors.items():
        group = svc.group_of(name)
        visible = svc.visible_services(nodes, group)
        view[name] = {"type": node.type.__name__, "group": group,
                      "services": [{"property": prop, "reference": ref,
                                    "service": visible[ref].path if ref in visible else None}
                                   for prop, ref in svc.references(node.type, node.property_values).items()]}
    return view
