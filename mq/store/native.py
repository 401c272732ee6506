"""The store's optional C extensions (``_append.c``, ``_index.c``, ``_consume_queue.c``): ``mq.common.native``
decides whether they are used (not built, or ``MQ_PURE_PYTHON=1``: the Python twins, which write the same bytes).
"""

from __future__ import annotations

from mq.common.native import PURE_PYTHON_ENV, load

__all__ = ["PURE_PYTHON_ENV", "load"]
