"""Runs the report tables' Spark jobs side by side and keeps their rows; writes each as Parquet and CSV."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from mq.trace.analytics.stage_progress import Progress


def collect_rows(df: DataFrame) -> list[dict[str, Any]]:
    """The rows of ``df`` as dicts (nested rows too)."""
    return [r.asDict(recursive=True) for r in df.collect()]


class TableWriter:
    """Collects each table once, writes it as Parquet under tables/ and as CSV under csv/, keeps its rows.

    Report tables are small, so Spark's per-job latency dominates; ``run`` executes many tables'
    jobs concurrently from a thread pool (Spark schedules jobs of different threads side by side). The
    CSV is written from the collected rows on the driver (no second Spark job).
    """

    def __init__(self, spark: SparkSession, out: str, progress: Progress, threads: int = 4,
                 write: bool = True) -> None:
        self.write = write
        self.spark = spark
        self.out = out
        self.progress = progress
        self.threads = threads
        self.outputs: dict[str, str] = {}
        self.csv: dict[str, str] = {}

    def _one(self, name: str, build: Callable[[], DataFrame], empty: bool = False) -> list[dict[str, Any]]:
        if empty and not self.write:
            return []
        self.spark.sparkContext.setJobDescription(f"mq trace analyze: table {name}")  # per thread
        df = build()
        rows = [] if empty else df.collect()
        if not self.write:
            return [r.asDict(recursive=True) for r in rows]
        rel = os.path.join("tables", name)
        self.spark.createDataFrame(rows, df.schema).coalesce(1).write.mode("overwrite").parquet(
            os.path.join(self.out, rel)
        )
        self.outputs[name] = rel
        dicts = [r.asDict(recursive=True) for r in rows]
        self.csv[name] = write_csv(os.path.join(self.out, "csv"), name, df.columns, dicts)
        return dicts

    def run(self, tables: dict[str, Callable[[], DataFrame]], empty: Collection[str] = ()
            ) -> dict[str, list[dict[str, Any]]]:
        """Every table's rows, each table built by its function in a worker thread; those named in ``empty``
        are known to have none and run no Spark job (nor are they built, unless they are written)."""
        out: dict[str, list[dict[str, Any]]] = {}
        with ThreadPoolExecutor(self.threads, thread_name_prefix="mq-trace-table") as pool:
            futures = {pool.submit(self._one, name, build, name in empty): name for name, build in tables.items()}
            for fut in as_completed(futures):
                name = futures[fut]
                out[name] = fut.result()
                self.progress(f"table:{name}", f"rows={len(out[name])}")
        return out


def write_csv(directory: str, name: str, columns: list[str], rows: list[dict[str, Any]]) -> str:
    """``directory/name.csv`` with a header row; nested values as JSON. Returns the relative path."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else json.dumps(r[c]) if isinstance(r[c], (dict, list)) else r[c]
                        for c in columns])
    return os.path.join("csv", f"{name}.csv")
