"""A graceful stop that answers every request already sent, within a time limit.

uvicorn's own shutdown closed the listening socket at once (connections still in the
kernel's accept queue got a TCP reset), closed idle keep-alive connections even when a
request had just arrived in their buffers (another reset), and past its timeout
cancelled the requests in flight (clients got a plain-text 500 and a ``CancelledError``
traceback was logged).  ``uvicorn_server(config, limits)`` returns a ``uvicorn.Server``
whose ``shutdown`` instead:

1. keeps accepting for up to ``limits.grace`` seconds while connections are queued (they
   were made before the stop; their requests are answered 503 "shutting down");
2. stops listening and lets each connection finish (see ``connections``: an idle one
   waits ``limits.grace`` seconds for a request already sent);
3. waits for the requests in flight until ``limits.shutdown_timeout`` seconds after the
   stop began;
4. then gives up on the rest: ``limits.abandoning`` is set and their tasks cancelled,
   which the application answers with a JSON 503 (``app.guard``), and every connection
   is closed.
"""
import asyncio
import select

__all__ = ["uvicorn_server"]


def _pending(sockets):
    """True when a listening socket has connections waiting to be accepted."""
    live = [s for s in sockets if s.fileno() >= 0]
    return bool(live) and bool(select.select(live, [], [], 0)[0])


async def _until(condition, deadline, step=0.01):
    loop = asyncio.get_running_loop()
    while not condition() and loop.time() < deadline:
        await asyncio.sleep(step)


def uvicorn_server(config, limits, shutdown_timeout):
    """A ``uvicorn.Server`` for ``config`` with the shutdown of the module docstring;
    its ``shutdown_timeout`` attribute may be changed before the stop."""
    import uvicorn

    class GracefulServer(uvicorn.Server):

        async def shutdown(self, sockets=None):
            loop = asyncio.get_running_loop()
            start = loop.time()
            deadline = start + self.shutdown_timeout
            limits.stopping = True
            listening = [s for server in self.servers for s in (server.sockets or [])]
            await _until(lambda: not _pending(listening), min(start + limits.grace, deadline))
            for server in self.servers:
                server.close()
            state = self.server_state
            for connection in list(state.connections):
                connection.shutdown()
            await _until(lambda: not (state.connections or state.tasks), deadline)
            if state.tasks:
                limits.abandoning = True
                for task in list(state.tasks):
                    task.cancel()
                await _until(lambda: not state.tasks, loop.time() + 0.5)
            for connection in list(state.connections):
                transport = connection.transport
                if transport.get_write_buffer_size():   # a stuck answer: drop, not drain
                    transport.abort()
                else:
                    transport.close()

    server = GracefulServer(config)
    server.shutdown_timeout = shutdown_timeout
    return server
