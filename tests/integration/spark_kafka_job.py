"""A Structured Streaming job as a user writes it: Spark's Kafka source into a json file sink.

Run as ``python spark_kafka_job.py BOOTSTRAP SOURCE SINK CHECKPOINT [FORM [ISOLATION]]`` (the
Spark-checkpoint failover tests). FORM is the Kafka source's form, ``subscribe`` (the default),
``subscribePattern`` or ``assign``, and SOURCE its value: a topic, a Java regex, or the JSON
assignment ``{"topic": [0, 1, 2]}``. ISOLATION is ``kafka.isolation.level`` (``read_uncommitted``
by default, ``read_committed`` for transactional data).
"""

import sys
from pathlib import Path

from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]
LIBS = REPO / ".cache" / "spark-kafka-4.2.0" / "libs"
FORMS = ("subscribe", "subscribePattern", "assign")


def main(bootstrap: str, source: str, sink: str, checkpoint: str, form: str = "subscribe",
         isolation: str = "read_uncommitted") -> None:
    if form not in FORMS:
        raise SystemExit(f"form {form!r}: one of {FORMS}")
    if not any(LIBS.glob("*.jar")):
        raise SystemExit(f"Spark's Kafka source is not in {LIBS}: run make spark-kafka")
    spark = (SparkSession.builder.master("local[1]").appName("orders-job")
             .config("spark.jars", ",".join(str(p) for p in sorted(LIBS.glob("*.jar"))))
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option(form, source).option("kafka.isolation.level", isolation)
            .option("startingOffsets", "earliest").load()
            .selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"))
    query = (rows.writeStream.format("json").option("path", sink).option("checkpointLocation", checkpoint)
             .trigger(processingTime="1 second").start())
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:7])
