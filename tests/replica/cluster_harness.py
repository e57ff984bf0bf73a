"""Several real brokers in one process, joined into a cluster by hand-built metadata images.

Until the ZooKeeper wiring lands, the tests play the metadata side themselves: each broker is a
real :class:`Broker` (real listeners on port 0, real logs, real handlers), and the harness
publishes the same :class:`MetadataImage` (topics with assignments and partition states, the
live brokers with their endpoints) to every broker's controller, as the cluster's metadata will.
ISR changes go through :class:`InMemoryIsrWriter`, which does what the ZooKeeper side promises:
a write conditional on the state version (and leader epoch), then a new image for everyone.
Replication itself is the real thing: followers fetch over sockets with the Fetch API.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from kbroker.config import BrokerConfig
from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import BrokerInfo, MetadataImage, PartitionState, TopicMetadata
from kbroker.protocol.records import RecordBatchBuilder
from kbroker.replica.broker_client import BrokerClient
from kbroker.replica.fetcher import FetcherSettings
from kbroker.server.broker import Broker

LISTENER = "PLAINTEXT"
FAST_FETCH = FetcherSettings(wait_max_ms=100, backoff_ms=50, socket_timeout_ms=5000)


class StaleState(Exception):
    """The proposed ISR names a state version or leader epoch that is no longer current."""


class InProcessCluster:
    def __init__(self, tmp_path, size: int = 3, settings: FetcherSettings = FAST_FETCH,
                 lag_time_max_ms: int = 30000, overrides: dict | None = None,
                 racks: dict | None = None):
        self.tmp_path = tmp_path
        self.size = size
        self.settings = settings
        self.lag_time_max_ms = lag_time_max_ms
        self.overrides = overrides or {}
        self.racks = racks or {}
        self.brokers: dict[int, Broker] = {}
        self.image: MetadataImage | None = None
        self.isr_writes: list[PartitionState] = []  # every successful ISR write, in order
        self.refuse_isr_writes = False

    async def __aenter__(self):
        for node_id in range(self.size):
            await self.start_broker(node_id)
        self.image = MetadataImage.build("test-cluster").with_brokers(self._infos(), 0)
        await self._publish_all()
        return self

    async def __aexit__(self, *exc):
        for node_id in list(self.brokers):
            await self.stop_broker(node_id)

    async def start_broker(self, node_id: int) -> Broker:
        config = BrokerConfig({"listeners": f"{LISTENER}://127.0.0.1:0", "node.id": node_id,
                               "log.dirs": str(self.tmp_path / f"broker-{node_id}"),
                               **({"broker.rack": self.racks[node_id]}
                                  if node_id in self.racks else {}),
                               **self.overrides})
        broker = Broker(config)
        await broker.start()
        self.brokers[node_id] = broker
        broker.replicas.start_replication(self.write_isr, settings=self.settings,
                                          inter_broker_listener=LISTENER,
                                          lag_time_max_ms=self.lag_time_max_ms)
        if self.image is not None:
            self.image = self.image.with_brokers(self._infos(), 0)
            await self._publish_all()
        return broker

    async def stop_broker(self, node_id: int) -> None:
        broker = self.brokers.pop(node_id)
        await broker.replicas.stop_replication()
        await broker.stop()
        if self.image is not None:
            self.image = self.image.with_brokers(self._infos(), 0)
            await self._publish_all()

    def _infos(self):
        return [BrokerInfo(node_id, {LISTENER: ("127.0.0.1", broker.port())},
                           self.racks.get(node_id))
                for node_id, broker in self.brokers.items()]

    # --- metadata: what the controller side will publish -----------------------------------

    async def create_topic(self, name: str, assignments, states=None) -> TopicMetadata:
        assignments = [tuple(a) for a in assignments]
        if states is None:
            states = [PartitionState(a[0], 0, a, 0) for a in assignments]
        topic = TopicMetadata(name, uuid.uuid4(), assignments, {}, states)
        self.image = self.image.with_topic(topic)
        await self._publish_all()
        return topic

    async def set_state(self, name: str, index: int, leader: int, leader_epoch: int, isr,
                        to=None) -> PartitionState:
        """A controller's leader election: the new state (version + 1) for everyone, or only
        for the brokers in ``to`` (a notification the others have not seen yet)."""
        topic = self.image.topic(name)
        old = topic.state(index)
        state = PartitionState(leader, leader_epoch, tuple(isr), old.version + 1)
        states = list(topic.states)
        states[index] = state
        self.image = self.image.with_topic(topic.with_states(states))
        await self._publish_all(to)
        return state

    def state(self, name: str, index: int) -> PartitionState:
        return self.image.topic(name).state(index)

    async def write_isr(self, topic: str, index: int, proposed: PartitionState) -> PartitionState:
        """The ISR writer the metadata side will implement: conditional on the version read."""
        await asyncio.sleep(0)  # a write is a round trip; never complete inline
        current = self.state(topic, index)
        if (self.refuse_isr_writes or proposed.version != current.version
                or proposed.leader_epoch != current.leader_epoch
                or proposed.leader != current.leader):
            raise StaleState(f"{topic}-{index}: proposed {proposed}, current {current}")
        written = PartitionState(proposed.leader, proposed.leader_epoch, proposed.isr,
                                 current.version + 1, current.controller_epoch)
        self.isr_writes.append(written)
        metadata = self.image.topic(topic)
        states = list(metadata.states)
        states[index] = written
        self.image = self.image.with_topic(metadata.with_states(states))
        await self._publish_all()
        return written

    async def _publish_all(self, to=None) -> None:
        for node_id in list(self.brokers):
            if to is None or node_id in to:
                await self.publish_to(node_id, self.image)

    async def publish_to(self, node_id: int, image: MetadataImage) -> None:
        """Bring broker ``node_id``'s image to ``image`` as a notification from the store
        would: the difference, as a delta, through the controller's pipeline."""
        async def read(current):
            return _difference(current, image)

        await self.brokers[node_id].controller.follow(read)

    # --- clients ---------------------------------------------------------------------------

    async def client(self, node_id: int) -> BrokerClient:
        client = BrokerClient("127.0.0.1", self.brokers[node_id].port(), client_id="test",
                              timeout_s=10, max_response_bytes=64 << 20)
        await client.connect()
        return client

    def partition(self, node_id: int, topic: str, index: int = 0):
        return self.brokers[node_id].replicas.get(topic, index)


