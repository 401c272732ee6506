"""RocketMQ ``MQVersion``: the ordinal a client sends as its ``version`` and the name it stands for.

``MQVersion.Version`` lists V3_0_0_SNAPSHOT, V3_0_0_ALPHA1, ... in order; from V4_0_0_SNAPSHOT (ordinal 212) on,
every x.y.z has a SNAPSHOT ordinal followed by its release ordinal, up to V5_9_9 (611)::

    212 V4_0_0_SNAPSHOT   213 V4_0_0   ...   400 V4_9_4_SNAPSHOT   401 V4_9_4   ...   611 V5_9_9
"""

from __future__ import annotations

#: MQVersion ordinals from V4_0_0_SNAPSHOT on run SNAPSHOT, release for every x.y.z up to V5_9_9.
V4_0_0_SNAPSHOT = 212
V5_9_9 = 611


def version_desc(ordinal: int) -> str:
    """A client's MQVersion ordinal as its name: 401 -> ``V4_9_4``; outside 4.0.0..5.9.9 the number."""
    if not V4_0_0_SNAPSHOT <= ordinal <= V5_9_9:
        return str(ordinal)
    idx = ordinal - V4_0_0_SNAPSHOT
    n = idx // 2
    name = f"V{4 + n // 100}_{n // 10 % 10}_{n % 10}"
    return name + ("_SNAPSHOT" if idx % 2 == 0 else "")
