"""The elected controller's duties, as a listener of images that writes through the pipeline.

While this broker holds ``/controller`` (:mod:`.election`), :class:`ControllerDuties` watches the
images the controller publishes and, a round at a time, writes what Kafka's ZooKeeper
controller would (``KafkaController``, ``PartitionStateMachine``), each change through
:meth:`Controller.write`: decided against the image under the write lock, committed
conditionally on the state versions it shows and fenced by the controller epoch, published.

- **Leader election** (:mod:`kbroker.metadata.leader_election`): a partition whose leader left
  (died, or deregistered in a controlled shutdown) gets the first live in-sync replica; a
  follower that left drops out of the ISR; an offline partition comes back with its broker.
  Partitions of topics that changed are checked on every image; every partition when the live
  brokers changed.
- **ISR change propagation**: leaders write their ISR changes themselves, each with an
  ``/isr_change_notification`` every broker reads (:mod:`.sync`); the controller trims those
  notifications, oldest first (:func:`.notifications.trim`).
- **Reassignment** (KIP-455): on a settled round, reassignments whose target replicas are all
  in the ISR are finished (:func:`partition_changes.completed_reassignments`).
- **Preferred leaders**: every ``leader.imbalance.check.interval.seconds`` with
  ``auto.leader.rebalance.enable``, the brokers leading less than their share (beyond
  ``leader.imbalance.per.broker.percentage``) get their preferred partitions back.
- **Missing states**: partitions left without a state znode for ``MISSING_STATE_GRACE_S`` (a
  creator died half-way) get their first state, as Kafka's controller initializes new
  partitions.
- **Controlled shutdown**: a broker shutting down deregisters first (:mod:`.cluster`); to the
  controller it is a broker that left, so its leaderships move while it still serves.

A write that loses (another writer changed a state) is skipped: the next image shows what won,
and the next round decides again. Concurrency: one task, woken by images and by the election.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kbroker.metadata import leader_election, partition_changes
from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage
from kbroker.metadata.topic_policy import initial_states
from kbroker.metadata.zk import notifications
from kbroker.metadata.zk.client import ZK_ERRORS
from kbroker.protocol.errors import KafkaError

log = logging.getLogger("kbroker.controller")

# How long a partition may stay without a state znode before the controller writes it.
MISSING_STATE_GRACE_S = 30
# A round runs at least this often while this broker is controller (timers: grace, rebalance).
ROUND_INTERVAL_S = 1.0


class ControllerDuties:
    def __init__(self, controller, store, client, config):
        self._controller = controller
        self._store = store
        self._zk = client
        self._config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._seen: MetadataImage | None = None  # the image the last round checked
        self._missing_since: dict[tuple[str, int], float] = {}
        self._next_rebalance = time.monotonic() + config.get(
            "leader.imbalance.check.interval.seconds")

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="controller-duties")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def apply(self, old: MetadataImage, new: MetadataImage, delta=None):
        """Image listener: a new image may call for a round."""
        if self._wake is not None:
            self._wake.set()
        return {}
        yield

    def nudge(self) -> None:
        """A round soon (the election changed); callable from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:
                pass

    async def _run(self) -> None:
        while not self._stopping:
            try:
                async with asyncio.timeout(ROUND_INTERVAL_S):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            if not self._store.is_controller:
                self._seen = None  # a new term starts with every partition checked
                continue
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                self._seen = None  # what the round decided may not be written: check it all
                log.info("controller round deferred: %s", exc)
            except (*ZK_ERRORS, TimeoutError) as exc:  # ZooKeeper slow or away: the next round
                self._seen = None
                log.warning("controller round failed: ZooKeeper did not answer (%s); retrying",
                            type(exc).__name__)
            except Exception:
                self._seen = None
                log.exception("controller round failed; retrying")

    async def round(self) -> int:
        """One round on the current image; the number of partition changes committed."""
        done = 0
        commit = await self._controller.write(self._elections, "electing leaders")
        if commit is not None:
            done += len(commit.delta.states)
        commit = await self._controller.write(self._missing_states,
                                              "writing missing partition states")
        if commit is not None:
            done += len(commit.delta.states)
        if not done:  # on a settled image only: one reassignment step at a time
            commit = await self._controller.write(self._reassignments,
                                                  "completing reassignments")
            if commit is not None:
                done += len(commit.delta.assignments)
        await notifications.trim(self._zk)
        return done

    # --- decisions (run under the controller's write lock, on its current image) ----------------

    def _elections(self, image: MetadataImage) -> MetadataDelta | None:
        live = set(image.brokers)
        epoch = self._store.controller_epoch
        seen, self._seen = self._seen, image
        if seen is None or seen.brokers.keys() != image.brokers.keys():
            checked = image  # brokers came or went: every partition
        else:
            changed = [t for name, t in image.topics().items() if seen.topic(name) is not t]
            checked = MetadataImage.build(image.cluster_id, changed)
        changes = leader_election.on_live_brokers(checked, live, epoch,
                                                  self._controller.unclean_allowed)
        states = {(t, p): s for t, p, s in changes}
        wanted = None
        if (self._config.get("auto.leader.rebalance.enable")
                and time.monotonic() >= self._next_rebalance):
            self._next_rebalance = time.monotonic() + self._config.get(
                "leader.imbalance.check.interval.seconds")
            imbalanced = leader_election.imbalanced_brokers(
                image, self._config.get("leader.imbalance.per.broker.percentage"))
            wanted = {(t.name, i) for t in image.topics().values()
                      for i, r in enumerate(t.assignments) if r and r[0] in imbalanced}
        if wanted:
            for t, p, s in leader_election.preferred(image, live, epoch, wanted):
                states.setdefault((t, p), s)
        return MetadataDelta(states=states) if states else None

    def _missing_states(self, image: MetadataImage) -> MetadataDelta | None:
        """Partitions without a state znode for MISSING_STATE_GRACE_S get their first state.
        The grace leaves a live creator time to finish."""
        now = time.monotonic()
        missing = {(t.name, i) for t in image.topics().values() if t.states
                   for i, s in enumerate(t.states) if s.missing}
        self._missing_since = {k: self._missing_since.get(k, now) for k in missing}
        due = [k for k, since in self._missing_since.items()
               if now - since >= MISSING_STATE_GRACE_S]
        if not due:
            return None
        log.warning("%d partition(s) without a state for %d s (%s...); writing their first "
                    "state", len(due), MISSING_STATE_GRACE_S, sorted(due)[:3])
        states = {}
        for name, index in due:
            (state,) = initial_states([image.topic(name).assignments[index]],
                                      self._store.controller_epoch)
            states[(name, index)] = state
        return MetadataDelta(states=states)

    def _reassignments(self, image: MetadataImage) -> MetadataDelta | None:
        delta = partition_changes.completed_reassignments(image, set(image.brokers),
                                                          self._store.controller_epoch)
        return None if delta.empty else delta
