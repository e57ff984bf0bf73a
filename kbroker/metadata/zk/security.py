"""SCRAM credentials, ACLs and client quotas in ZooKeeper, in Kafka's ZooKeeper-mode layout.

Where they live (paths and JSON in :mod:`.znodes`):

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

**Reads**: :func:`read_all` (start-up, the periodic safety net) lists and reads everything at
once; a notification reads only what it names: :func:`read_entity` one config entity (a user,
a client, a user's client, an ip), :func:`read_acl_resource` one resource pattern. Each returns
a :class:`MetadataDelta` against the image. An unreadable znode is logged once and left out.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import NoNodeError

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.store import FencedError, StaleMetadataError
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.client import aio, gather
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.metadata.zk")

# Attempts of one read-modify-write before it is refused (another writer kept winning).
WRITE_ATTEMPTS = 10
QUOTA_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                        "controller_mutation_rate", "connection_creation_rate"})


# --- reading --------------------------------------------------------------------------------------

# Unreadable znodes already reported, so a bad one is logged once, not on every read.
_reported: set[tuple[str, bytes]] = set()


def _report_once(path: str, data: bytes, what: str, exc: Exception) -> None:
    if (path, data) not in _reported:
        if len(_reported) > 1000:
            _reported.clear()
        _reported.add((path, data))
        log.warning("ignoring %s: unreadable %s (%s)", path, what, exc)


async def _gather_data(zk, paths) -> dict[str, tuple]:
    """path -> (data, stat) of every znode in ``paths`` that exists, all asked at once."""
    paths = list(paths)
    found = {}
    for path, result in zip(paths, await gather([zk.get_async(p) for p in paths])):
        if isinstance(result, NoNodeError):
            continue  # deleted since the listing: the next read agrees
        if isinstance(result, Exception):
            raise result
        found[path] = result
    return found


async def _listed(zk, paths: dict) -> dict:
    keys = list(paths)
    results = await gather([zk.get_children_async(paths[k]) for k in keys])
    listed = {}
    for key, result in zip(keys, results):
        if isinstance(result, NoNodeError):
            result = []
        elif isinstance(result, Exception):
            raise result
        listed[key] = result
    return listed


def _entity_config(path: str, data: bytes | None) -> tuple[dict, dict] | None:
    """(quotas, every key) of a config entity znode, or None when unreadable."""
    try:
        config = zn.decode_config(data)
        return {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}, config
    except (ValueError, AttributeError) as exc:
        _report_once(path, data, "config", exc)
        return None


def _acl_entries(path: str, data: bytes | None) -> list | None:
    try:
        return zn.decode_acls(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        _report_once(path, data, "ACLs", exc)
        return None


async def read_all(zk) -> tuple[dict, list, dict]:
    """(SCRAM credentials user -> mechanism -> credential, ACL tuples sorted, client quotas) as
    ZooKeeper holds them."""
    acl_types = [(pattern, code) for pattern in (zn.LITERAL, zn.PREFIXED)
                 for code in zn.RESOURCE_TYPES]
    listings = await _listed(zk, {**{root: f"/config/{root}" for root in zn.QUOTA_ROOTS.values()},
                                  **{key: zn.acl_type_path(*key) for key in acl_types}})
    entities: dict[str, tuple] = {}  # znode path -> quota entity
    for kind, root in zn.QUOTA_ROOTS.items():
        for child in listings[root]:
            entities[f"/config/{root}/{child}"] = ((kind, zn.desanitize(child)),)
    acl_paths = {zn.acl_path(code, pattern, name): (code, name, pattern)
                 for (pattern, code) in acl_types for name in listings[(pattern, code)]}
    found = await _gather_data(zk, list(entities) + list(acl_paths))
    # users/U/clients/C only where a user znode has children (most have none).
    with_clients = [path for path, entity in entities.items()
                    if entity[0][0] == "user" and path in found and found[path][1].numChildren]
    user_clients = {}
    for path, clients in (await _listed(zk, {p: f"{p}/clients" for p in with_clients})).items():
        for client in clients:
            user_clients[f"{path}/clients/{client}"] = (("client-id", zn.desanitize(client)),
                                                       entities[path][0])
    found.update(await _gather_data(zk, user_clients))
    entities.update(user_clients)
    credentials, quotas = {}, {}
    for path, entity in entities.items():
        if path not in found or (read := _entity_config(path, found[path][0])) is None:
            continue
        values, config = read
        if values:
            quotas[tuple(sorted(entity))] = values
        if len(entity) == 1 and entity[0][0] == "user" and entity[0][1] is not None:
            mechanisms = {m: config[m] for m in zn.SCRAM_MECHANISMS if m in config}
            if mechanisms:
                credentials[entity[0][1]] = mechanisms
    acls = set()
    for path, (code, name, pattern) in acl_paths.items():
        if path in found and (entries := _acl_entries(path, found[path][0])) is not None:
            acls.update((code, name, pattern, principal, host, operation, permission)
                        for principal, host, operation, permission in entries)
    return credentials, sorted(acls), quotas


def entity_of(entity_path: str) -> tuple | None:
    """The quota entity a ``/config/changes`` entity path names (``users/U``, ``clients/C``,
    ``users/U/clients/C``, ``ips/IP``), as MetadataImage.client_quotas keys it."""
    parts = entity_path.split("/")
    kinds = {root: kind for kind, root in zn.QUOTA_ROOTS.items()}
    if len(parts) == 2 and parts[0] in kinds:
        return ((kinds[parts[0]], zn.desanitize(parts[1])),)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return tuple(sorted((("user", zn.desanitize(parts[1])),
                             ("client-id", zn.desanitize(parts[3])))))
    return None


async def read_entity(zk, image, entity_path: str) -> MetadataDelta:
    """One config entity's quotas (and a user's SCRAM credentials) as they are now."""
    entity = entity_of(entity_path)
    if entity is None:
        return MetadataDelta()
    path = f"/config/{entity_path}"
    entry = (await _gather_data(zk, [path])).get(path)
    read = _entity_config(path, entry[0] if entry else None)
    if read is None:
        return MetadataDelta()
    values, config = read
    quotas = {}
    if values != dict(image.client_quotas.get(entity, {})):
        quotas[entity] = values
    scram = {}
    if len(entity) == 1 and entity[0][0] == "user" and entity[0][1] is not None:
        user = entity[0][1]
        held = image.scram_credentials.get(user, {})
        for mechanism in zn.SCRAM_MECHANISMS:
            if config.get(mechanism) != held.get(mechanism):
                scram[(user, mechanism)] = config.get(mechanism)
    return MetadataDelta(client_quotas=quotas, scram=scram)


async def read_acl_resource(zk, image, resource_type: int, pattern: int, name: str
                            ) -> MetadataDelta:
    """One resource pattern's ACLs as they are now, against the image's."""
    path = zn.acl_path(resource_type, pattern, name)
    entry = (await _gather_data(zk, [path])).get(path)
    entries = _acl_entries(path, entry[0] if entry else None)
    if entries is None:
        return MetadataDelta()
    now = {(resource_type, name, pattern, *e) for e in entries}
    held = {a for a in image.acls if a[0] == resource_type and a[1] == name and a[2] == pattern}
    return MetadataDelta(acls_added=tuple(sorted(now - held)),
                         acls_removed=tuple(sorted(held - now)))


def acl_change_resource(path_prefix: str, data: bytes) -> tuple[int, int, str] | None:
    """(resource type, pattern type, name) an ACL change notification names: ``TOPIC:name``
    under /kafka-acl-changes, JSON under /kafka-acl-extended-changes."""
    import json

    try:
        if path_prefix == zn.ACL_CHANGES:
            type_name, _, name = data.decode().partition(":")
            return zn.resource_type_from_path(type_name), zn.LITERAL, name
        value = json.loads(data.decode())
        return (zn.resource_type_from_path(value["resourceType"]),
                zn.PREFIXED if value.get("patternType", "").upper() == "PREFIXED"
                else zn.LITERAL, value["name"])
    except (ValueError, KeyError, AttributeError):
        log.warning("ignoring an unreadable ACL change notification: %r", data[:200])
        return None


# --- writing (called by the ZooKeeper store) -------------------------------------------------------

async def _read_for_write(zk, path: str) -> tuple[bytes | None, int | None]:
    try:
        data, stat = await aio(zk.get_async(path))
    except NoNodeError:
        return None, None
    return data, stat.version


def _write_or_create(txn, path: str, data: bytes, version: int | None) -> None:
    if version is None:
        txn.create(path, data)
    else:
        txn.set_data(path, data, version)


async def _attempts(store, what: str, attempt) -> None:
    """Run ``await attempt(txn)`` (which adds its reads' writes to ``txn``, or returns False when
    there is nothing to write) until one commits; a lost conditional write re-reads and
    retries."""
    for _ in range(WRITE_ATTEMPTS):
        txn = store.transaction()
        if await attempt(txn) is False:
            return
        try:
            await store.run(txn, what)
            return
        except FencedError:
            raise  # no retry makes this broker the controller again
        except StaleMetadataError as exc:
            log.info("%s: %s; reading again", what, exc)
    raise StaleMetadataError(f"{what} refused: other writers changed the same znodes "
                             f"{WRITE_ATTEMPTS} times in a row")


async def update_scram_credentials(store, changes) -> None:
    """Set ``(user, mechanism) -> credential`` (None removes it) in each user's
    ``/config/users/<user>``, other keys (quotas) kept, one ``/config/changes`` notification per
    user; all in one transaction."""
    zk = store._zk
    users = sorted({user for user, _ in changes})

    async def attempt(txn):
        for user in users:
            entity_path = f"users/{zn.sanitize(user)}"
            path = f"/config/{entity_path}"
            data, version = await _read_for_write(zk, path)
            config = zn.decode_config(data)
            for (name, mechanism), credential in changes.items():
                if name != user:
                    continue
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = credential
            _write_or_create(txn, path, zn.encode_config(config), version)
            txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(entity_path),
                       sequence=True)

    await _attempts(store, "altering SCRAM credentials", attempt)


async def set_client_quotas(store, quotas) -> None:
    """Write each entity of ``quotas`` (entity -> its whole quota set) in Kafka's ZooKeeper
    layout, with a /config/changes notification each, in one transaction. Keys other than
    quotas in the same znode (SCRAM credentials in /config/users/U) are kept; an entity with no
    quota left keeps its znode with an empty config, as Kafka's ZooKeeper mode leaves it."""
    zk = store._zk

    async def attempt(txn):
        created = set()
        # Parents first: users/U is written before users/U/clients/C needs it to exist.
        for entity_path, entity in sorted((zn.quota_entity_path(e), e) for e in quotas):
            path = f"/config/{entity_path}"
            parts = entity_path.split("/")
            if len(parts) == 4:  # users/U/clients/C: the parents may not exist yet
                for parent in (f"/config/users/{parts[1]}", f"/config/users/{parts[1]}/clients"):
                    if parent not in created and (await _read_for_write(zk, parent))[1] is None:
                        txn.create(parent, b"")
                        created.add(parent)
            data, version = await _read_for_write(zk, path)
            created.add(path)
            config = {k: v for k, v in zn.decode_config(data).items() if k not in QUOTA_KEYS}
            config.update({k: zn.encode_quota_value(k, v) for k, v in quotas[entity].items()})
            _write_or_create(txn, path, zn.encode_config(config), version)
            txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(entity_path),
                       sequence=True)

    await _attempts(store, "altering client quotas", attempt)


