"""The ZooKeeper side of cluster mode, in Kafka's classic znode layout.

Key files, by job:

- ``store``: the metadata store (``commit(delta)`` as conditional ZooKeeper transactions, fenced
  by the controller epoch; ``load``; producer id blocks), behind the same interface as the
  single node's file (:mod:`kbroker.metadata.store`);
- ``reader``: ZooKeeper -> image (the whole tree) and -> deltas (just what a notification names),
  newer znode versions only; ``security``: SCRAM credentials, ACLs and client quotas, read and
  written as read-modify-write deltas; ``tokens``: delegation tokens (``/delegation_token``);
  group configs (``/config/groups/G``) are read and written by ``reader`` and ``store``;
- ``sync``: watches and notifications that become deltas, published through
  ``Controller.follow``; a periodic full read as the safety net against a lost watch;
- ``duties``: the elected controller's work (leader election, ISR notification trimming,
  reassignment, preferred leaders, missing states), an image listener writing through
  ``Controller.write``; ``election``: ``/controller`` and the controller epoch;
- ``registration``: ``/brokers/ids/N``; ``notifications``: purging old change notifications;
- ``cluster``: a broker's life in the cluster (open, start, controlled shutdown, stop);
- ``znodes``: the paths and JSON, exactly as Kafka 3.x writes them; ``client``: connecting, and
  awaiting kazoo's asynchronous calls from asyncio.

Concurrency rule: nothing on the event loop blocks on ZooKeeper. The store, reader, sync and
duties use kazoo's asynchronous calls, bridged to asyncio futures; registration and election run
their blocking calls on kazoo's threads (or start in a thread), and reach the loop only through
``call_soon_threadsafe``. The image has one writer, the controller, which serialises commits and
reads of ZooKeeper under one lock.
"""
