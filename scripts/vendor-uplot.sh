#!/usr/bin/env bash
# Refreshes the committed uPlot release (the page's charts) from the npm registry: run it
# when changing the pinned version, then commit src/cronlab/web/static/vendor.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.6.32
vendor=src/cronlab/web/static/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null && tar -xzf "uplot-$version.tgz")
mkdir -p "$vendor"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$vendor/"
cp "$tmp/package/LICENSE" "$vendor/uPlot.LICENSE"
