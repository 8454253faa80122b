#!/usr/bin/env bash
# Vendors htmx for the web console: `make htmx HTMX_VERSION=x.y.z` fetches
# the htmx.org package with npm (which checks the registry's integrity
# hash), copies dist/htmx.min.js into the console's embedded files and
# records the version and its sha256 in htmx.lock, which a test checks
# against the embedded file. Nothing is fetched at build or run time.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:?usage: vendor-htmx.sh VERSION}"
dest=daemon/internal/console/static
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "htmx.org@$version" >/dev/null && tar xzf "htmx.org-$version.tgz")
cp "$tmp/package/dist/htmx.min.js" "$dest/htmx.min.js"
sum="$(sha256sum "$dest/htmx.min.js" | cut -d' ' -f1)"
printf 'htmx.org %s sha256:%s\n' "$version" "$sum" > "$dest/htmx.lock"
echo "vendored htmx.org $version (sha256:$sum) into $dest"
