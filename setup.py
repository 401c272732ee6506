"""Build hook for the optional C part of the commit log's writer (everything else is in pyproject.toml).

``optional=True``: where no C compiler is available the install goes on without it and the store uses its
pure-Python writer (``mq.store.commit_log``), which writes the same bytes.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mq.store._append", ["mq/store/_append.c"], optional=True,
                             libraries=["z"], extra_compile_args=["-O2", "-Wall"])])
