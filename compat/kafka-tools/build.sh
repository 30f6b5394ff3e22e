#!/usr/bin/env bash
# Resolves Apache Kafka's command-line tools (kafka-topics & co.) and the Connect runtime into lib/
# once, and compiles the test source connector (src/) against them into lib/; quick when lib/ is
# newer than its inputs. Maven fetches into ~/.m2 once; running them needs no network.
set -euo pipefail
cd "$(dirname "$0")"
stamp=lib/.stamp
if [ -f "$stamp" ] && [ -z "$(find pom.xml build.sh src -newer "$stamp" -print -quit)" ]; then
    exit 0
fi
rm -rf lib target/connect
mvn -B -q dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime
mkdir -p target/connect
javac --release 17 -nowarn -cp 'lib/*' -d target/connect $(find src -name '*.java')
cp -r src/META-INF target/connect/
jar cf lib/rockafka-connect-lines.jar -C target/connect .
touch "$stamp"
