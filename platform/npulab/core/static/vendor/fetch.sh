#!/usr/bin/env bash
# Fetch the vendored front-end libraries again from the npm registry.
# Versions are pinned here and in README.md beside this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent htmx.org@2.0.11 bootstrap@5.3.9 uplot@1.6.32 \
  @fontsource/roboto@5.3.0 @fontsource/montserrat@5.3.0 >/dev/null
mkdir htmx bootstrap uplot roboto montserrat
tar xzf htmx.org-2.0.11.tgz -C htmx
tar xzf bootstrap-5.3.9.tgz -C bootstrap
tar xzf uplot-1.6.32.tgz -C uplot
tar xzf fontsource-roboto-5.3.0.tgz -C roboto
tar xzf fontsource-montserrat-5.3.0.tgz -C montserrat
cp htmx/package/dist/htmx.min.js htmx/package/LICENSE "$here/htmx/"
cp bootstrap/package/dist/css/bootstrap.min.css bootstrap/package/dist/js/bootstrap.bundle.min.js \
   bootstrap/package/LICENSE "$here/bootstrap/"
cp uplot/package/dist/uPlot.iife.min.js uplot/package/dist/uPlot.min.css uplot/package/LICENSE \
   "$here/uplot/"
# The source maps are not shipped; drop the comments that point to them.
sed -i '/sourceMappingURL/d' "$here"/bootstrap/*.min.*
# ReDoc's fonts (the API docs page), Latin only, in the weights it uses; woff2 only,
# which every browser that runs ReDoc reads.
for family in roboto montserrat; do
  mkdir -p "$here/fonts/$family/files"
  cp "$family/package/LICENSE" "$here/fonts/$family/"
  for weight in 300 400 700; do
    cp "$family/package/files/$family-latin-$weight-normal.woff2" "$here/fonts/$family/files/"
    cat "$family/package/latin-$weight.css"
    echo
  done | sed "s/, url([^)]*\.woff) format('woff')//" > "$here/fonts/$family/latin.css"
done
echo "vendored htmx 2.0.11, bootstrap 5.3.9, uplot 1.6.32, Roboto and Montserrat 5.3.0 into $here"
