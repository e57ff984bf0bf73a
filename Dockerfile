# kbroker: a slim, non-root single-node broker image.
#   docker build -t kbroker .
#   docker run --rm -p 9092:9092 kbroker                      # production defaults
#   docker run --rm -p 9092:9092 kbroker serve --dev ...      # the dev profile (see docs/dev-ci.md)
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kbroker ./kbroker
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/kbroker --create-home kbroker
COPY --from=build /wheels /wheels
# The telemetry extra decodes the metrics clients push (KIP-714) for the console and /metrics.
RUN pip install --no-cache-dir "$(ls /wheels/kbroker-*.whl)[telemetry]" --find-links /wheels \
    && rm -rf /wheels
USER kbroker
WORKDIR /var/lib/kbroker
VOLUME ["/var/lib/kbroker"]
EXPOSE 9092 8080
# Bind every interface inside the container; advertise what clients on the host reach.
# Override with KBROKER_ADVERTISED (e.g. PLAINTEXT://kbroker:9092 inside a compose network), and
# KBROKER_LISTENERS with it for more than one listener (docker-compose.yml's single node).
ENV KBROKER_LISTENERS=PLAINTEXT://0.0.0.0:9092
ENV KBROKER_ADVERTISED=PLAINTEXT://localhost:9092
# The HTTP port: /healthz, /readyz, /metrics and the console (docs/observability.md).
ENV KBROKER_HTTP_PORT=8080
# /healthz answers 200 while the broker serves; python is the one HTTP client the image has.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["sh", "-c", "python -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:$KBROKER_HTTP_PORT/healthz', timeout=4)\""]
ENTRYPOINT ["sh", "-c", "exec kbroker \"$@\" --set listeners=\"$KBROKER_LISTENERS\" --set advertised.listeners=\"$KBROKER_ADVERTISED\" --set http.port=\"$KBROKER_HTTP_PORT\" --set log.dirs=/var/lib/kbroker/data", "kbroker"]
CMD ["serve"]
