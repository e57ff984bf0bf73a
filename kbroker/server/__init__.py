"""The network side of the broker.

Key files: ``broker`` (process lifecycle: the composition root that builds the controller, the
replica manager, the coordinators and the listeners; background jobs), ``acceptor`` and
``limits`` (accepting connections within Kafka's connection limits), ``connection`` (framing,
per-connection ordering, backpressure, sendfile), ``dispatch`` (header, version checks, decode,
typed request context, handler, encode; the ``handle(frame) -> response buffers`` seam tests use).
The server never touches ``kbroker.log``: storage is the replica manager's.

Concurrency rule: one event loop owns everything. A connection handles its requests in arrival
order and writes responses in the same order; a handler that must wait (long-poll fetch) returns
an awaitable, and the connection goes on handling later requests while it waits.
"""
