"""The executor side of the source connector: one copy task, from its fetches to its acknowledged writes.

Runs in Spark's Python workers (``task`` is the entry). Imports the shared contract in
``mm2py.source`` (ranges, provenance, sync_writer, sync_history), never ``mm2py.source.plan``.
"""
