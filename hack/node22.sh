#!/usr/bin/env bash
# Prints the path of a Node 22 binary, fetching it first when it is not cached: the npm
# package node-linux-<arch> at the version the Makefile pins (NODE22_VERSION), checked
# against the pinned tarball digest (NODE22_INTEGRITY for x64, NODE22_ARM64_INTEGRITY for
# arm64; npm's sha512 "integrity"). The images carry this binary as /nodejs/bin/node and CI
# runs the unit tests on the x64 one as well as on the machine's Node 20 (docs/images.md).
#   hack/node22.sh [x64|arm64]      (default x64)
#
# Cached by version under $POLYCHROME_CACHE (default ~/.cache/polychrome)/node-v<version>
# (node-v<version>-arm64 for arm64); never installed into the project's node_modules.
# Diagnostics go to stderr.
set -euo pipefail

: "${NODE22_VERSION:?set by the Makefile}"
arch=${1:-x64}
case "$arch" in
  x64) integrity=${NODE22_INTEGRITY:?set by the Makefile} suffix="" ;;
  arm64) integrity=${NODE22_ARM64_INTEGRITY:?set by the Makefile} suffix="-arm64" ;;
  *)
    echo "hack/node22.sh: no Node for '$arch': x64 or arm64" >&2
    exit 2
    ;;
esac
package="node-linux-$arch"

cache=${POLYCHROME_CACHE:-$HOME/.cache/polychrome}
dir="$cache/node-v$NODE22_VERSION$suffix"
node="$dir/bin/node"

if [ ! -x "$node" ]; then
  echo "hack: fetching $package@$NODE22_VERSION from npm" >&2
  mkdir -p "$cache"
  # Beside the target, so the final rename is atomic: a concurrent run sees all or nothing.
  work=$(mktemp -d "$cache/.node-v$NODE22_VERSION$suffix.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # npm pack only downloads: no install scripts run, nothing lands in node_modules.
  (cd "$work" && npm pack --silent "$package@$NODE22_VERSION" >/dev/null)
  tgz="$work/$package-$NODE22_VERSION.tgz"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    echo "$package@$NODE22_VERSION has integrity $got, the Makefile pins $integrity;" \
      "if the version was changed on purpose, update the Makefile's pin to npm's value" \
      "(npm view $package@$NODE22_VERSION dist.integrity)" >&2
    exit 1
  fi
  mkdir -p "$work/x" && chmod 755 "$work/x"
  tar -xzf "$tgz" -C "$work/x" --strip-components=1 package/bin/node package/LICENSE
  mv -T "$work/x" "$dir" 2>/dev/null || [ -x "$node" ]
fi

if [ "$arch" = arm64 ]; then
  # Not runnable here without an emulator: check it is an AArch64 executable instead.
  readelf -h "$node" | grep -q 'Machine: *AArch64' || {
    echo "$node is not an AArch64 executable; remove $dir and run again" >&2
    exit 1
  }
  echo "$node"
  exit 0
fi
version=$("$node" --version)
if [ "$version" != "v$NODE22_VERSION" ]; then
  echo "$node reports $version, expected v$NODE22_VERSION; remove $dir and run again" >&2
  exit 1
fi
echo "$node"
