#!/usr/bin/env bash
# librdkafka's own tests against a fresh Rockafka node and Apache Kafka 4.4, side by side.
#
#   compat/librdkafka/run.sh                 # tests 0041 0018
#   TESTS="0041 0018 0113" compat/librdkafka/run.sh
#   BUILD_ONLY=1 compat/librdkafka/run.sh    # fetch and build, run nothing
#
# librdkafka 2.12.1 comes from the rdkafka-sys 4.10.0 crate (it bundles the sources with their
# tests/ folder), fetched with cargo, unpacked and built once under $RDK_CACHE
# (~/.cache/rockafka/librdkafka); nothing fetched is ever placed in the repository.
# The run itself is compat/librdkafka/side_by_side.py. Every process started here is stopped on
# exit (trap); a failed fetch or build prints what failed and exits non-zero.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CRATE_VERSION="${CRATE_VERSION:-4.10.0}"
RDK_CACHE="${RDK_CACHE:-$HOME/.cache/rockafka/librdkafka}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
FETCH_TIMEOUT="${FETCH_TIMEOUT:-300}"
BUILD_TIMEOUT="${BUILD_TIMEOUT:-1800}"
SRC="$RDK_CACHE/rdkafka-sys-$CRATE_VERSION/librdkafka"
RUNNER="$SRC/tests/test-runner"

die() { echo "compat-librdkafka: $*" >&2; exit 1; }

DRIVER_PID=""
cleanup() {
    if [ -n "$DRIVER_PID" ] && kill -0 "$DRIVER_PID" 2>/dev/null; then
        kill -TERM "$DRIVER_PID" 2>/dev/null || true
        for _ in $(seq 1 60); do kill -0 "$DRIVER_PID" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$DRIVER_PID" 2>/dev/null || true
    fi
    if [ -n "${FETCH_DIR:-}" ]; then rm -rf "$FETCH_DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$RDK_CACHE"

# -- 1. fetch the crate (once) ------------------------------------------------------------------
crate_file() { ls "$RDK_CACHE"/rdkafka-sys-"$CRATE_VERSION"*.crate 2>/dev/null | head -1; }
if [ -z "$(crate_file)" ]; then
    command -v cargo >/dev/null || die "cargo is needed to fetch the rdkafka-sys crate (apt-get install cargo)"
    echo "compat-librdkafka: fetching rdkafka-sys $CRATE_VERSION with cargo ..."
    FETCH_DIR="$(mktemp -d)"
    mkdir -p "$FETCH_DIR/p/src" "$FETCH_DIR/home"
    printf '[package]\nname = "fetch-rdkafka-sys"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nrdkafka-sys = "=%s"\n' \
        "$CRATE_VERSION" > "$FETCH_DIR/p/Cargo.toml"
    : > "$FETCH_DIR/p/src/lib.rs"
    # A private CARGO_HOME: the .crate file lands in its registry cache, which we copy out.
    if ! (cd "$FETCH_DIR/p" && CARGO_HOME="$FETCH_DIR/home" timeout "$FETCH_TIMEOUT" cargo fetch -q); then
        die "fetching rdkafka-sys $CRATE_VERSION failed (see cargo's message above)"
    fi
    found="$(find "$FETCH_DIR/home/registry/cache" -name "rdkafka-sys-$CRATE_VERSION*.crate" | head -1)"
    [ -n "$found" ] || die "cargo fetched no rdkafka-sys-$CRATE_VERSION*.crate"
    cp "$found" "$RDK_CACHE/"
    rm -rf "$FETCH_DIR"; FETCH_DIR=""
fi
CRATE="$(crate_file)"

# -- 2. unpack and build librdkafka and its test runner (once) ----------------------------------
if [ ! -x "$RUNNER" ] || [ ! -f "$RDK_CACHE/.built-$CRATE_VERSION" ]; then
    rm -rf "$RDK_CACHE/rdkafka-sys-$CRATE_VERSION"
    tar -xzf "$CRATE" -C "$RDK_CACHE" || die "cannot unpack $CRATE"
    # The crate's folder may carry the bundled librdkafka version (rdkafka-sys-4.10.0+2.12.1).
    unpacked="$(ls -d "$RDK_CACHE"/rdkafka-sys-"$CRATE_VERSION"* | grep -v '\.crate$' | head -1)"
    [ "$unpacked" = "$RDK_CACHE/rdkafka-sys-$CRATE_VERSION" ] || mv "$unpacked" "$RDK_CACHE/rdkafka-sys-$CRATE_VERSION"
    [ -f "$SRC/tests/Makefile" ] || die "the crate has no librdkafka/tests/ folder"
    echo "compat-librdkafka: building librdkafka and tests/test-runner in $SRC (once; log $RDK_CACHE/build.log) ..."
    start=$(date +%s)
    if ! (cd "$SRC" && chmod +x configure mklove/*.sh lds-gen.py 2>/dev/null; \
          timeout "$BUILD_TIMEOUT" bash -c './configure --disable-gssapi --disable-sasl --disable-curl \
              && make -j"$(nproc)" libs && make -C tests -j"$(nproc)" build') > "$RDK_CACHE/build.log" 2>&1; then
        tail -30 "$RDK_CACHE/build.log" >&2
        die "building librdkafka failed (full log: $RDK_CACHE/build.log)"
    fi
    [ -x "$RUNNER" ] || die "the build finished but $RUNNER is missing"
    secs=$(( $(date +%s) - start ))
    echo "$secs" > "$RDK_CACHE/.built-$CRATE_VERSION"
    echo "compat-librdkafka: built in ${secs} s (cached; later runs reuse it)"
else
    echo "compat-librdkafka: reusing the build in $SRC (it took $(cat "$RDK_CACHE/.built-$CRATE_VERSION") s)"
fi

[ -n "${BUILD_ONLY:-}" ] && exit 0

# -- 3. run the tests against both brokers --------------------------------------------------------
cd "$REPO"
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$HERE/side_by_side.py" \
    --librdkafka "$SRC" --tests "${TESTS:-0041 0018}" &
DRIVER_PID=$!
set +e
wait "$DRIVER_PID"; rc=$?
set -e
DRIVER_PID=""
exit "$rc"
