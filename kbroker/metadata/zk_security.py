"""SCRAM credentials, ACLs and client quotas in ZooKeeper, in Kafka's ZooKeeper-mode layout.

Where they live (paths and JSON in :mod:`zk_znodes`):

- a user's SCRAM credentials are keys (``SCRAM-SHA-256``, ``SCRAM-SHA-512``) of its config
  znode ``/config/users/<sanitized user>``, beside its quota keys; a change is announced by a
  ``/config/changes`` notification naming ``users/<sanitized user>`` (Kafka's ZkAdminManager);
- ACLs: one znode per resource pattern, ``/kafka-acl/<Type>/<name>`` (literal) or
  ``/kafka-acl-extended/prefixed/<Type>/<name>`` (prefixed), holding every ACL entry of that
  pattern; a change is announced under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``
  (Kafka's AclAuthorizer);
- client quotas: ``/config/users/U``, ``/config/users/U/clients/C``, ``/config/clients/C``,
  ``/config/ips/IP``.

**Writes are deltas, read-modify-write per znode, conditional on the version read** (Kafka's
AclAuthorizer.updateResourceAcls): a broker whose image is a moment old must not drop an ACL or a
user that another broker added meanwhile, so the store never writes a whole set computed from
its image. Each attempt reads the touched znodes fresh, applies the change, and commits one
transaction whose writes name the versions read (a create fails if the znode appeared); a
conflict re-reads and tries again. ACLs go one transaction per resource pattern, as Kafka's
AclAuthorizer writes them: a resource that cannot be written (a name ZooKeeper cannot hold, an
unreadable znode, a conflict that keeps losing) fails only its own ACLs. An ACL znode left with
no entry is deleted, as Kafka does; a user znode keeps an empty config, as Kafka's ZooKeeper
mode leaves it.

**Reads** (:func:`read`) go out at once (kazoo's async calls), like the rest of ``zk_image``,
and only when a change notification was added since the last one (or it is
``FULL_READ_INTERVAL_S`` old): a broker's 2 s re-read of the tree then costs three small
requests here, not one per user and ACL resource.
"""

from __future__ import annotations

import logging
import time
import weakref

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kbroker.metadata import zk_znodes as zn
from kbroker.metadata.store import StaleMetadataError
from kbroker.metadata.zk_errors import ControllerEpochMovedError
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.metadata.zk")

# Attempts of one read-modify-write before it is refused (another writer kept winning).
WRITE_ATTEMPTS = 10
READ_TIMEOUT_S = 15
QUOTA_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                        "controller_mutation_rate", "connection_creation_rate"})


# --- reading --------------------------------------------------------------------------------------

# Unreadable znodes already reported, so a bad one is logged once, not on every 2 s re-read.
_reported: set[tuple[str, bytes]] = set()


def _report_once(path: str, data: bytes, what: str, exc: Exception) -> None:
    if (path, data) not in _reported:
        if len(_reported) > 1000:
            _reported.clear()
        _reported.add((path, data))
        log.warning("ignoring %s: unreadable %s (%s)", path, what, exc)

def _gather(zk: KazooClient, paths) -> dict[str, tuple]:
    """path -> (data, stat) of every znode in ``paths`` that exists, all asked at once."""
    pending = {path: zk.get_async(path) for path in paths}
    found = {}
    for path, result in pending.items():
        try:
            found[path] = result.get(timeout=READ_TIMEOUT_S)
        except NoNodeError:
            continue  # deleted since the listing: the next read agrees
    return found


def _listed(results: dict) -> dict:
    listed = {}
    for key, result in results.items():
        try:
            listed[key] = result.get(timeout=READ_TIMEOUT_S)
        except NoNodeError:
            listed[key] = []
    return listed


# The security znodes are re-read only when a change notification was added since the last read
# (the children version of /config/changes or an ACL change path moved, as Kafka's
# ZkNodeChangeNotificationListener follows them), or when the last full read is this old: a
# znode edited by hand without a notification is still picked up. Reading 1,000 users and 1,000
# ACL resources takes about a second of kazoo's time, too much for every 2 s re-read.
FULL_READ_INTERVAL_S = 30.0
_CHANGE_PATHS = (zn.CONFIG_CHANGES, zn.ACL_CHANGES, zn.EXTENDED_ACL_CHANGES)
_last_read: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def read(zk: KazooClient) -> tuple[dict, list, dict]:
    """(SCRAM credentials user -> mechanism -> credential, ACL tuples sorted, client quotas) as
    ZooKeeper holds them; an unreadable znode is logged and left out. The result is shared
    between calls: callers copy it (``MetadataImage.build`` does)."""
    pending = [zk.exists_async(path) for path in _CHANGE_PATHS]
    marker = tuple(getattr(p.get(timeout=READ_TIMEOUT_S), "cversion", None) for p in pending)
    now = time.monotonic()
    last = _last_read.get(zk)
    if last is not None and last[0] == marker and now - last[1] < FULL_READ_INTERVAL_S:
        return last[2]
    result = _read_all(zk)  # after the marker: a change landing meanwhile is read next time
    _last_read[zk] = (marker, now, result)
    return result


