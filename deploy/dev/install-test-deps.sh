#!/usr/bin/env bash
# Installs what the test suite needs beyond Python packages: Debian packages (kcat) and the
# Maven-built Java runners under compat/. Idempotent; safe to run on every `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo -n"; fi

need_apt=()
command -v kcat >/dev/null || need_apt+=(kcat)
command -v java >/dev/null || need_apt+=(openjdk-17-jdk-headless)
command -v mvn  >/dev/null || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing Debian packages: ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Java runners and jars (each directory with a build.sh builds itself with Maven).
for script in compat/*/build.sh spark_examples/build.sh; do
    [ -f "$script" ] || continue
    echo "building $(dirname "$script")"
    bash "$script"
done
