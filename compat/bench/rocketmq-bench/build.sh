#!/usr/bin/env bash
# Builds target/rocketmq-bench.jar (the native throughput program of `make bench`) with its
# dependencies in target/lib/. Idempotent: skips Maven when the jar is newer than every input.
set -euo pipefail
cd "$(dirname "$0")"
jar=target/rocketmq-bench.jar
if [ -f "$jar" ] && [ -z "$(find pom.xml build.sh src -newer "$jar" -print -quit)" ]; then
    exit 0
fi
rm -rf target/lib
mvn -B -q package
test -f "$jar"
