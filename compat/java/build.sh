#!/usr/bin/env bash
# Builds the Kafka Java client runner: target/kafka-runner.jar (+ target/lib/). Idempotent and
# fast when nothing changed (skips Maven when the jar is newer than every input). Maven fetches
# dependencies into ~/.m2 once; running the jar needs no network.
set -euo pipefail
cd "$(dirname "$0")"
jar=target/kafka-runner.jar
if [ -f "$jar" ] && [ -z "$(find pom.xml build.sh src -newer "$jar" -print -quit)" ]; then
    exit 0
fi
rm -rf target/lib  # copy-dependencies never removes a jar whose version changed
mvn -B -q package
test -f "$jar"
