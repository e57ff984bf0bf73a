"""The network side of the broker.

Key files: ``broker`` (process lifecycle, listeners, background jobs), ``connection`` (framing,
per-connection ordering, sendfile), ``dispatch`` (header, version checks, decode, handler,
encode; the ``handle(frame) -> response buffers`` seam tests use), ``topic_config`` (from topic
configs to the log's settings), ``producer_ids``.

Concurrency rule: one event loop owns everything. A connection handles its requests in arrival
order and writes responses in the same order; a handler that must wait (long-poll fetch) returns
an awaitable, and the connection goes on handling later requests while it waits.
"""
