#!/usr/bin/env bash
# The queues chapter and tests/harness/test_rabbitmq.py run a private RabbitMQ node next to kafkalite
# (kafkalite/harness/rabbitmq.py starts it as a child process). Install Debian's rabbitmq-server package only
# when it is missing. Nothing is started or enabled: Debian's maintainer scripts would start the service (and
# epmd) on install, so a policy-rc.d that refuses every start is put in place for the install when the machine
# has none, and the units the package enables are disabled (and stopped, under a running systemd) afterwards.
set -euo pipefail

if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    echo "RabbitMQ not found: installing Debian's rabbitmq-server package with apt-get" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    policy=/usr/sbin/policy-rc.d
    ours=""
    if [ ! -e "$policy" ]; then
        # exit 101: "action forbidden by policy", which invoke-rc.d and deb-systemd-invoke honour.
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod 755 "$policy"
        ours=1
    fi
    status=0
    $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get update || status=$?
    [ "$status" != 0 ] || $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
        apt-get install -y --no-install-recommends rabbitmq-server || status=$?
    [ -z "$ours" ] || $sudo rm -f "$policy"
    [ "$status" = 0 ] || exit "$status"
    # The package enables its units for the next boot (a symlink, even without a running systemd): undo that.
    if command -v systemctl >/dev/null 2>&1; then
        now=""
        [ ! -d /run/systemd/system ] || now=--now
        $sudo systemctl disable $now rabbitmq-server.service epmd.socket epmd.service >/dev/null 2>&1 || true
    fi
fi
