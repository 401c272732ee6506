"""The broker's request processors, one module per concern; ``register_all`` wires them by request code.

core (this package): send.py (10, 310, 320), pull.py (11), client.py (14, 15, 29-32, 34, 35, 38),
query.py (12, 33), lock.py (41, 42), reply.py (324, 325); admin.py (every admin code) belongs to the broker
admin module and exposes ``register(controller)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController


def register_all(controller: "BrokerController") -> None:
    from mq.daemon.broker.processors.client import ClientProcessor
    from mq.daemon.broker.processors.lock import LockProcessor
    from mq.daemon.broker.processors.pull import PullProcessor
    from mq.daemon.broker.processors.query import QueryProcessor
    from mq.daemon.broker.processors.send import SendProcessor

    server = controller.server
    controller.send_processor = SendProcessor(controller)
    controller.pull_processor = PullProcessor(controller)
    controller.client_processor = ClientProcessor(controller)
    controller.query_processor = QueryProcessor(controller)
    controller.lock_processor = LockProcessor(controller)
    for p in (controller.send_processor, controller.pull_processor, controller.client_processor,
              controller.query_processor, controller.lock_processor):
        p.register(server)
    # CONSUMER_SEND_MSG_BACK (36) and END_TRANSACTION (37)
    from mq.daemon.broker.processors.end_transaction import EndTransactionProcessor
    from mq.daemon.broker.processors.send_back import SendBackProcessor

    controller.send_back_processor = SendBackProcessor(controller)
    controller.end_transaction_processor = EndTransactionProcessor(controller)
    controller.send_back_processor.register(server)
    controller.end_transaction_processor.register(server)
    # RESUME_CHECK_HALF_MESSAGE (323): an operator restarts the checks of a discarded half message
    from mq.daemon.broker.processors.resume_half import ResumeHalfProcessor

    controller.resume_half_processor = ResumeHalfProcessor(controller)
    controller.resume_half_processor.register(server)
    # request-reply: SEND_REPLY_MESSAGE (324), SEND_REPLY_MESSAGE_V2 (325) -> PUSH_REPLY_MESSAGE_TO_CLIENT (326)
    from mq.daemon.broker.processors.reply import ReplyProcessor

    controller.reply_processor = ReplyProcessor(controller)
    controller.reply_processor.register(server)
    # RocketMQ 5 pop: POP_MESSAGE, PEEK_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME
    from mq.daemon.broker.processors.ack import AckProcessor
    from mq.daemon.broker.processors.pop import PopProcessor

    controller.pop_processor = PopProcessor(controller)
    controller.ack_processor = AckProcessor(controller)
    controller.pop_processor.register(server)
    controller.ack_processor.register(server)
    # RocketMQ 5 broker-side load balancing: QUERY_ASSIGNMENT (400), SET_MESSAGE_REQUEST_MODE (401)
    from mq.daemon.broker.processors.assignment import AssignmentProcessor

    controller.assignment_processor = AssignmentProcessor(controller)
    controller.assignment_processor.register(server)
    from mq.daemon.broker.processors import admin  # missing is an error
    from mq.daemon.broker.processors import admin_acl, admin_metadata, admin_queues, admin_stats

    admin.register(controller)
    admin_metadata.register(controller)
    admin_queues.register(controller)
    admin_stats.register(controller)
    admin_acl.register(controller)
