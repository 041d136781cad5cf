"""Schemas follow the data: Avro records in the Confluent wire format mirrored between clusters that
each have a schema registry (``schemas.mode``). See ``translate`` for the invariant."""