def _read_all(zk: KazooClient) -> tuple[dict, list, dict]:
    acl_types = [(pattern, code) for pattern in (zn.LITERAL, zn.PREFIXED)
                 for code in zn.RESOURCE_TYPES]
    listings = _listed({**{root: zk.get_children_async(f"/config/{root}")
                           for root in zn.QUOTA_ROOTS.values()},
                        **{key: zk.get_children_async(zn.acl_type_path(*key))
                           for key in acl_types}})
    entities: dict[str, tuple] = {}  # znode path -> quota entity
    for kind, root in zn.QUOTA_ROOTS.items():
        for child in listings[root]:
            entities[f"/config/{root}/{child}"] = ((kind, zn.desanitize(child)),)
    acl_paths = {zn.acl_path(code, pattern, name): (code, name, pattern)
                 for (pattern, code) in acl_types for name in listings[(pattern, code)]}
    found = _gather(zk, list(entities) + list(acl_paths))
    # users/U/clients/C only where a user znode has children (most have none).
    with_clients = [path for path, entity in entities.items()
                    if entity[0][0] == "user" and path in found and found[path][1].numChildren]
    user_clients = {}
    for path, clients in _listed({path: zk.get_children_async(f"{path}/clients")
                                  for path in with_clients}).items():
        for client in clients:
            user_clients[f"{path}/clients/{client}"] = (("client-id", zn.desanitize(client)),
                                                       entities[path][0])
    found.update(_gather(zk, user_clients))
    entities.update(user_clients)
    found = {path: data for path, (data, _) in found.items()}

    credentials, quotas = {}, {}
    for path, entity in entities.items():
        if path not in found:
            continue
        try:
            config = zn.decode_config(found[path])
            values = {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}
        except (ValueError, AttributeError) as exc:
            _report_once(path, found[path], "config", exc)
            continue
        if values:
            quotas[tuple(sorted(entity))] = values
        if len(entity) == 1 and entity[0][0] == "user" and entity[0][1] is not None:
            mechanisms = {m: config[m] for m in zn.SCRAM_MECHANISMS if m in config}
            if mechanisms:
                credentials[entity[0][1]] = mechanisms
    acls = set()
    for path, (code, name, pattern) in acl_paths.items():
        if path not in found:
            continue
        try:
            entries = zn.decode_acls(found[path])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            _report_once(path, found[path], "ACLs", exc)
            continue
        acls.update((code, name, pattern, principal, host, operation, permission)
                    for principal, host, operation, permission in entries)
    return credentials, sorted(acls), quotas


# --- writing (called by ZkMetadataStore, the controller's store) ----------------------------------

def _read_for_write(zk: KazooClient, path: str) -> tuple[bytes | None, int | None]:
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None, None
    return data, stat.version


def _write_or_create(txn, path: str, data: bytes, version: int | None) -> None:
    if version is None:
        txn.create(path, data)
    else:
        txn.set_data(path, data, version)


def _attempts(store, what: str, attempt) -> None:
    """Run ``attempt(txn)`` (which adds its reads' writes to ``txn``, or returns False when there
    is nothing to write) until one commits; a lost conditional write re-reads and retries."""
    for _ in range(WRITE_ATTEMPTS):
        txn = store._transaction()
        if attempt(txn) is False:
            return
        try:
            store._commit(txn, what)
            return
        except ControllerEpochMovedError:
            raise  # no retry makes this broker the controller again
        except StaleMetadataError as exc:
            log.info("%s: %s; reading again", what, exc)
    raise StaleMetadataError(f"{what} refused: other writers changed the same znodes "
                             f"{WRITE_ATTEMPTS} times in a row")


def update_scram_credentials(store, upserts, deletions) -> None:
    """Set ``(user, mechanism) -> credential`` and remove ``(user, mechanism)`` in each user's
    ``/config/users/<user>``, other keys (quotas) kept, one ``/config/changes`` notification per
    user; all in one transaction."""
    zk = store._zk
    users = sorted({user for user, _ in upserts} | {user for user, _ in deletions})

    def attempt(txn):
        for user in users:
            entity_path = f"users/{zn.sanitize(user)}"
            path = f"/config/{entity_path}"
            data, version = _read_for_write(zk, path)
            config = zn.decode_config(data)
            for (name, mechanism) in deletions:
                if name == user:
                    config.pop(mechanism, None)
            for (name, mechanism), credential in upserts.items():
                if name == user:
                    config[mechanism] = credential
            _write_or_create(txn, path, zn.encode_config(config), version)
            txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(entity_path),
                       sequence=True)

    _attempts(store, "altering SCRAM credentials", attempt)


