#!/usr/bin/env bash
# The shared libraries an arm64 image needs, from Debian's arm64 packages (hack/build-images.sh
# runs it for the arm64 images; docs/images.md): ldd cannot read a foreign executable, so the
# libraries come from the packages that hold them and are picked by what the ELF files ask for.
#   hack/debian-libs.sh ARM64_ROOT ELF...
# Downloads libc6, libstdc++6 and libgcc-s1 for arm64 from this machine's apt sources (the same
# Debian release as the amd64 images' libraries), with apt's lists and cache kept apart from the
# machine's (no `dpkg --add-architecture`), unpacks them into ARM64_ROOT (created; kept when it
# exists; ARM64_ROOT/.files maps each unpacked path to its package and version, for the
# release's SBOM), then prints each library the ELF files need, directly or through another library,
# and the dynamic loader, as a path inside that root (the path the image gets it at).
set -euo pipefail

[ $# -ge 2 ] || {
  echo "usage: $0 ARM64_ROOT ELF..." >&2
  exit 2
}
root=$1
shift
fail() {
  echo "debian-libs: $*" >&2
  exit 1
}
packages=(libc6 libstdc++6 libgcc-s1)

if [ ! -e "$root/.complete" ] || [ ! -e "$root/.files" ]; then
  apt_dir=$(mktemp -d)
  trap 'rm -rf "$apt_dir"' EXIT
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
  opts=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  echo "debian-libs: downloading ${packages[*]} for arm64 (apt-get)" >&2
  apt-get "${opts[@]}" -qq update >&2 || fail "apt-get update for arm64 failed (above)"
  (cd "$apt_dir/debs" && apt-get "${opts[@]}" -qq download "${packages[@]/%/:arm64}" >&2) ||
    fail "apt-get download of ${packages[*]} for arm64 failed (above): does the mirror serve arm64?"
  rm -rf "$root.tmp"
  mkdir -p "$root.tmp"
  for deb in "$apt_dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$root.tmp"
    # path, package, version, architecture: one line per file the package holds.
    package=$(dpkg-deb -f "$deb" Package)
    version=$(dpkg-deb -f "$deb" Version)
    architecture=$(dpkg-deb -f "$deb" Architecture)
    dpkg-deb -c "$deb" | awk -v p="$package" -v v="$version" -v a="$architecture" \
      '$1 !~ /^d/ { path = $6; sub(/^\./, "", path); print path "\t" p "\t" v "\t" a }' >>"$root.tmp/.files"
  done
  ls "$apt_dir"/debs >"$root.tmp/.complete"
  rm -rf "$root"
  mv "$root.tmp" "$root"
fi

# needed ELF: the sonames it asks for (DT_NEEDED), one a line.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
# Where the arm64 loader looks (Debian's multiarch folders).
find_lib() {
  local name=$1 dir
  for dir in /lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu /lib; do
    [ -e "$root$dir/$name" ] && {
      echo "$dir/$name"
      return
    }
  done
  fail "no $name in ${packages[*]} for arm64"
}

declare -A seen=()
queue=()
for elf in "$@"; do
  readelf -h "$elf" | grep -q 'Machine: *AArch64' || fail "$elf is not an AArch64 ELF file"
  interpreter=$(readelf -l "$elf" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  if [ -n "$interpreter" ] && [ -z "${seen[$interpreter]:-}" ]; then
    [ -e "$root$interpreter" ] || fail "the loader $interpreter is not in libc6 for arm64"
    seen[$interpreter]=1
    echo "$interpreter"
  fi
  mapfile -t -O "${#queue[@]}" queue < <(needed "$elf")
done
while [ ${#queue[@]} -gt 0 ]; do
  name=${queue[0]}
  queue=("${queue[@]:1}")
  path=$(find_lib "$name")
  [ -z "${seen[$path]:-}" ] || continue
  seen[$path]=1
  echo "$path"
  mapfile -t -O "${#queue[@]}" queue < <(needed "$root$path")
done
