"""Spark analytics of RocketMQ trace data (``mq trace analyze``).

- ``schema``: the flat record schema and ``rows_from_bodies``, the seam every reader feeds (no pyspark
  at import time);
- ``transforms``: pure DataFrame -> DataFrame functions, one per report table;
- ``job``: the spark-submit entry point (launched by ``mq.trace.spark_submit``).

Only the job runner imports this package's Spark modules; the CLI uses ``mq.trace.spark_submit`` and
``mq.trace.report``, which never import pyspark.
"""
