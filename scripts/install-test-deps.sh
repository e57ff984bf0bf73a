#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, and nothing twice:
#   - a virtualenv in .venv with kbroker (editable) and the Python clients under test;
#   - kcat from Debian's packages; MIT Kerberos (KDC, admin and client tools, libkrb5-dev for the
#     gssapi package, Cyrus SASL's GSSAPI plugin) for the GSSAPI tests;
#   - the Java driver (Apache Kafka's kafka-clients, Spring Cloud Stream's Confluent registry
#     client and Apache Avro from Maven Central), built with Maven;
#   - Spark's Kafka connector and spark-avro jars for compat_tests/spark (Maven Central, copied by
#     Maven).
#   - Apache Kafka's own jars (DumpLogSegments for tests/log, the reference broker for tools/bench),
#     and the ones holding its message schemas (schemas/pin.json) for the generated-code test.
#   - Apache ZooKeeper's server jars for `kbroker cluster up` and tests/cluster (Maven Central).
#   - Apache Kafka 3.9 (ZooKeeper mode) for the reference cluster of tools/kafka_ref/zk_cluster.py.
#   - the franz-go driver (go build, modules from the Go module proxy: franz-go with its sr
#     package, hamba/avro, protocompile) and the KafkaJS driver (npm ci, native lz4/zstd codecs
#     built by node-gyp, @kafkajs/confluent-schema-registry).
#   - the pipeline around the broker (compat_tests/pipeline): Kafka Connect with the FileStream and
#     MirrorMaker 2 connectors and Debezium's PostgreSQL connector (Maven Central), PostgreSQL
#     (Debian) for Debezium, Quix Streams and Faust (PyPI, in .venv-processors).
# --python-only skips the system packages and the Java build (not Kafka's jars).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

