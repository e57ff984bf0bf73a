#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, and nothing twice:
#   - a virtualenv in .venv with kbroker (editable) and the Python clients under test;
#   - kcat from Debian's packages;
#   - the Java driver (Apache Kafka's kafka-clients from Maven Central), built with Maven;
#   - Spark's Kafka connector jars for compat_tests/spark (Maven Central, copied by Maven).
# --python-only skips the system packages and the Java build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.test-deps-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -e "$stamp" ]; then
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e '.[test]'
  touch "$stamp" "$VENV/.installed"
fi

[ "${1:-}" = "--python-only" ] && exit 0

if ! command -v kcat >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat >/dev/null
fi

if [ -f compat_tests/java/pom.xml ]; then
  jar=compat_tests/java/target/kbroker-java-driver.jar
  if [ ! -e "$jar" ] || [ compat_tests/java/pom.xml -nt "$jar" ] || \
     [ -n "$(find compat_tests/java/src -newer "$jar" -type f 2>/dev/null | head -n 1)" ]; then
    (cd compat_tests/java && mvn -q -B package -DskipTests)
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
