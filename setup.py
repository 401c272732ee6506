"""Build hook for the optional C parts (everything else is in pyproject.toml): the commit log's record writer
(``mq.store._append``), the index's key hashing and entry writer (``mq.store._index``), the dispatcher's
consume-queue unit writer (``mq.store._consume_queue``), the remoting frame codec (``mq.protocol._codec``) and
the message properties reader (``mq.common._properties``).

``optional=True``: where no C compiler is available the install goes on without them and the package uses its
pure-Python code (``mq.store.commit_log``, ``mq.store.index_service``, ``mq.store.index_file``,
``mq.store.consume_queue``, ``mq.protocol.codec``, ``mq.common.properties``), which gives the same bytes.
"""

from setuptools import Extension, setup

_HEADERS = ["mq/store/_jhash.h", "mq/store/_bigendian.h", "mq/store/_fastargs.h"]

setup(ext_modules=[
    Extension("mq.store._append", ["mq/store/_append.c"], depends=_HEADERS, optional=True, libraries=["z"],
              extra_compile_args=["-O2", "-Wall"]),
    Extension("mq.store._index", ["mq/store/_index.c"], depends=_HEADERS, optional=True,
              extra_compile_args=["-O2", "-Wall"]),
    Extension("mq.store._consume_queue", ["mq/store/_consume_queue.c"], depends=_HEADERS, optional=True,
              extra_compile_args=["-O2", "-Wall"]),
    Extension("mq.protocol._codec", ["mq/protocol/_codec.c", "mq/protocol/_codec_json.c",
                                     "mq/protocol/_codec_headers.c"], depends=["mq/protocol/_codec.h"],
              optional=True, extra_compile_args=["-O2", "-Wall"]),
    Extension("mq.common._properties", ["mq/common/_properties.c"], optional=True,
              extra_compile_args=["-O2", "-Wall"]),
])
