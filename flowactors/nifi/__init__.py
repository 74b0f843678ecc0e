"""NiFi interoperability: flows exported from NiFi (``flow_definition``) and the standard processors
they may use (``standard_processors``)."""
