#!/usr/bin/env bash
# Fetch the vendored front-end libraries again from the npm registry.
# Versions are pinned here and in README.md beside this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent htmx.org@2.0.11 bootstrap@5.3.9 uplot@1.6.32 >/dev/null
mkdir htmx bootstrap uplot
tar xzf htmx.org-2.0.11.tgz -C htmx
tar xzf bootstrap-5.3.9.tgz -C bootstrap
tar xzf uplot-1.6.32.tgz -C uplot
cp htmx/package/dist/htmx.min.js htmx/package/LICENSE "$here/htmx/"
cp bootstrap/package/dist/css/bootstrap.min.css bootstrap/package/dist/js/bootstrap.bundle.min.js \
   bootstrap/package/LICENSE "$here/bootstrap/"
cp uplot/package/dist/uPlot.iife.min.js uplot/package/dist/uPlot.min.css uplot/package/LICENSE \
   "$here/uplot/"
# The source maps are not shipped; drop the comments that point to them.
sed -i '/sourceMappingURL/d' "$here"/bootstrap/*.min.*
echo "vendored htmx 2.0.11, bootstrap 5.3.9 and uplot 1.6.32 into $here"
