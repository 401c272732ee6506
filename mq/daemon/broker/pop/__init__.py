"""RocketMQ 5 pop consumption in the broker: ``service.PopService`` (the in-process API, types in
``contract.py``), ``reader.py`` (one pop), ``acks.py`` (ack, change invisible time, DLQ), ``records.py`` (the
revive log), ``revive.py`` (un-acked messages come back), ``order.py`` (FIFO), ``polling.py`` (long polling)."""
