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
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER kbroker
WORKDIR /var/lib/kbroker
VOLUME ["/var/lib/kbroker"]
EXPOSE 9092
# Bind every interface inside the container; advertise what clients on the host reach.
# Override with KBROKER_ADVERTISED (e.g. PLAINTEXT://kbroker:9092 inside a compose network).
ENV KBROKER_ADVERTISED=PLAINTEXT://localhost:9092
# TODO(/healthz): switch to `curl -f http://localhost:<http-port>/healthz` once the HTTP
# endpoint lands (issue 15 item 7); until then a real Metadata round trip through the CLI.
HEALTHCHECK --interval=10s --timeout=8s --start-period=5s --retries=3 \
    CMD ["kbroker", "cluster", "info", "--brokers", "localhost:9092"]
ENTRYPOINT ["sh", "-c", "exec kbroker \"$@\" --set listeners=PLAINTEXT://0.0.0.0:9092 --set advertised.listeners=\"$KBROKER_ADVERTISED\" --set log.dirs=/var/lib/kbroker/data", "kbroker"]
CMD ["serve"]
