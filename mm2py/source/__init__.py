"""The source-data connector's core: planning ranges on the driver, copying them in tasks.

``plan/`` runs in the Spark driver, ``copy/`` in Spark's Python workers; the modules here are
the contract both sides share: ranges (the unit of work and its result), provenance, sync_writer
and sync_history.
"""
