"""Master/slave replication (RocketMQ 4.9 HA, STORE.md §13).

protocol.py (the raw byte stream, sans-IO), master.py (``HAService``: the master's listener, one
``HAConnection`` per slave, SYNC_MASTER's ``wait_replicated``), slave.py (``HAClient``: the slave's connection
to its master), slave_sync.py (``SlaveSynchronize``: topics, offsets and subscription groups copied from the
master). The broker controller starts the master or slave parts according to ``brokerRole``.
"""
