#!/usr/bin/env bash
# The version of this build, in Debian's rules: the CHANGELOG's newest
# version ("## 0.3.0 ..."), as is when HEAD is tagged v<version>, else
# <version>~git<date of HEAD>.<commit> (which sorts before the release, so
# the release upgrades it); <version>~dev outside git.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(sed -nE 's/^## \[?([0-9]+\.[0-9]+\.[0-9]+)\]?.*/\1/p' CHANGELOG.md | head -n1)
if [ -z "$base" ]; then
	echo "scripts/version.sh: no '## X.Y.Z' heading in CHANGELOG.md" >&2
	exit 1
fi
if ! commit=$(git rev-parse --short=7 HEAD 2>/dev/null); then
	echo "${base}~dev"
	exit 0
fi
if [ "$(git tag --points-at HEAD 2>/dev/null | grep -Fx "v${base}" || true)" = "v${base}" ]; then
	echo "$base"
	exit 0
fi
echo "${base}~git$(git show -s --format=%cd --date=format:%Y%m%d HEAD).${commit}"
