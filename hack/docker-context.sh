#!/usr/bin/env bash
# Copies into DEST what `docker build` sends of the build context ROOT: the files ROOT's
# .dockerignore lets through, as hack/bin/dockerignore-check lists them (hack/dockerignore:
# Docker's own .dockerignore reader and matcher, applied the way BuildKit walks a context).
# hack/build-images.sh compiles the images from that copy, so they are built from exactly
# what a Docker build of the Dockerfiles would see (docs/images.md).
#   hack/docker-context.sh ROOT DEST      (DEST is created; it must not exist or be empty)
set -euo pipefail

fail() {
  echo "docker-context: $*" >&2
  exit 1
}
[ $# = 2 ] || {
  echo "usage: $0 ROOT DEST" >&2
  exit 2
}
root=$1 dest=$2
check="$(cd "$(dirname "$0")" && pwd)/bin/dockerignore-check"
[ -x "$check" ] || fail "hack/bin/dockerignore-check is missing: run 'make test-binaries'"
# Without one, Docker sends the whole tree, .local/ and its keys included.
[ -f "$root/.dockerignore" ] || fail "$root/.dockerignore is missing: the images are built only from an allow-list"
[ ! -e "$dest" ] || [ -z "$(ls -A "$dest")" ] || fail "$dest is not empty"
mkdir -p "$dest"

list=$(mktemp)
trap 'rm -f "$list"' EXIT
"$check" -f "$root/.dockerignore" -list "$root" >"$list"
[ -s "$list" ] || fail "$root/.dockerignore lets no file through"
# Files and symlinks only, as listed; tar makes the folders they sit in.
tar --create --directory "$root" --no-recursion --verbatim-files-from --files-from="$list" |
  tar --extract --directory "$dest"
echo "docker-context: $(wc -l <"$list") files sent from $root"
