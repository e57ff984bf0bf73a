"""How brokers find each other's registry: each registers its registry listener as one more
endpoint of its broker registration (``/brokers/ids/N``), under the listener name
``SCHEMA_REGISTRY`` and the security protocol PLAINTEXT (http) or SSL (https).

Kafka clients never see it: a Metadata answer lists each broker's endpoint of the listener the
request came in on, and the inter-broker code looks its own listener up by name. A broker that
does not lead ``_schemas-0`` forwards a request to the leader's registered URL.
"""

from __future__ import annotations

LISTENER = "SCHEMA_REGISTRY"


def registration_endpoint(bound: tuple[str, str, int], advertised_host: str, endpoint_class):
    """The registration endpoint of this broker's registry listening on ``bound`` (scheme, bind
    host, port); a wildcard bind address is replaced by the host the broker advertises."""
    scheme, host, port = bound
    if host in ("", "0.0.0.0", "::") and advertised_host:
        host = advertised_host
    protocol = "SSL" if scheme == "https" else "PLAINTEXT"
    return endpoint_class(LISTENER, host, port, protocol)


def registry_url(info, scheme: str = "http") -> str | None:
    """The registry URL broker ``info`` (a metadata image's BrokerInfo) registered. Every broker
    of a cluster serves the same scheme (the registration keeps no scheme in the endpoint)."""
    endpoint = info.endpoints.get(LISTENER)
    if endpoint is None:
        return None
    host, port = endpoint
    return f"{scheme}://{host}:{port}"
