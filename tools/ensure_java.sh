#!/usr/bin/env bash
# PySpark 4 needs a Java 17+ runtime. Install one with apt only when `java` is missing.
set -euo pipefail

if ! command -v java >/dev/null 2>&1; then
    echo "java not found: installing openjdk-17-jre-headless with apt-get" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    # Slim Debian images lack this folder and the JRE's post-install script then fails.
    $sudo mkdir -p /usr/share/man/man1
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless
fi

# `java -version` prints e.g. 'openjdk version "17.0.15" 2025-04-15' (or "1.8.0_..." for Java 8) on stderr.
version=$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9._]*\).*/\1/p' | head -n 1)
major=${version%%.*}
[ "$major" = 1 ] && major=$(echo "$version" | cut -d. -f2)
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    echo "PySpark needs Java 17 or newer; found '${version:-unknown}' at $(command -v java)" >&2
    exit 1
fi
