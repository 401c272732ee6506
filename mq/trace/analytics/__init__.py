"""Spark analytics of RocketMQ trace data (``mq trace analyze``).

- ``schema``: the flat record schema and ``rows_from_bodies``, the Python reference decoder of trace
  bodies into rows (no pyspark at import time);
- ``sql_decode``: the same decoding in Spark SQL, which the readers use: Python hands Spark one row per
  trace message (inflated text), Spark splits and decodes its records;
- ``message_frames``: the per-message frames (published messages, deliveries, message x group facts);
- ``transforms``: pure DataFrame -> DataFrame functions, one per report table;
- ``summary``: the record-level tables' shared aggregation (one Spark job for all of them);
- ``readers``: the job's inputs (live brokers, Parquet archive, raw JSONL) as record frames;
- ``analysis`` and ``archive_export``: the job's two modes; ``table_writer`` runs and writes the report tables;
- ``session_settings``: the SparkSession and the SQL settings sized to the input;
- ``job``: the spark-submit entry point (launched by ``mq.trace.spark_submit``).

Only the job runner imports this package's Spark modules; the CLI uses ``mq.trace.spark_submit`` and
``mq.trace.report``, which never import pyspark.
"""
