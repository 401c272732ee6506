"""Status codes of the gRPC endpoint: what the 5.x clients read in every response's ``Status``.

The gRPC status of a call stays OK; the outcome is ``Status{code, message}`` in the response (for Telemetry,
errors end the stream with a gRPC status, as Apache's proxy does). The clients map codes to exceptions
(Python ``MessagingResultChecker``, Node ``StatusChecker``): 400xx BadRequest, 40100 Unauthorized, 40300
Forbidden, 404xx NotFound except MESSAGE_NOT_FOUND (40401: "no message", not an error), 413xx
PayloadTooLarge, 42900 TooManyRequests (ends a producer's retries), 500xx Internal, 504xx ProxyTimeout,
505xx Unsupported.

A broker response code becomes a gRPC code through ``RESPONSE_CODE_MAPPING`` (Apache's
``ResponseCodeMapping`` in proxy/grpc/v2/common/ResponseBuilder): SYSTEM_BUSY -> TOO_MANY_REQUESTS,
TOPIC_NOT_EXIST -> TOPIC_NOT_FOUND, SUBSCRIPTION_GROUP_NOT_EXIST -> CONSUMER_GROUP_NOT_FOUND, ...; any other
failure is INTERNAL_SERVER_ERROR. ``ProxyError`` carries a code and a message from where a request is
refused to where the response is built.
"""

from __future__ import annotations

from mq.daemon.proxy.proto import messages as pb
from mq.errors import MQError
from mq.protocol.codes import ResponseCode as RC

Code = pb.Code

RESPONSE_CODE_MAPPING: dict[int, int] = {
    RC.SUCCESS: Code.OK,
    RC.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    RC.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    RC.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    RC.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    RC.NO_PERMISSION: Code.FORBIDDEN,
    RC.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    RC.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    RC.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    RC.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    RC.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    RC.SERVICE_NOT_AVAILABLE: Code.INTERNAL_SERVER_ERROR,
    RC.VERSION_NOT_SUPPORTED: Code.VERSION_UNSUPPORTED,
    RC.FLOW_CONTROL: Code.TOO_MANY_REQUESTS,
}

#: Pre-built OK status: most responses carry it, and building it once saves work per call.
OK_STATUS = pb.Status(code=Code.OK, message="OK")


class ProxyError(MQError):
    """A request refused with a gRPC ``Code``; ``message`` is what the client shows the user."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def status(self) -> object:
        return pb.Status(code=self.code, message=self.message)


def status(code: int, message: str | None = None) -> object:
    """A ``Status``; OK without a message is the shared ``OK_STATUS``."""
    if code == Code.OK and message is None:
        return OK_STATUS
    return pb.Status(code=code, message=message if message is not None else Code.name(code))


def from_response_code(code: int, remark: str | None) -> object:
    """The ``Status`` for a broker response code and remark (RESPONSE_CODE_MAPPING)."""
    mapped = RESPONSE_CODE_MAPPING.get(code, Code.INTERNAL_SERVER_ERROR)
    if mapped == Code.OK:
        return OK_STATUS
    return pb.Status(code=mapped, message=remark or Code.name(mapped))


def error_from_response(code: int, remark: str | None) -> ProxyError:
    mapped = RESPONSE_CODE_MAPPING.get(code, Code.INTERNAL_SERVER_ERROR)
    return ProxyError(mapped, remark or Code.name(mapped))
