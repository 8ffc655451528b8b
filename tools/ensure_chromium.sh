#!/usr/bin/env bash
# The browser test (tests/browser/, `make test-browser`) drives a real browser over the built book:
# Debian's chromium and its chromedriver, through selenium. Install both with apt-get only when missing;
# nothing is downloaded by selenium itself (its driver manager is never used: the test names the driver).
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "chromium or chromedriver not found: installing Debian's chromium and chromium-driver with apt-get" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver
fi
