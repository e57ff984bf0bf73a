"""The state-change log (Kafka's ``state-change.log``): every change of a partition's leader,
leader epoch, ISR or replica set, and every change of this broker's role for a replica, one line
each with the partition, the epochs and the reason.

It is the logger ``kbroker.state_change``, at INFO, and it is never rate-limited (the repeat
filter of :mod:`kbroker.cli.log_limits` leaves it alone): in a fault run these lines are what
shows a replication bug, and a burst of them (a failover moving 10,000 leaders) is the story,
not noise. By default the lines go to the broker's log like any other;
``kbroker.state.change.log.file`` sends them to a file of their own instead, rotated at
``kbroker.state.change.log.max.bytes`` with ``kbroker.state.change.log.backups`` old files kept
(:func:`open_file`).

Two sides write here, as in Kafka: the controller (this broker's metadata commits: elections,
ISR changes, reassignment steps, topic creation and deletion, each with what asked for it) and
the replica manager (this broker becoming leader or follower of a replica, ignoring a stale
state, hosting or dropping a replica).
"""

from __future__ import annotations

import logging
import os

from kbroker.startup import EXIT_CONFIG, StartupError

LOGGER = "kbroker.state_change"
log = logging.getLogger(LOGGER)
_FORMAT = "[%(asctime)s] %(levelname)s %(message)s"


def _state(state) -> str:
    return (f"leader {state.leader}, leader epoch {state.leader_epoch}, ISR {list(state.isr)}, "
            f"partition version {state.version}")


def committed(node_id: int, image, delta, what: str) -> None:
    """The partition states ``delta`` changes, as this broker committed them for ``what``."""
    if not log.isEnabledFor(logging.INFO):
        return
    for name in getattr(delta, "deleted", ()):
        topic = image.topic(name)
        log.info("controller %d: deleted topic %s (%d partition(s)) (%s)", node_id, name,
                 topic.num_partitions if topic is not None else 0, what)
    for topic in getattr(delta, "created", {}).values():
        for index in range(topic.num_partitions):
            state = topic.state(index) if topic.states else None
            log.info("controller %d: created %s-%d, replicas %s%s (%s)", node_id, topic.name,
                     index, list(topic.assignments[index]),
                     f", {_state(state)}" if state is not None else "", what)
    for (name, index), new in getattr(delta, "states", {}).items():
        topic = image.topic(name)
        old = topic.state(index) if topic is not None and index < topic.num_partitions else None
        if old is None:
            log.info("controller %d: %s-%d: %s (%s)", node_id, name, index, _state(new), what)
        else:
            log.info("controller %d: %s-%d: %s -> %s (%s)", node_id, name, index,
                     _change(old, new), _state(new), what)
    for name, assignment in getattr(delta, "assignments", {}).items():
        topic = image.topic(name)
        for index, replicas in enumerate(assignment.replicas):
            old = topic.assignments[index] if topic is not None and \
                index < topic.num_partitions else None
            moving = assignment.reassigning.get(index)
            if tuple(replicas) != tuple(old or ()) or moving:
                log.info("controller %d: %s-%d: replicas %s -> %s%s (%s)", node_id, name, index,
                         list(old or ()), list(replicas),
                         f", adding {list(moving[0])}, removing {list(moving[1])}"
                         if moving else "", what)


def _change(old, new) -> str:
    parts = []
    if old.leader != new.leader:
        parts.append(f"leader {old.leader}")
    if old.leader_epoch != new.leader_epoch:
        parts.append(f"leader epoch {old.leader_epoch}")
    if tuple(old.isr) != tuple(new.isr):
        parts.append(f"ISR {list(old.isr)}")
    return ", ".join(parts) or "unchanged"


def became_leader(node_id: int, topic: str, index: int, state, replicas, was: str) -> None:
    log.info("broker %d: leader of %s-%d (was %s): %s, replicas %s", node_id, topic, index, was,
             _state(state), list(replicas))


def became_follower(node_id: int, topic: str, index: int, state, replicas, was: str) -> None:
    log.info("broker %d: follower of %s-%d (was %s): %s, replicas %s", node_id, topic, index,
             was, _state(state), list(replicas))


def stale_state(node_id: int, topic: str, index: int, state, current_epoch: int) -> None:
    log.info("broker %d: ignored the state of %s-%d at leader epoch %d: this replica is at %d",
             node_id, topic, index, state.leader_epoch, current_epoch)


def isr_proposed(node_id: int, topic: str, index: int, old, new, reason: str) -> None:
    log.info("broker %d: leader of %s-%d proposes ISR %s (was %s): %s", node_id, topic, index,
             sorted(new), sorted(old), reason)


def isr_not_written(node_id: int, topic: str, index: int, isr, reason) -> None:
    log.info("broker %d: ISR %s of %s-%d not written: %s", node_id, list(isr), topic, index,
             reason)


def replica_added(node_id: int, topic: str, index: int, log_dir: str | None) -> None:
    log.info("broker %d: hosts a replica of %s-%d in %s", node_id, topic, index, log_dir)


def replica_moved(node_id: int, topic: str, index: int, source: str, destination: str) -> None:
    log.info("broker %d: moved its replica of %s-%d from log dir %s to %s", node_id, topic,
             index, source, destination)


def replica_removed(node_id: int, topic: str, index: int, was: str) -> None:
    log.info("broker %d: dropped its replica of %s-%d (was %s)", node_id, topic, index, was)


def open_file(config) -> logging.Handler | None:
    """Send the state-change lines to ``kbroker.state.change.log.file`` (rotated by size)
    instead of the broker's log; the handler, for :func:`close_file` at stop. None when unset."""
    path = config.get("kbroker.state.change.log.file")
    if not path:
        return None
    import logging.handlers  # only with a file of its own (with pickle, 5 ms of a start)

    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=config.get("kbroker.state.change.log.max.bytes"),
            backupCount=config.get("kbroker.state.change.log.backups"), encoding="utf-8")
    except OSError as e:
        raise StartupError(
            f"kbroker.state.change.log.file={path} cannot be opened: "
            f"{e.strerror or e.__class__.__name__}",
            "give it a path in a writable directory, or unset it to keep these lines in the "
            "broker's log", EXIT_CONFIG) from e
    handler.setFormatter(logging.Formatter(_FORMAT))
    log.addHandler(handler)
    log.propagate = False
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)  # the file gets every line whatever the console's level
    return handler


def close_file(handler: logging.Handler | None) -> None:
    if handler is None:
        return
    log.removeHandler(handler)
    handler.close()
    if not any(isinstance(h, logging.FileHandler) for h in log.handlers):
        log.propagate = True
        log.setLevel(logging.NOTSET)