# MIT Kerberos (tests/security/test_gssapi.py, kbroker.testing.kdc): the KDC and admin tools for
# a throwaway realm, the client tools, libkrb5-dev for the gssapi package (built by pip below,
# so even --python-only needs it), and Cyrus SASL's GSSAPI plugin that Debian's librdkafka
# (kcat) loads for sasl.mechanisms=GSSAPI.
KRB5_PACKAGES="krb5-kdc krb5-admin-server krb5-user libkrb5-dev libsasl2-modules-gssapi-mit"
krb5_missing() {
  [ -x /usr/sbin/krb5kdc ] && [ -x /usr/sbin/kadmin.local ] && command -v kinit >/dev/null &&
    command -v krb5-config >/dev/null && ls /usr/lib/*/sasl2/libgssapiv2.so >/dev/null 2>&1 &&
    return 1
  return 0
}
if krb5_missing; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # krb5-kdc's post-install wants to start a KDC (there is no realm yet): policy-rc.d refuses in
  # containers, which is fine; the tests run their own.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $KRB5_PACKAGES >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
extras=test,spark
[ "${1:-}" = "--python-only" ] && extras=test
# (a change to this script's install steps installs again, as a change to pyproject.toml does)
stamp="$VENV/.test-deps-${extras/,/-}-$(cat pyproject.toml "$0" | sha1sum | cut -c1-12)"
if [ ! -e "$stamp" ]; then
  "$VENV/bin/pip" install -q --upgrade pip
  # compat: the checkout on sys.path through a plain .pth line, without setuptools' editable
  # finder (~30 ms of imports at every Python process's start; the tests start hundreds)
  "$VENV/bin/pip" install -q --config-settings editable_mode=compat -e ".[$extras]"
  touch "$stamp" "$VENV/.installed"
fi

# Bytecode for the project's own sources, written once here rather than by the first of the
# processes the tests start at once (the packages pip installed are compiled already).
"$VENV/bin/python" -m compileall -q -j 0 kbroker tests compat_tests tools >/dev/null

# The message and record schemas: Apache Kafka's jars pinned in schemas/pin.json, downloaded once
# into ~/.cache/kbroker/schemas-<version>/ and verified (tests/protocol regenerates from them).
"$VENV/bin/python" tools/kafka_schemas.py fetch >/dev/null

# Apache Kafka's jars, resolved by Maven once into ~/.cache/kbroker/kafka-<version>/libs:
# tests/log runs Kafka's DumpLogSegments on our segment files (and fails without them), so
# --python-only (make test-fast) needs them too.
"$VENV/bin/python" tools/kafka_ref/run_kafka.py fetch >/dev/null

[ "${1:-}" = "--python-only" ] && exit 0

# The Python stream processors of compat_tests/pipeline (Quix Streams, Faust) in a virtualenv of
# their own, from pyproject's processors extra: Quix Streams requires confluent-kafka < 2.13,
# while the test extra pins the confluent-kafka the matrix reports.
PVENV=${PVENV:-.venv-processors}
if [ ! -x "$PVENV/bin/python" ]; then
  "$PYTHON" -m venv "$PVENV"
fi
pstamp="$PVENV/.processors-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -e "$pstamp" ]; then
  "$PVENV/bin/pip" install -q --upgrade pip
  "$PVENV/bin/pip" install -q ".[processors]"
  touch "$pstamp"
fi

if ! command -v kcat >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat >/dev/null
fi

# Headless Chromium for the web console test (tests/observability/test_console.py), driven by
# Playwright through executable_path: Playwright's own browser download is not needed.
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

if [ -f compat_tests/java/pom.xml ]; then
  jar=compat_tests/java/target/kbroker-java-driver.jar
  if [ ! -e "$jar" ] || [ compat_tests/java/pom.xml -nt "$jar" ] || \
     [ -n "$(find compat_tests/java/src -newer "$jar" -type f 2>/dev/null | head -n 1)" ]; then
    (cd compat_tests/java && mvn -q -B package -DskipTests)
  fi
fi

# Apache ZooKeeper (server + runtime deps + metrics-core and snappy-java, which it loads without
# declaring them) for the cluster tests and `kbroker cluster up`; see kbroker/cluster/zookeeper.py.
if [ -f tools/zookeeper/pom.xml ]; then
  zk_stamp=tools/zookeeper/target/jars.stamp
  if [ ! -e "$zk_stamp" ] || [ tools/zookeeper/pom.xml -nt "$zk_stamp" ]; then
    rm -rf tools/zookeeper/target/jars
    (cd tools/zookeeper && mvn -q -B dependency:copy-dependencies)
    touch "$zk_stamp"
  fi
fi

# Apache Kafka 3.9 (ZooKeeper mode, the last line with it) for the 3-node reference cluster of
# tools/kafka_ref/zk_cluster.py, which the cluster fault matrix and tools/bench_cluster.py compare to.
if [ -f tools/kafka_ref/zk_mode/pom.xml ]; then
  k39_stamp=tools/kafka_ref/zk_mode/target/jars.stamp
  if [ ! -e "$k39_stamp" ] || [ tools/kafka_ref/zk_mode/pom.xml -nt "$k39_stamp" ]; then
    rm -rf tools/kafka_ref/zk_mode/target/jars
    (cd tools/kafka_ref/zk_mode && mvn -q -B dependency:copy-dependencies)
    touch "$k39_stamp"
  fi
fi

# Kafka Connect (runtime, FileStream, MirrorMaker 2) and Debezium's PostgreSQL connector as a
# plugin, for compat_tests/pipeline; PostgreSQL from Debian for Debezium (logical decoding).
for pom in tools/connect/pom.xml tools/connect/debezium/pom.xml; do
  dir=$(dirname "$pom")
  if [ -f "$pom" ] && { [ ! -e "$dir/target/jars.stamp" ] || [ "$pom" -nt "$dir/target/jars.stamp" ]; }; then
    rm -rf "$dir/target/jars" "$dir/target/plugins"
    (cd "$dir" && mvn -q -B dependency:copy-dependencies)
    touch "$dir/target/jars.stamp"
  fi
done
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi

# The Flink job of compat_tests/pipeline/test_flink.py (Flink and its Kafka connector from Maven
# Central), compiled with its class path copied into target/jars.
if [ -f compat_tests/pipeline/flink/pom.xml ]; then
  flink_class=compat_tests/pipeline/flink/target/classes/dev/kbroker/flink/CopyJob.class
  if [ ! -e "$flink_class" ] || [ compat_tests/pipeline/flink/pom.xml -nt "$flink_class" ] || \
     [ -n "$(find compat_tests/pipeline/flink/src -newer "$flink_class" -type f | head -n 1)" ]; then
    rm -rf compat_tests/pipeline/flink/target/jars
    (cd compat_tests/pipeline/flink && mvn -q -B package dependency:copy-dependencies -DskipTests)
  fi
fi

# Spark's Kafka connector and the jars it needs beyond the pyspark wheel, for spark.jars.
if [ -f compat_tests/spark/pom.xml ]; then
  spark_stamp=compat_tests/spark/target/jars.stamp
  if [ ! -e "$spark_stamp" ] || [ compat_tests/spark/pom.xml -nt "$spark_stamp" ]; then
    rm -rf compat_tests/spark/target/jars
    (cd compat_tests/spark && mvn -q -B dependency:copy-dependencies)
    touch "$spark_stamp"
  fi
fi

# The franz-go driver (Go modules from the module proxy, pinned by compat_tests/go/go.sum).
if [ -f compat_tests/go/go.mod ]; then
  go_bin=compat_tests/go/bin/kbroker-go-driver
  if ! command -v go >/dev/null 2>&1; then
    echo "install-test-deps: go not found; the franz-go driver is not built" >&2
  elif [ ! -e "$go_bin" ] || [ -n "$(find compat_tests/go -maxdepth 1 \( -name '*.go' -o \
       -name 'go.mod' -o -name 'go.sum' \) -newer "$go_bin" | head -n 1)" ]; then
    (cd compat_tests/go && go build -o bin/kbroker-go-driver .)
  fi
fi

# The KafkaJS driver (npm ci from compat_tests/js/package-lock.json). The lz4 and zstd codecs are
# native addons; cppzst's build asks for C++11, which Node 20's headers reject, hence C++17.
if [ -f compat_tests/js/package-lock.json ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-test-deps: npm not found; the KafkaJS driver is not installed" >&2
  elif [ ! -e compat_tests/js/node_modules/.package-lock.json ] || \
       [ compat_tests/js/package-lock.json -nt compat_tests/js/node_modules/.package-lock.json ]; then
    (cd compat_tests/js && CXXFLAGS="${CXXFLAGS:-} -std=c++17" npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
