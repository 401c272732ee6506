"""Where the job imports pyspark from: the installed package rather than spark-submit's zips, when they match.

spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` and its py4j zip first on the job's ``sys.path``.
Python caches no bytecode for modules imported from a zip, so every job compiled pyspark's sources again (0.8 s
of CPU on the 2-core machine, before the job did anything). When the zip is the one inside an installed pyspark
package (pip's layout: ``<site>/pyspark/python/lib/pyspark.zip``, with ``SPARK_HOME`` being that package), the
package next to it is the same code with its bytecode cached. A ``SPARK_HOME`` distribution keeps its zips.

Imported by ``job.py`` before pyspark; imports nothing of pyspark itself.
"""

from __future__ import annotations

import os
from pathlib import Path


def bundled_zips(path: list[str]) -> list[str]:
    """The entries of ``path`` that are zips bundled inside an installed pyspark package whose own modules
    (``pyspark``, or ``py4j`` for a py4j zip) can be imported from a directory also on ``path``."""
    on_path = {os.path.realpath(e) for e in path if e}
    out = []
    for entry in path:
        zip_path = Path(entry)
        if zip_path.suffix != ".zip" or zip_path.parent.name != "lib" or zip_path.parent.parent.name != "python":
            continue
        package = zip_path.parent.parent.parent
        name = "pyspark" if zip_path.name == "pyspark.zip" else "py4j" if zip_path.name.startswith("py4j-") else None
        site = package.parent
        if (name is not None and package.name == "pyspark" and (site / name / "__init__.py").is_file()
                and os.path.realpath(site) in on_path):
            out.append(entry)
    return out


def prefer_installed_pyspark(path: list[str]) -> None:
    """Remove ``bundled_zips`` from ``path`` (``sys.path``), in place."""
    for entry in bundled_zips(path):
        path.remove(entry)
