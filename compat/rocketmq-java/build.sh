#!/usr/bin/env bash
# Builds the RocketMQ Java client runner twice from one source tree:
#   target/rmq4/rocketmq-runner.jar  against rocketmq-client 4.9.x   (Maven profile rmq4)
#   target/rmq5/rocketmq-runner.jar  against rocketmq-client 5.x     (Maven profile rmq5)
# each with its dependencies in lib/ beside it. Idempotent and fast when nothing changed (skips
# Maven when a jar is newer than every input). Maven fetches into ~/.m2 once; running needs no
# network.
set -euo pipefail
cd "$(dirname "$0")"
for profile in rmq4 rmq5; do
    jar="target/$profile/rocketmq-runner.jar"
    if [ -f "$jar" ] && [ -z "$(find pom.xml build.sh src -newer "$jar" -print -quit)" ]; then
        continue
    fi
    rm -rf "target/$profile/lib"  # copy-dependencies never removes a jar whose version changed
    mvn -B -q -P "$profile" package
    test -f "$jar"
done
