"""Client telemetry (KIP-714): clients push their own metrics to the broker.

- ``subscriptions.py``: the CLIENT_METRICS config resource (Kafka's ``ClientMetricsConfigs``):
  validation with Kafka's messages, which subscriptions a client matches, subscription ids;
- ``manager.py``: client instances, GetTelemetrySubscriptions and PushTelemetry as Kafka's
  ``ClientMetricsManager`` answers them, and the bounded store of pushed metrics the console
  and ``/metrics`` read;
- ``otlp.py``: a push's OTLP ``MetricsData``, decompressed and parsed with
  ``opentelemetry-proto``.

State lives in one :class:`~kbroker.telemetry.manager.ClientMetricsManager` per broker, owned by
its event loop. Subscriptions are kept by the controller with the cluster-wide dynamic broker
configs (kbroker.handlers.client_metrics says how) and reach the manager through the image.
"""
