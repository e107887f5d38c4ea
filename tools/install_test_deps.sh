#!/usr/bin/env bash
# What the test suite needs beyond Python packages: headless Chromium and its WebDriver for the
# browser tier (tests/test_report.py, marker `browser`), from Debian's packages. Installs them
# when missing (as root, or with sudo); says so and exits 0 when they are already there.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    echo "install_test_deps: chromium and chromedriver present"
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install_test_deps: no apt-get: install chromium and chromium-driver by hand" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
echo "install_test_deps: installed chromium and chromium-driver"