def resource_problem(resource_type: int, name: str) -> str | None:
    """Why a resource name cannot be a znode name under /kafka-acl (Kafka writes the name into
    the path as it is, so ZooKeeper refuses these), or None."""
    if (not name or "/" in name or name in (".", "..")
            or any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in name)):
        return (f"Resource name {name!r} cannot be stored in ZooKeeper (/kafka-acl): "
                "it must not be empty, '.' or '..', nor contain '/' or control characters")
    return None


async def update_acls(store, added, removed) -> dict[tuple, Exception]:
    """Add and remove ACL tuples (resource_type, name, pattern_type, principal, host,
    operation, permission): one read-modify-write transaction per resource pattern znode, with
    a change notification when it changed. As Kafka's AclAuthorizer (``updateResourceAcls`` per
    resource), a resource that cannot be written fails only its own ACLs: returns ACL tuple ->
    why, for each one not added or removed (empty: all done). A lost ZooKeeper connection
    raises: which resources were written is unknown until the next read."""
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
    await gather([zk.ensure_path_async(zn.acl_type_path(pattern, resource_type))
                  for resource_type, pattern in {(t, p) for t, p, _ in by_resource}])

    def fail(key, exc):
        (resource_type, pattern, name), (adds, removes) = key, by_resource[key]
        for entry in adds | removes:
            failures[(resource_type, name, pattern) + entry] = exc

    # Every resource's read and transaction in flight at once (a thousand resources cost about
    # what one transaction of them all did); one whose conditional write lost to another writer
    # goes again on its own, reading fresh each time.
    keys = sorted(by_resource)
    reads = await gather([zk.get_async(zn.acl_path(*key)) for key in keys])
    commits, again = [], []
    for key, read in zip(keys, reads):
        try:
            txn = store.transaction()
            if _change_resource_acls(key, *by_resource[key], _read_result(read), txn):
                commits.append((key, txn))
        except KafkaError as exc:
            fail(key, exc)
    results = await gather([txn.commit_async() for _, txn in commits])
    for (key, txn), result in zip(commits, results):
        if isinstance(result, Exception):
            raise result
        try:
            store._check(txn, result, f"changing the ACLs of {zn.acl_path(*key)}")
        except FencedError as exc:
            fail(key, exc)  # no retry makes this broker the controller again
        except StaleMetadataError:
            again.append(key)
    for key in again:
        async def attempt(txn, key=key):
            return _change_resource_acls(key, *by_resource[key],
                                         await _read_for_write(zk, zn.acl_path(*key)), txn)
        try:
            await _attempts(store, f"changing the ACLs of {zn.acl_path(*key)}", attempt)
        except (StaleMetadataError, KafkaError) as exc:  # the caller reports it
            fail(key, exc)
    return failures


def _read_result(result) -> tuple[bytes | None, int | None]:
    if isinstance(result, NoNodeError):
        return None, None
    if isinstance(result, Exception):
        raise result
    data, stat = result
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
