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

Who decides which bits: a producer chooses how its body is compressed, its tag filter type and (for a
transactional message) the transaction type: ``PRODUCER_BITS``. The bits that describe how a record is laid out
in the log (the host address families, which move every later field; the 5.x inner-batch bits, which change how
the body is read) are the store's alone: it sets them from what it writes and never takes them from a request
(``store_sys_flag``). The send path keeps only what a plain send may choose (``sent_sys_flag``); a transaction
type comes from the TRAN_MSG property, not from the flag.
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


#: bits a producer may choose: body compression and its codec, tag filter type, transaction type
PRODUCER_BITS = COMPRESSED | MULTI_TAGS | TRANSACTION_MASK | COMPRESSION_MASK
#: bits that describe a record's layout: set by the store from what it writes, never taken from a request
LAYOUT_BITS = BORNHOST_V6 | STOREHOST_V6 | NEED_UNWRAP | INNER_BATCH
#: bits of a sent sysFlag the broker keeps (``sent_sys_flag``)
SENT_BITS = COMPRESSED | MULTI_TAGS | COMPRESSION_MASK


def sent_sys_flag(sys_flag: int) -> int:
    """The sysFlag of a SEND / SEND_BATCH request as the broker keeps it: compression and tag filter type only.
    Layout bits, transaction type (which decides whether a record gets a queue offset; TRAN_MSG decides it)
    and undefined bits are dropped."""
    return sys_flag & SENT_BITS


def store_sys_flag(sys_flag: int) -> int:
    """The bits of a message's sysFlag that the store keeps (``PRODUCER_BITS``); it adds the layout bits."""
    return sys_flag & PRODUCER_BITS