def _difference(old: MetadataImage, new: MetadataImage) -> MetadataDelta:
    """The delta that takes ``old`` to ``new`` (topics put whole where they differ)."""
    return MetadataDelta(
        created={n: t for n, t in new.topics().items() if old.topic(n) is not t},
        deleted=frozenset(n for n in old.topics() if new.topic(n) is None),
        brokers={**{b: i for b, i in new.brokers.items() if old.brokers.get(b) != i},
                 **{b: None for b in old.brokers if b not in new.brokers}},
        controller_id=new.controller_id)


def batch(count: int = 3, value: bytes = b"v" * 20) -> bytes:
    builder = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(now + i, b"k", value)
    return builder.build()


async def produce(client: BrokerClient, topic: str, index: int, records, acks: int = -1,
                  timeout_ms: int = 10000, version: int | None = 12):
    """One Produce (v12 by default: topics by name); returns the response and the partition
    response."""
    from kbroker.protocol.messages.produce import ProduceRequest as Q

    request = Q(acks=acks, timeout_ms=timeout_ms, topic_data=[Q.TopicProduceData(
        name=topic, partition_data=[Q.PartitionProduceData(index=index, records=records)])])
    response = await client.request("Produce", request, version)
    return response, response.responses[0].partition_responses[0]


async def until(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def log_bytes(broker: Broker, topic: str, index: int, upto_offset: int) -> bytes:
    """The bytes of the partition's batches below ``upto_offset`` (whole batches), as on disk."""
    partition = broker.replicas.get(topic, index)
    out = bytearray()
    offset = partition.log_start_offset
    log = partition._log
    while offset < upto_offset:
        result = log.read(offset, 1 << 20, upto_offset)
        if not result.regions:
            break
        data = b"".join(region.read() for region in result.regions)
        out += data
        from kbroker.protocol.records import iter_batches
        offset = [h.next_offset for h in iter_batches(data)][-1]
    return bytes(out)
