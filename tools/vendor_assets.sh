#!/usr/bin/env bash
# Put the browser assets the built book needs into _vendor/ (git-ignored), so that the HTML renders maths
# and runs live code without reaching a CDN when it is read:
#   _vendor/mathjax/es5/tex-mml-chtml.js          <- mathjax_path in _config.yml
#   _vendor/thebe/lib/index.js                    <- the "Live code" button (tools/live_code.py), which
#                                                    runs a page's cells on the server `make live` starts
# (No ipywidgets embedder: the chapters' controls are precomputed explorers, kafkalite.viz.explore.)
# The tarballs come from the npm registry through `npm pack` and are checked against tools/vendor.sha256.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

PACKAGES=(mathjax@3.2.2 thebe@0.9.3)

if ! command -v npm >/dev/null 2>&1; then
    echo "npm not found: installing it with apt-get" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent --loglevel=error "${PACKAGES[@]}" >/dev/null)
(cd "$work" && grep -v '^#' "$root/tools/vendor.sha256" | sha256sum --check --quiet -)

new="$work/_vendor"
unpack() {  # unpack <tarball> <folder>: npm tarballs keep everything under package/
    mkdir -p "$new/$2"
    tar -xzf "$work/$1" -C "$new/$2" --strip-components=1 --no-same-owner
}
unpack mathjax-3.2.2.tgz mathjax
unpack thebe-0.9.3.tgz thebe

# Sphinx copies all of _vendor into _build/html/_static: drop what no page loads. thebe keeps its
# webpack chunks (lib/N.index.js, fetched on demand from beside lib/index.js) and its CSS.
rm -rf "$new/thebe/src" "$new/thebe/lib/types"
rm -f "$new/thebe/lib/"*.map

for f in mathjax/es5/tex-mml-chtml.js thebe/lib/index.js thebe/lib/thebe.css; do
    test -s "$new/$f" || { echo "vendor_assets: $f missing after unpacking" >&2; exit 1; }
done

rm -rf _vendor
mv "$new" _vendor
echo "vendored: ${PACKAGES[*]} -> _vendor/"
