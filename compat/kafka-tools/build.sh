#!/usr/bin/env bash
# Resolves Apache Kafka's command-line tools (kafka-topics & co.) into lib/ once; quick when
# lib/ is newer than the pom. Maven fetches into ~/.m2 once; running them needs no network.
set -euo pipefail
cd "$(dirname "$0")"
stamp=lib/.stamp
if [ -f "$stamp" ] && [ -z "$(find pom.xml build.sh -newer "$stamp" -print -quit)" ]; then
    exit 0
fi
rm -rf lib
mvn -B -q dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime
touch "$stamp"
