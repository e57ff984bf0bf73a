"""Security: TLS contexts, principals and SASL mechanisms (sans-I/O where it can be).

Key files:

- ``tls.py`` builds a listener's ``ssl.SSLContext`` from Kafka's ``ssl.*`` keys (PEM and PKCS12
  key stores and trust stores, client authentication, protocols, cipher suites);
- ``principal.py`` turns a client certificate's subject into Kafka's principal name
  (``ssl.principal.mapping.rules``);
- ``sasl/`` holds the mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with Kafka's unsecured JWS
  validator or, ``sasl/jwt.py``, signed tokens checked against a JWKS) as small state machines:
  bytes in, challenge out, no sockets (the JWKS is read by ``kbroker/server/jwks.py``); ``sasl/client.py`` the
  client side of PLAIN and SCRAM that a broker uses towards other brokers;
- ``inter_broker.py`` reads how a broker connects to the others (the inter-broker listener's TLS
  context and SASL credentials), for ``kbroker/replica/broker_client.py``.

The per-connection authentication flow (which requests are allowed before authentication, frame
caps, failure delays) lives in ``kbroker/server/authenticator.py``.

Concurrency rule: everything here is called on the event loop and keeps no shared mutable state
except the once-per-address failure log.
"""
