"""Answers to ``await``ing coroutines, one event-loop wake-up per batch.

``asyncio.wrap_future`` wakes the event loop once per finished future; for a batch of 32
that is 32 wake-ups (each a write to the loop's self-pipe and a trip through the GIL).
The batcher instead hands each loop all of a batch's answers in one
``call_soon_threadsafe``.
"""
import collections

__all__ = ["deliver"]


def _settle(items):
    for waiter, error, value in items:
        if waiter.done():              # cancelled meanwhile: nobody is listening
            continue
        if error is None:
            waiter.set_result(value)
        else:
            waiter.set_exception(error)


def deliver(requests, values=None, error=None):
    """Answer the asyncio waiters of ``requests`` (those submitted with one): each with
    its entry of ``values``, or all with ``error``."""
    by_loop = collections.defaultdict(list)
    for i, req in enumerate(requests):
        if req.waiter is not None:
            loop, waiter = req.waiter
            by_loop[loop].append((waiter, error, None if error is not None else values[i]))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, items)
        except RuntimeError:           # the loop is closed: its coroutines are gone
            pass
