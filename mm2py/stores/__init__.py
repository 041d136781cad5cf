"""State the replicator keeps in compacted topics of its own, read by several packages.

``positions``: mirroring progress in MM2's ``mm2-offsets`` format (source, checkpoint, audit and
ops read it); ``ledger``: the source partitions a flow found gone back or with a gap (source
writes it; checkpoint, ops and the metrics read it). Neither imports a package above kafka/config.
"""
