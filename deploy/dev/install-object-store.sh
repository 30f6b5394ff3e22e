#!/usr/bin/env bash
# Installs the S3-compatible server the tiered-storage tests run against: s3proxy
# (org.gaul:s3proxy, Apache-2.0), a real S3 HTTP server in Java with a filesystem backend,
# fetched from Maven Central as its jar-with-dependencies. No build: about 6 s with a warm
# network, a 40 MiB jar, Java 17 (already a test dependency). The jar is cached outside the
# repository in $ROCKAFKA_TOOLS/lib (default ~/.cache/rockafka/lib); a second run finds it and
# does nothing. Idempotent.
# Why s3proxy and not SeaweedFS (built from Go, ~6 min on 2 cores) or an in-process emulator:
# docs/design/tiered-storage.md ("The object-store server").
set -euo pipefail

S3PROXY_VERSION="${S3PROXY_VERSION:-2.6.0}"
TOOLS="${ROCKAFKA_TOOLS:-$HOME/.cache/rockafka}"
LIB="$TOOLS/lib"
JAR="$LIB/s3proxy-${S3PROXY_VERSION}.jar"
mkdir -p "$LIB"

if [ -s "$JAR" ]; then  # written whole by the rename below, so present means complete
    echo "object store: s3proxy $S3PROXY_VERSION at $JAR"
    exit 0
fi
for tool in java mvn; do
    command -v "$tool" >/dev/null || { echo "object store: $tool is needed for s3proxy" >&2; exit 1; }
done
echo "object store: fetching s3proxy $S3PROXY_VERSION from Maven Central"
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mvn -q -B dependency:copy \
    "-Dartifact=org.gaul:s3proxy:${S3PROXY_VERSION}:jar:jar-with-dependencies" \
    "-DoutputDirectory=$tmp" >/dev/null
mv "$tmp/s3proxy-${S3PROXY_VERSION}-jar-with-dependencies.jar" "$JAR.tmp"
mv "$JAR.tmp" "$JAR"
echo "object store: fetched in $(( $(date +%s) - start ))s, $(du -h "$JAR" | cut -f1) at $JAR"
