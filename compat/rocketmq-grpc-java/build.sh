#!/usr/bin/env bash
# Builds the RocketMQ 5 Java gRPC client runner (target/grpc-runner.jar, dependencies in
# target/lib/) against rocketmq-client-java from Maven Central. Idempotent and fast when nothing
# changed (skips Maven when the jar is newer than every input, the shared Report.java included).
set -euo pipefail
cd "$(dirname "$0")"
jar="target/grpc-runner.jar"
shared="../rocketmq-java/src/main/java/rockafka/compat/rocketmq/Report.java"
if [ -f "$jar" ] && [ -z "$(find pom.xml build.sh src "$shared" -newer "$jar" -print -quit)" ]; then
    exit 0
fi
rm -rf target/lib  # copy-dependencies never removes a jar whose version changed
mvn -B -q package
test -f "$jar"
