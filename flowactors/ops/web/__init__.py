"""``flowactors ui``: a running flow's page in the browser (docs/ui.md).

``server.FlowPage`` serves it from the flow's driver; ``address`` is the file that tells
``flowactors ui`` where it is; ``lineage_view`` is where the page draws a lineage.
"""
