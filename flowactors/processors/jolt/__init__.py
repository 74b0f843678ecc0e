"""Jolt, the JSON-to-JSON transformation language, and NiFi's JoltTransformJSON processor.

One module a concept: paths.py (spec keys, references, output paths), shift.py, default.py,
remove.py, cardinality.py, modify.py with functions.py (its function library), sort.py, chain.py
(Chain, and compiling any operation by name), processor.py (JoltTransformJSON). docs/jolt.md
describes the language and every difference from Jolt and NiFi.
"""
