"""MM2's connector transforms (Kafka Connect SMTs) on the mirrored records: the keys, the chain, the built-ins.

An MM2 file names a chain with ``transforms = a, b`` and configures each link with
``transforms.<name>.type`` and the transform's own keys, ``transforms.<name>.predicate`` and
``.negate``; predicates likewise under ``predicates``. Top level and ``A->B.`` keys merge key by
key, the flow's winning (``FlowConfig.raw``), as they reach MM2's connectors.

Records are transformed as MM2's source connector hands them to Connect: bytes, already named
for the remote topic (so ``TopicNameMatches`` sees ``A.orders``), headers as they came.

A ``transforms.<name>.type`` outside ``org.apache.kafka.`` is a Python class by dotted path
(``mypkg.module.ClassName``): the contract is ``RecordTransform``. It is imported and constructed
at start, so a path that does not import, a missing class or a constructor that refuses its keys
stops the start naming the key. A class with ``batch_format = "arrow"`` (or ``"pandas"``) is a batch
transform (``BatchTransform``): it gets a source batch's records of one partition as one Arrow
batch (or DataFrame) and returns them dropped or changed, offsets kept; it must be row-wise. In a
``schemas.mode = translate`` flow a record transform with ``decoded = True`` (``DecodedTransform``)
gets each Avro value decoded with the source registry and returns the new value, written back with
the same schema and carried to the target registry's id (``mm2py.transforms.decoded``).

Invariants:
- a chain runs its links in the order ``transforms`` lists them; a link with a predicate runs
  only where the predicate holds (``negate`` inverts it); a record dropped by a link reaches no
  later link;
- a transform or predicate class mm2py does not implement is refused at start, naming the key
  (``TransformError``): never skipped;
- transforms are pure functions of the record: no I/O, no state across records (Connect's
  built-ins are; a Python transform promises it, ``RecordTransform``);
- a Python transform that raises, or returns anything but a ``Record`` or None (a batch transform:
  a batch of its contract), fails the copy with ``LinkFailed`` (the writer names the flow and the
  record: ``TransformFailedError``), never a skipped record.
"""

from mm2py.transforms.batch import BATCH_SCHEMA, BatchTransform
from mm2py.transforms.build import chain_for, check_flows, flow_chain, refusal, source_registry, transform_keys
from mm2py.transforms.chain import (
           Chain,
           Link,
           LinkFailed,
           Predicate,
           Record,
           RecordTransform,
           Transform,
           TransformError,
)
from mm2py.transforms.decoded import DecodedTransform

__all__ = ["BATCH_SCHEMA", "BatchTransform", "Chain", "DecodedTransform", "Link", "LinkFailed", "Predicate", "Record",
           "RecordTransform", "Transform", "TransformError", "chain_for", "check_flows", "flow_chain", "refusal",
           "source_registry", "transform_keys"]
