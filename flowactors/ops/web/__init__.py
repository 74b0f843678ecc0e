"""``flowactors ui``: a running flow's page in the browser (docs/ui.md).

``server.FlowPage`` serves it from the flow's driver; ``address`` is the file that tells
``flowactors ui`` where it is. The lineage is drawn by ``flowactors.ops.lineage_render`` from
the condensed view (``flowactors.ops.lineage_view``), as the CLI draws it.
"""
