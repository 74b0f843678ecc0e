"""Record readers and writers (one module a format) and the schema registry, as controller services."""
