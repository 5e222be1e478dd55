"""The errors a served request can end with, each mapped to one HTTP status by the server."""

__all__ = ["ServingError", "QueueFullError", "RequestTimeoutError", "BatcherClosedError"]


class ServingError(RuntimeError):
    """Base class of the batcher's own refusals (the model's errors pass through as they
    are)."""

    status = 500


class QueueFullError(ServingError):
    """``submit`` refused a request at once: ``max_queue_size`` requests are waiting.
    The server answers 503 (with ``Retry-After``): the client should back off."""

    status = 503


class RequestTimeoutError(ServingError, TimeoutError):
    """A request waited in the queue longer than its timeout and was dropped before it
    ran.  The server answers 504."""

    status = 504


class BatcherClosedError(ServingError):
    """The batcher is closed (or closed without draining while the request waited)."""

    status = 503
