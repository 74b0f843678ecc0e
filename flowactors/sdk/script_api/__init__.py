"""NiFi's scripting API for Python scripts: what ExecuteScript, InvokeScriptedProcessor and
ScriptedLookupService scripts see (docs/scripting.md).

* ``script``: the scripted components' properties, reading and compiling a script once, running it;
* ``loader``: the imports a script sees while it runs (a meta path finder, on its thread only);
* ``session``: the bindings (``session``, ``context``, ``log``, FlowFiles, property values) as
  NiFi's Java API over flowactors' session and context;
* ``java`` and ``nifi``: the Java and NiFi classes published scripts import.
"""
