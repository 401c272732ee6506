"""The remoting server's settings that both daemons share (``RemotingServerConfig``: RocketMQ's
NettyServerConfig keys and mq's limits on frames, connections and request processing) and the limit objects the
transport is given (``FrameLimits``, ``ConnectionLimits``, ``ProcessorLimits``). Importable from ``mq.config``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class FrameLimits:
    """Limits the frame decoder enforces before it allocates anything (PROTOCOL.md §1)."""

    #: Largest frame accepted, bytes (RocketMQ's com.rocketmq.remoting.frameMaxLength); a longer frame closes the
    #: connection.
    max_frame: int = 16 * 1024 * 1024
    #: Largest header inside a frame, bytes.
    max_header: int = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessorLimits:
    """Bounded concurrency and queue for one request-code group on a server."""

    #: Workers serving this group's requests at once.
    concurrency: int = 16
    #: Requests waiting for a worker; beyond it a request is answered SYSTEM_BUSY [OVERLOAD].
    queue_capacity: int = 10000


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Memory and time bounds of the remoting transport (mq/remoting), per connection and per server.

    "Pending" bytes of a connection are its unsent output (our buffer plus the transport's) plus the frames of
    its requests that handlers hold (queued to or running in async handlers). While they are at or above
    ``write_high_water`` the connection's requests are not handed to handlers and it is not read; it resumes at
    ``write_low_water``. Seconds of 0 disable the timer they name."""

    #: Requests handed to async handlers and not yet finished; at this count the connection stops reading.
    max_inflight: int = 1024
    #: Pending bytes at which a server connection stops being served and read.
    write_high_water: int = 4 * 1024 * 1024
    #: Pending bytes at which a stopped server connection is served and read again.
    write_low_water: int = 1024 * 1024
    #: Pending bytes of all connections of a server together: above it no request is handed to a handler and
    #: the connection with the most unsent output among those whose peer does not read is closed.
    max_total_output: int = 256 * 1024 * 1024
    #: Seconds a connection may stay above ``write_high_water`` without its peer reading anything; then it is
    #: closed.
    write_stall_timeout: float = 30.0
    #: A server connection with no whole frame read and nothing written for this many seconds is closed; bytes
    #: of an unfinished frame do not count as traffic.
    idle_timeout: float = 120.0
    #: Seconds within which a frame must arrive whole once its first byte has come; then the connection is
    #: closed.
    frame_timeout: float = 30.0
    #: Bytes of unfinished frames held for all connections of a server together; the connection whose read
    #: goes over it is closed.
    max_total_partial: int = 256 * 1024 * 1024
    #: Request bodies larger than this many bytes are decoded off the event loop (a worker thread), where the
    #: handler supports it.
    offload_body_threshold: int = 256 * 1024
    #: Seconds between two log records of the same kind of bad request (malformed frames, unparsable headers,
    #: refused connections); the ones in between are counted.
    bad_request_log_interval: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_inflight", "write_high_water", "max_total_output", "max_total_partial"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.write_low_water <= self.write_high_water:
            raise ConfigError(f"write_low_water ({self.write_low_water}) must be between 0 and write_high_water "
                              f"({self.write_high_water})")
        for name in ("write_stall_timeout", "idle_timeout", "frame_timeout", "bad_request_log_interval",
                     "offload_body_threshold"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, got {getattr(self, name)}")


_CL = ConnectionLimits()
_FL = FrameLimits()
#: ConnectionLimits field -> the YAML key that sets it (for error messages)
_LIMIT_KEYS = {"max_inflight": "maxInflightRequestsPerChannel", "write_high_water": "writeBufferHighWaterMark",
               "write_low_water": "writeBufferLowWaterMark", "max_total_output": "writeBufferTotalLimit",
               "max_total_partial": "partialFrameTotalLimit", "write_stall_timeout": "writeStallTimeoutSeconds",
               "idle_timeout": "serverChannelMaxIdleTimeSeconds", "frame_timeout": "frameCompleteTimeoutSeconds",
               "bad_request_log_interval": "badRequestLogIntervalSeconds",
               "offload_body_threshold": "heavyBodyThreshold"}


@dataclass(frozen=True, slots=True)
class RemotingServerConfig:
    """The listener settings both daemons share (RocketMQ ``NettyServerConfig`` names where it has them).

    ``frame_limits`` and ``connection_limits`` turn them into what ``mq.remoting`` takes."""

    #: serverChannelMaxIdleTimeSeconds: a connection with no whole request read and nothing written for this
    #: many seconds is closed (a frame trickled byte by byte does not keep it open); 0 never closes one.
    server_channel_max_idle_time_seconds: int = int(_CL.idle_timeout)
    #: frameMaxLength (com.rocketmq.remoting.frameMaxLength): largest frame in bytes; a longer one closes the
    #: connection.
    frame_max_length: int = _FL.max_frame
    #: Largest frame header in bytes; a longer one closes the connection.
    frame_max_header_length: int = _FL.max_header
    #: Seconds a frame may take to arrive whole once its first byte came; then the connection is closed.
    frame_complete_timeout_seconds: float = _CL.frame_timeout
    #: Bytes of unfinished frames held for all connections together; the connection whose read goes over it is
    #: closed.
    partial_frame_total_limit: int = _CL.max_total_partial
    #: writeBufferHighWaterMark: a connection with this many bytes of unsent answers and unanswered requests is
    #: neither read nor served until it drops to writeBufferLowWaterMark.
    write_buffer_high_water_mark: int = _CL.write_high_water
    #: writeBufferLowWaterMark: see writeBufferHighWaterMark (bytes).
    write_buffer_low_water_mark: int = _CL.write_low_water
    #: Bytes of unsent answers and unanswered requests of all connections together; above it no request is
    #: served and the connection holding the most output its peer does not read is closed.
    write_buffer_total_limit: int = _CL.max_total_output
    #: Seconds a connection may stay over writeBufferHighWaterMark while its peer reads nothing; then it is
    #: closed. 0 never closes one.
    write_stall_timeout_seconds: float = _CL.write_stall_timeout
    #: Requests of one connection queued to or running in worker pools; at this count it is no longer read.
    max_inflight_requests_per_channel: int = _CL.max_inflight
    #: Request bodies (heartbeats, lock batches, broker registrations) larger than this many bytes are decoded in
    #: a worker thread, so one large request does not hold up other connections.
    heavy_body_threshold: int = _CL.offload_body_threshold
    #: Seconds between two log records of one kind of bad request (malformed frame, unparsable header, refused
    #: connection); the ones in between are counted in the next record.
    bad_request_log_interval_seconds: float = _CL.bad_request_log_interval

    def __post_init__(self) -> None:
        try:
            self.connection_limits
        except ConfigError as exc:  # name the keys the operator wrote
            text = str(exc)
            for name, key in _LIMIT_KEYS.items():
                text = text.replace(name, key)
            raise ConfigError(text) from None
        if self.frame_max_length < 16 or not 0 < self.frame_max_header_length <= self.frame_max_length:
            raise ConfigError(f"frameMaxHeaderLength ({self.frame_max_header_length}) must be positive and at most "
                              f"frameMaxLength ({self.frame_max_length})")

    @property
    def frame_limits(self) -> FrameLimits:
        return FrameLimits(max_frame=self.frame_max_length, max_header=self.frame_max_header_length)

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(max_inflight=self.max_inflight_requests_per_channel,
                                write_high_water=self.write_buffer_high_water_mark,
                                write_low_water=self.write_buffer_low_water_mark,
                                max_total_output=self.write_buffer_total_limit,
                                write_stall_timeout=float(self.write_stall_timeout_seconds),
                                idle_timeout=float(self.server_channel_max_idle_time_seconds),
                                frame_timeout=float(self.frame_complete_timeout_seconds),
                                max_total_partial=self.partial_frame_total_limit,
                                offload_body_threshold=self.heavy_body_threshold,
                                bad_request_log_interval=float(self.bad_request_log_interval_seconds))
