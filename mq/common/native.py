"""The optional C extensions (the store's ``_append.c``, ``_index.c``, ``_consume_queue.c``, the protocol's
``_codec.c``, the properties reader ``mq/common/_properties.c``; built by setup.py where a compiler is).

One place decides whether they are used: a module that is not built, or ``MQ_PURE_PYTHON=1`` in the environment,
gives None for each function, and the callers run their Python twins, which give the same results.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

#: set to a non-empty value to run on the Python code alone (comparisons, debugging)
PURE_PYTHON_ENV = "MQ_PURE_PYTHON"


def load(module: str, *names: str) -> tuple[Any, ...]:
    """The functions ``names`` of the extension ``module``, or a None for each where it is not to be used."""
    if os.environ.get(PURE_PYTHON_ENV):
        return (None,) * len(names)
    try:
        mod = importlib.import_module(module)
    except ImportError:  # not built on this install
        return (None,) * len(names)
    return tuple(getattr(mod, n) for n in names)
