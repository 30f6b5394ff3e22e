#!/usr/bin/env bash
# Installs what the test suite needs beyond Python packages: Debian packages (kcat, Java, Maven,
# headless Chromium and its driver for the console tests, promtool from the prometheus package
# for the metrics test, iproute2 for network namespaces, systemd-analyze for the unit files) and
# the Maven-built Java runners under compat/ and the s3proxy object-store server. Idempotent; safe to run on every `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo -n"; fi

need_apt=()
command -v kcat >/dev/null || need_apt+=(kcat)
command -v java >/dev/null || need_apt+=(openjdk-17-jdk-headless)
command -v mvn  >/dev/null || need_apt+=(maven)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
command -v promtool >/dev/null || need_apt+=(prometheus)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v curl >/dev/null || need_apt+=(curl)
command -v openssl >/dev/null || need_apt+=(openssl)  # deploy/dev/make-certs.sh (README security transcript)
command -v unshare >/dev/null || need_apt+=(util-linux)
command -v systemd-analyze >/dev/null || need_apt+=(systemd)  # verifies deploy/systemd units
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing Debian packages: ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
    # only promtool is wanted from the prometheus package: no Prometheus server left running
    if [[ " ${need_apt[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null \
            && systemctl is-system-running >/dev/null 2>&1; then
        $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi

# The S3-compatible server of the tiered-storage tests (s3proxy jar from Maven Central, cached).
bash deploy/dev/install-object-store.sh

# Java runners and jars (each directory with a build.sh builds itself with Maven).
for script in compat/*/build.sh spark_examples/build.sh; do
    [ -f "$script" ] || continue
    echo "building $(dirname "$script")"
    bash "$script"
done
