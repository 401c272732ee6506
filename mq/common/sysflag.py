"""sysFlag bits of a stored message (MESSAGE.md §3, RocketMQ ``MessageSysFlag``).

::

    bit mask  name              meaning
    --------  ----------------  ------------------------------------------------
    0x001     COMPRESSED        body is compressed (codec in bits 8-10)
    0x002     MULTI_TAGS        topic filter type MULTI_TAG (informational)
    0x00C     TRANSACTION_*     2 bits: 0x0 NOT, 0x4 PREPARED, 0x8 COMMIT, 0xC ROLLBACK
    0x010     BORNHOST_V6       BORNHOST field is 16 + 4 bytes
    0x020     STOREHOST_V6      STOREHOST field is 16 + 4 bytes
    0x040     NEED_UNWRAP       reserved
    0x080     INNER_BATCH       reserved
    0x700     COMPRESSION_TYPE  3 bits: 0x100 LZ4, 0x200 ZSTD, 0x300 ZLIB (0 also means zlib)
"""

from __future__ import annotations

COMPRESSED = 0x1
MULTI_TAGS = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
NEED_UNWRAP = 0x40
INNER_BATCH = 0x80
COMPRESSION_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300


def transaction_type(sys_flag: int) -> int:
    """The transaction type bits (``flag & 0xC``)."""
    return sys_flag & TRANSACTION_MASK


def reset_transaction_type(sys_flag: int, tran_type: int) -> int:
    """``sys_flag`` with its transaction bits replaced by ``tran_type``."""
    return (sys_flag & ~TRANSACTION_MASK) | (tran_type & TRANSACTION_MASK)


def is_zlib_compressed(sys_flag: int) -> bool:
    """True when the body is compressed with zlib (codec bits 0 or 0x300)."""
    return bool(sys_flag & COMPRESSED) and (sys_flag & COMPRESSION_MASK) in (0, COMPRESSION_ZLIB)
