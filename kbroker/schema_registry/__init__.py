"""The schema registry: Confluent Schema Registry's REST API served by the broker itself.

Applications that use Confluent's serializers (confluent-kafka, the Java, Go and JavaScript
clients) talk to it as to Confluent's registry; kbroker needs no second service. Off unless
``schema.registry.listeners`` is set (``kbroker dev`` turns it on). docs/schema-registry.md is
the user's guide.

Key files:
- ``service`` — :class:`SchemaRegistry`: the listeners, a request's dispatch (authenticate,
  route, authorize, run here or forward to the leader), metrics;
- ``api`` — the routes, one small function each, declared once with ``@route``;
- ``operations`` — the writes (register, deletes, config, mode) as coordinator operations that
  return records and an answer, and the reads that need more than a lookup;
- ``store`` — :class:`RegistryShard`, the state replayed from ``_schemas`` (subjects, versions,
  ids, configs, modes);
- ``records`` — Confluent's ``_schemas`` key and value format;
- ``compatibility`` — the levels, composed from a format's one question;
- ``formats/`` — Avro, Protobuf, JSON Schema behind ``formats.parse`` (their own note);
- ``errors`` — Confluent's error codes and messages;
- ``http`` — the HTTP/1.1 server (bodies, keep-alive, TLS);
- ``security`` — TLS, HTTP basic authentication against kbroker's users, ACLs;
- ``cluster`` — the registry URL each broker publishes, for forwarding.

State machine and concurrency: the state is the coordinator shard of ``_schemas`` partition 0,
run by kbroker's coordinator runtime (kbroker.coordinator.runtime) on the broker that leads that
partition: an operation validates and returns records; the runtime appends them (acks=all),
replays them into the shard, and answers once they are committed; a write that fails is undone.
Everything runs on the broker's event loop, one operation at a time, so ids and versions are
assigned without locks. The layer sits beside ``server``: it uses the coordinator runtime,
``protocol`` and ``security``, and nothing of ``handlers`` or ``log``.
"""


def enabled(config) -> bool:
    """The registry serves: ``schema.registry.listeners`` is set, or the broker runs in dev mode
    (which listens on 8081 by default). Here, not in ``service``, so that a broker without the
    registry never imports it."""
    return bool(config.get("schema.registry.listeners")) or bool(config.get("dev.mode"))
