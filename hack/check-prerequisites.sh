#!/usr/bin/env bash
# What `make test` needs on this machine, checked before anything runs (`make
# check-prerequisites`): each one missing gets one line, `missing: WHAT (WHO NEEDS IT):
# HOW TO INSTALL IT`, on stderr, and the exit status is 1. Nothing is installed here
# (.ci/run installs the same list on a fresh CI machine; the README lists it).
#
#   node 20.19+, npm    the tests themselves (package.json's engines)
#   go                  the pinned binaries (hack/build-binaries.sh) and the Argo CD health
#                       scripts' test, at the newest `go` line of hack/*/go.mod or later
#                       (GOTOOLCHAIN=local: no other toolchain is downloaded)
#   openssl             the local certificates (hack/lib/pki.ts)
#   git                 the file lists of the lint and image tests (git ls-files)
#   chromium            the forensics UI's browser test (test/integration/ui-browser.test.ts),
#                       at $POLYCHROME_CHROMIUM, else /usr/bin/chromium, where that test looks
#   chroot, ldd, root   the image smoke test `make test` ends with (hack/build-images.sh)
#   qemu-aarch64-static the arm64 images' checks in that test, unless IMAGE_ARCHES leaves
#                       arm64 out
#   unshare, mount      the local node's registry mode (the release install test runs the
#                       released images in mount namespaces of their own; root with
#                       CAP_SYS_ADMIN, which the node checks and names when it starts)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
missing=0
miss() { # what-and-why how
  echo "missing: $1: $2" >&2
  missing=$((missing + 1))
}

# Whether version $1 is at least $2 (both like 1.26.7).
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# A tool that must be at least a version: missing, or too old, gets its line.
versioned() { # command min version-of-it what how
  local cmd=$1 min=$2 version_of=$3 what=$4 how=$5 current
  if ! command -v "$cmd" >/dev/null; then
    miss "$cmd $min or later ($what)" "$how"
  else
    current=$($version_of)
    at_least "$current" "$min" || miss "$cmd $min or later ($what; this is $current)" "$how"
  fi
}

node_version() { node --version | sed 's/^v//'; }
versioned node 20.19 node_version "the tests run on it, package.json's engines" \
  "install Node.js 20.19+ (apt-get install nodejs, or https://nodejs.org)"
command -v npm >/dev/null ||
  miss "npm (installs the dependencies: npm ci)" "apt-get install npm (it comes with Node.js from nodejs.org)"

go_version() { go env GOVERSION | sed 's/^go//'; }
go_min=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$here"/*/go.mod | sort -V | tail -n1)
versioned go "$go_min" go_version "builds the pinned kube-apiserver, etcd, kubectl... from hack/*/go.mod" \
  "install Go $go_min+ from https://go.dev/dl/ and put its bin/ in PATH"

command -v openssl >/dev/null ||
  miss "openssl (makes the local control plane's certificates)" "apt-get install openssl"
command -v git >/dev/null ||
  miss "git (the lint and image tests list files with git ls-files)" "apt-get install git"

chromium=${POLYCHROME_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] ||
  miss "chromium at $chromium (the forensics UI's browser test)" \
    "apt-get install chromium, or set POLYCHROME_CHROMIUM to a Chromium binary"

if command -v git >/dev/null && [ "$(git -C "$here/.." rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
  miss "the clone's history (the upgrade test builds the previous release from hack/release/previous.json's commit)" \
    "git fetch --unshallow"
fi

command -v chroot >/dev/null ||
  miss "chroot (the image smoke test, hack/build-images.sh)" "apt-get install coreutils"
command -v ldd >/dev/null ||
  miss "ldd (the image test checks the binaries' libraries)" "apt-get install libc-bin"
command -v unshare >/dev/null ||
  miss "unshare (the release install test's pods, hack/lib/local-node-image-launch.ts)" \
    "apt-get install util-linux"
command -v mount >/dev/null ||
  miss "mount (the release install test's pods, hack/lib/local-node-image-launch.ts)" \
    "apt-get install mount"
case " ${IMAGE_ARCHES:-amd64 arm64} " in
*" arm64 "*)
  command -v qemu-aarch64-static >/dev/null ||
    miss "qemu-aarch64-static (the arm64 images' smoke test, hack/build-images.sh)" \
      "apt-get install qemu-user-static, or set IMAGE_ARCHES=amd64"
  ;;
esac
[ "$(id -u)" = 0 ] ||
  miss "root (make test ends with the image smoke test under chroot, hack/build-images.sh)" \
    "run make test as root, e.g. in a container (CI does)"

[ "$missing" = 0 ] || exit 1
