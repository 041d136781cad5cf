"""The driver side of the source connector: which topics, the ranges of each micro-batch, and the commit.

Runs in the Spark driver (the source runner process). Imports the shared contract in
``mm2py.source`` (ranges, provenance, sync_writer, sync_history), never ``mm2py.source.copy``.
"""
