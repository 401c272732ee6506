"""One exception tree for the whole of `mq`.

``MQError`` is the root. Expected outcomes (no message yet, offset moved, flush timed out) are *statuses*,
not exceptions; exceptions are for failures a caller must handle or a user must read.

- ``LocalProtocolError``: we were asked to send something the protocol cannot carry (a bug or misuse here).
- ``RemoteProtocolError``: the peer sent bytes that break the protocol (bad frame, bad header);
  ``RecordContentError``: a stored record that is framed right but whose body or topic cannot be decoded.
- ``RemotingError`` and subclasses: transport failures (connect, timeout, closed connection).
- ``BrokerError``: a peer answered with a non-success response code; ``from_response`` maps the code
  to a subclass through one table, and ``retriable`` tells the producer whether to try another queue.
"""

from __future__ import annotations


class MQError(Exception):
    """Root of every error raised by `mq`."""

    retriable: bool = False


class ConfigError(MQError):
    """A configuration file or option is invalid; the message names the key and the rule."""


class ProtocolError(MQError):
    """A RocketMQ remoting protocol violation."""


class LocalProtocolError(ProtocolError):
    """We tried to build a command the protocol cannot carry."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not a valid RocketMQ frame or header."""


class HeaderFieldError(RemoteProtocolError):
    """A request header field is missing or does not parse as its Java type; ``field`` is its wire name."""

    def __init__(self, message: str, *, header: str = "", field: str = "") -> None:
        super().__init__(message)
        self.header = header
        self.field = field


class RecordContentError(RemoteProtocolError):
    """A stored message record whose framing holds but whose content cannot be decoded: a body flagged
    compressed that does not inflate (or inflates past the limit, or uses a codec this client lacks), a topic
    that is not UTF-8. ``size`` is the record's whole size, so a reader can step over it to the next record;
    ``stored`` is the record decoded as it is stored (body not inflated), for tools that show it."""

    def __init__(self, message: str, *, size: int = 0, stored: object = None) -> None:
        super().__init__(message)
        self.size = size
        self.stored = stored


class RemotingError(MQError):
    """The transport failed: connect, send, or receive."""

    retriable = True

    def __init__(self, message: str, addr: str | None = None) -> None:
        super().__init__(message)
        self.addr = addr


class ConnectError(RemotingError):
    """Could not open a connection to ``addr``."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout."""


class RequestTimeoutError(RemotingTimeoutError):
    """A request-reply message was sent but no reply arrived in time (Java ``RequestTimeoutException``)."""


class ConnectionClosedError(RemotingError):
    """The connection closed while a request was pending."""


class ConnectionBusyError(RemotingError):
    """A request to a peer was not sent: the peer has not read what was already sent to it."""


class TopicAttributeError(MQError):
    """A RocketMQ 5 topic attribute change that is malformed or not allowed; the message names the key and rule."""


class InvalidTopicError(MQError):
    """A topic name breaks RocketMQ's rules; the message names the rule."""


class MessageTooLargeError(MQError):
    """A message body or property block is over the limit; the message names the limit."""


class BrokerError(MQError):
    """A peer (broker or name server) answered with a non-success response code."""

    def __init__(self, code: int, remark: str | None = None, addr: str | None = None) -> None:
        self.code = int(code)
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"{_code_name(self.code)} ({self.code}){where}: {self.remark}".rstrip(": "))

    @classmethod
    def from_response(cls, code: int, remark: str | None = None, addr: str | None = None) -> "BrokerError":
        klass = _BY_CODE.get(int(code), BrokerError)
        return klass(code, remark, addr)


class SystemError_(BrokerError):
    retriable = True


class SystemBusyError(BrokerError):
    retriable = True


class RequestCodeNotSupportedError(BrokerError):
    pass


class ServiceNotAvailableError(BrokerError):
    retriable = True


class NoPermissionError(BrokerError):
    retriable = True


class TopicNotExistError(BrokerError):
    retriable = True


class MessageIllegalError(BrokerError):
    pass


class QueryNotFoundError(BrokerError):
    pass


class ConsumerNotOnlineError(BrokerError):
    pass


#: Response code -> name; filled in by mq.protocol.codes (errors sits below protocol and cannot import it).
CODE_NAMES: dict[int, str] = {}


def _code_name(code: int) -> str:
    return CODE_NAMES.get(code, "RESPONSE")


# Response codes (PROTOCOL.md §5) -> exception classes. Retriable ones mirror the Java producer's
# retryResponseCodes {17, 14, 1, 16, 204, 205} plus SYSTEM_BUSY, which the producer also retries.
_BY_CODE: dict[int, type[BrokerError]] = {
    1: SystemError_,
    2: SystemBusyError,
    3: RequestCodeNotSupportedError,
    13: MessageIllegalError,
    14: ServiceNotAvailableError,
    16: NoPermissionError,
    17: TopicNotExistError,
    22: QueryNotFoundError,
    206: ConsumerNotOnlineError,
}
