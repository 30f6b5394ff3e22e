#!/usr/bin/env bash
# Puts htmx (the console's one front-end library) into rockafka/console/static/, from its npm
# package at a pinned version, checked against a pinned SHA-256, so the console never loads
# anything from elsewhere at run time. Idempotent: does nothing when the right file is there.
# Needs npm (Debian: apt-get install npm); without it the console still works, with whole-page
# loads instead of partial updates.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=2.0.8
SHA256=22283ef68cb7545914f0a88a1bdedc7256a703d1d580c1d255217d0a50d31313
TARGET=rockafka/console/static/htmx.min.js

if [ -f "$TARGET" ] && echo "$SHA256  $TARGET" | sha256sum -c --status; then
    exit 0
fi
if ! command -v npm >/dev/null; then
    echo "vendor-htmx: npm not found; the console will work without htmx (apt-get install npm to add it)" >&2
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "htmx.org@$VERSION" --silent >/dev/null 2>&1)
tar -xzf "$work/htmx.org-$VERSION.tgz" -C "$work" package/dist/htmx.min.js
if ! echo "$SHA256  $work/package/dist/htmx.min.js" | sha256sum -c --status; then
    echo "vendor-htmx: htmx.org@$VERSION does not have the pinned checksum; not installed" >&2
    exit 1
fi
install -m 0644 "$work/package/dist/htmx.min.js" "$TARGET"
echo "vendor-htmx: htmx $VERSION -> $TARGET"
