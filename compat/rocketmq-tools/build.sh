#!/usr/bin/env bash
# Resolves Apache RocketMQ's mqadmin (rocketmq-tools from Maven Central) into lib/ — the operator
# CLI the compatibility tests run against a node — and compiles the small launcher in src/ that
# runs it and exits once the command is done (classes/). Idempotent: skips Maven when lib/ is
# newer than pom.xml, build.sh and src/. Maven fetches into ~/.m2 once; running needs no network.
set -euo pipefail
cd "$(dirname "$0")"
stamp="lib/.resolved"
if [ -f "$stamp" ] && [ -z "$(find pom.xml build.sh src -newer "$stamp" -print -quit)" ]; then
    exit 0
fi
rm -rf lib  # copy-dependencies never removes a jar whose version changed
mvn -B -q package
ls lib/rocketmq-tools-*.jar >/dev/null
rm -rf classes
javac -d classes -cp "lib/*" $(find src -name '*.java')
touch "$stamp"