def resource_problem(resource_type: int, name: str) -> str | None:
    """Why a resource name cannot be a znode name under /kafka-acl (Kafka writes the name into
    the path as it is, so ZooKeeper refuses these), or None."""
    if (not name or "/" in name or name in (".", "..")
            or any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in name)):
        return (f"Resource name {name!r} cannot be stored in ZooKeeper (/kafka-acl): "
                "it must not be empty, '.' or '..', nor contain '/' or control characters")
    return None


def update_acls(store, added, removed) -> dict[tuple, Exception]:
    """Add and remove ACL tuples (resource_type, name, pattern_type, principal, host,
    operation, permission): one read-modify-write transaction per resource pattern znode, with
    a change notification when it changed. As Kafka's AclAuthorizer (``updateResourceAcls`` per
    resource), a resource that cannot be written fails only its own ACLs: returns ACL tuple ->
    why, for each one not added or removed (empty: all done). A lost ZooKeeper connection
    raises (KazooException): which resources were written is unknown until the next read."""
    zk = store._zk
    failures: dict[tuple, Exception] = {}
    by_resource: dict[tuple, tuple[set, set]] = {}
    for acls, index in ((added, 0), (removed, 1)):
        for acl in acls:
            acl = tuple(acl)
            resource_type, name, pattern = acl[0], acl[1], acl[2]
            if why := resource_problem(resource_type, name):
                if index == 0:
                    failures[acl] = KafkaError(Errors.INVALID_REQUEST, why)
                continue  # a removal: no such znode can exist
            by_resource.setdefault((resource_type, pattern, name), (set(), set()))[index].add(
                acl[3:])
    for resource_type, pattern in {(t, p) for t, p, _ in by_resource}:
        zk.ensure_path(zn.acl_type_path(pattern, resource_type))

    def fail(key, exc):
        (resource_type, pattern, name), (adds, removes) = key, by_resource[key]
        for entry in adds | removes:
            failures[(resource_type, name, pattern) + entry] = exc

    # Every resource's read and transaction in flight at once (a thousand resources cost about
    # what one transaction of them all did); one whose conditional write lost to another writer
    # goes again on its own, reading fresh each time.
    keys = sorted(by_resource)
    reads = {key: zk.get_async(zn.acl_path(*key)) for key in keys}
    commits, again = [], []
    for key in keys:
        try:
            txn = store._transaction()
            if _change_resource_acls(key, *by_resource[key], _read_result(reads[key]), txn):
                commits.append((key, txn, txn.commit_async()))
        except KafkaError as exc:
            fail(key, exc)
    for key, txn, pending in commits:
        try:
            store._check_commit(txn, pending.get(timeout=READ_TIMEOUT_S),
                                f"changing the ACLs of {zn.acl_path(*key)}")
        except ControllerEpochMovedError as exc:
            fail(key, exc)  # no retry makes this broker the controller again
        except StaleMetadataError:
            again.append(key)
    for key in again:
        try:
            _attempts(store, f"changing the ACLs of {zn.acl_path(*key)}",
                      lambda txn, key=key: _change_resource_acls(
                          key, *by_resource[key], _read_for_write(zk, zn.acl_path(*key)), txn))
        except (StaleMetadataError, KafkaError) as exc:  # the caller reports it
            fail(key, exc)
    return failures


def _read_result(pending) -> tuple[bytes | None, int | None]:
    try:
        data, stat = pending.get(timeout=READ_TIMEOUT_S)
    except NoNodeError:
        return None, None
    return data, stat.version


def _change_resource_acls(key, adds, removes, read, txn) -> bool:
    """Add to ``txn`` the new ACL entries of resource pattern ``key`` (type, pattern type,
    name), whose znode held ``read`` (data, version); False if none change."""
    path = zn.acl_path(*key)
    data, version = read
    try:
        current = zn.decode_acls(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                         f"{path} holds ACLs that cannot be read ({exc}); it is left as it is "
                         "until it is fixed or deleted by hand") from None
    entries = [e for e in current if e not in removes]
    entries += sorted(e for e in adds if e not in entries)
    if entries == current:
        return False
    if entries:
        _write_or_create(txn, path, zn.encode_acls(entries), version)
    else:
        txn.delete(path, version)
    prefix, note = zn.acl_change(*key)
    txn.create(prefix, note, sequence=True)
    return True
