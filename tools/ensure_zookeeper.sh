#!/usr/bin/env bash
# The tests run kafkalite brokers on a real Apache ZooKeeper too (tests/coordination/test_real_zookeeper.py). Install
# Debian's zookeeper package (the server jar; nothing is started or enabled) only when it is missing.
set -euo pipefail

if [ ! -e /usr/share/java/zookeeper.jar ]; then
    echo "ZooKeeper not found: installing Debian's zookeeper package with apt-get" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper
fi
