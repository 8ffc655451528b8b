#!/usr/bin/env bash
# The book shows Chinese terms (the glossary, its figure). Install Debian's WenQuanYi Micro Hei, a CJK font
# (Apache-2.0 or GPL-3+ with font exception), only when it is missing: matplotlib draws the figures' labels
# with it, and tools/cjk_font.py cuts the web font the pages load from it.
set -euo pipefail

if [ ! -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]; then
    echo "CJK font not found: installing Debian's fonts-wqy-microhei package with apt-get" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fonts-wqy-microhei
fi
