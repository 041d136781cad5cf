"""A batch source that only starts Python workers with the data path imported.

Spark keeps Python workers per kind of job; those that run Python data sources are not the
ones an RDD job starts. Reading this source once at start-up leaves one warm worker per
core for the flows' first micro-batches (``mm2py.engine.driver.warm_python_workers``).
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType


class Slot(InputPartition):
    def __init__(self, slot: int):
        self.slot = slot


class WarmupDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm2py_warmup"

    def schema(self) -> str:
        return "slot int"

    def reader(self, schema: StructType) -> DataSourceReader:
        return WarmupReader(int(self.options.get("slots", "1")))


class WarmupReader(DataSourceReader):
    def __init__(self, slots: int):
        self.slots = slots

    def partitions(self) -> list[InputPartition]:
        return [Slot(i) for i in range(self.slots)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        import pyarrow  # noqa: F401 - rows go back to the JVM as Arrow

        import mm2py.source.copy.copier  # noqa: F401 - importing is the point
        from mm2py import worker

        assert isinstance(partition, Slot)
        yield (partition.slot,)
        worker.settle()  # the imports are long-lived: the first copy task's collection skips them
