#!/usr/bin/env bash
# Installs the S3-compatible server the tiered-storage tests run against: SeaweedFS's `weed`
# (its S3 gateway, `weed server -s3` or `weed mini`), built from its Go module through the Go
# module proxy. The binary is cached outside the repository in $ROCKAFKA_TOOLS/bin (default
# ~/.cache/rockafka/bin); a second run finds it and does nothing. Idempotent.
# Why SeaweedFS and not another server: docs/design/tiered-storage.md ("The object-store server").
set -euo pipefail

SEAWEEDFS_REF="${SEAWEEDFS_REF:-latest}"
TOOLS="${ROCKAFKA_TOOLS:-$HOME/.cache/rockafka}"
BIN="$TOOLS/bin"
mkdir -p "$BIN"

if [ -x "$BIN/weed" ] && "$BIN/weed" version >/dev/null 2>&1; then
    echo "object store: $("$BIN/weed" version | head -1) at $BIN/weed"
    exit 0
fi
if ! command -v go >/dev/null; then
    echo "object store: Go is needed to build SeaweedFS (apt-get install golang-go)" >&2
    exit 1
fi
echo "object store: building SeaweedFS weed from its Go module (takes minutes once)"
start=$(date +%s)
# `go install module@version` refuses SeaweedFS (its go.mod has replace directives), so the module
# is fetched through the module proxy and built as the main module from its (read-only) copy.
# -p 2: the machine is small and shared; -trimpath -ldflags="-s -w": a smaller binary.
dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@${SEAWEEDFS_REF}" \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "object store: go mod download of SeaweedFS failed" >&2; exit 1; }
(cd "$dir" && GOFLAGS="-p=2 -mod=mod" go build -trimpath -ldflags="-s -w" -o "$BIN/weed.tmp" ./weed)
mv "$BIN/weed.tmp" "$BIN/weed"
echo "object store: built in $(( $(date +%s) - start ))s, $(du -h "$BIN/weed" | cut -f1) at $BIN/weed"
