#!/usr/bin/env bash
# Checks one exported image (hack/build-images.sh runs it for each plane; docs/images.md):
#   hack/check-image.sh ROOTFS CONFIG_JSON DOCKERFILE PLANE_DIR WANT_EXIT WANT_ERROR [CANARY]
# ROOTFS is the image's filesystem (`crane export`), CONFIG_JSON its config (`crane config`),
# DOCKERFILE the plane's Dockerfile, PLANE_DIR the source folder of its main (operator,
# state, harness). It fails, naming what is wrong, unless:
# - the unpacked image (apparent bytes, `du -sb`) is at most IMAGE_MAX_MB megabytes
#   (10^6 bytes; default 150): Node and the plane's bundle, nothing else of the repository;
# - the config's entrypoint is DOCKERFILE's exec-form ENTRYPOINT, /nodejs/bin/node (with its
#   flags) on /app/dist/PLANE_DIR/main.js, run as 65532:65532 in /app on linux/IMAGE_ARCH
#   (default amd64), with no
#   CMD and with the org.opencontainers.image labels;
# - no file looks like key material or local state (.local, .git, .env*, *.pem, ...), no
#   file holds a PEM private key or the string CANARY;
# - under `chroot --userspec=65532:65532`, no path is writable by uid 65532;
# - the entrypoint, run as the config says with only the config's environment, exits
#   WANT_EXIT with WANT_ERROR in its stderr (the plane's configuration error).
# An image for another architecture than this machine's runs under IMAGE_EMULATOR, a static
# qemu-user binary, copied into ROOTFS (/.emulator/) after the size check, as chroot sees
# nothing else. Needs root (chroot).
set -euo pipefail

[ $# -ge 6 ] || {
  echo "usage: $0 ROOTFS CONFIG_JSON DOCKERFILE PLANE_DIR WANT_EXIT WANT_ERROR [CANARY]" >&2
  exit 2
}
rootfs=$1 config=$2 dockerfile=$3 dir=$4 want_exit=$5 want_error=$6 canary=${7:-}
chroot=$(command -v chroot)
fail() {
  echo "images: $*" >&2
  exit 1
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The size first: an image that carries more than its plane fails before the slower checks.
max_mb=${IMAGE_MAX_MB:-150}
[[ "$max_mb" =~ ^[1-9][0-9]*$ ]] || fail "IMAGE_MAX_MB must be a whole number of megabytes, got '$max_mb'"
bytes=$(du -sb "$rootfs" | cut -f1)
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
if [ "$bytes" -gt $((max_mb * 1000000)) ]; then
  fail "the image is $mb MB unpacked, over the $max_mb MB limit (IMAGE_MAX_MB): an image holds
Node and its plane's bundle only (docs/images.md); its largest paths:
$(du -ab "$rootfs" | sort -rn | sed -n 2,6p | awk -v r="$rootfs" '{ sub(r, "", $2); printf "  %.1f MB %s\n", $1 / 1e6, $2 }')"
fi
echo "images:   $mb MB unpacked (limit $max_mb MB)"

node - "$config" "$dir" "$dockerfile" "$(dirname "$0")/dockerfile-entrypoint.js" "${IMAGE_ARCH:-amd64}" <<'EOF'
const [file, dir, dockerfile, parser, arch] = process.argv.slice(2);
const image = require(file);
// The Dockerfile's exec-form ENTRYPOINT, which the built image must carry as it is.
let entrypoint;
try {
  entrypoint = require(require('node:path').resolve(parser)).dockerfileEntrypoint(dockerfile);
} catch (error) {
  console.error(`images: ${error.message}`);
  process.exit(1);
}
const c = image.config ?? {};
const labels = c.Labels ?? {};
// [what it must be, what it is], compared as JSON.
const checks = {
  os: ['linux', image.os],
  architecture: [arch, image.architecture],
  User: ['65532:65532', c.User],
  WorkingDir: ['/app', c.WorkingDir],
  Entrypoint: [entrypoint, c.Entrypoint],
  'Dockerfile ENTRYPOINT runs node on the main': [
    true,
    Array.isArray(entrypoint) &&
      entrypoint[0] === '/nodejs/bin/node' &&
      entrypoint.at(-1) === `/app/dist/${dir}/main.js`,
  ],
  Cmd: [null, c.Cmd ?? null],
  'org.opencontainers.image labels': [
    true,
    ['title', 'version', 'revision', 'created', 'source'].every(
      (l) => (labels[`org.opencontainers.image.${l}`] ?? '') !== '',
    ),
  ],
};
let bad = 0;
for (const [key, [want, got]] of Object.entries(checks)) {
  if (JSON.stringify(want) === JSON.stringify(got)) continue;
  console.error(`images: image config ${key} is ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  bad += 1;
}
process.exit(bad === 0 ? 0 : 1);
EOF

# Key material and the dev stack's state never belong in an image.
leaked=$(find "$rootfs" \( -name .local -o -name '.env*' -o -name .git -o -name '*.pem' \
  -o -name '*.key' -o -name '*.crt' -o -name '*.p12' -o -name 'records-key' \
  -o -name 'signing-key' -o -name 'harness-token' \) -print | sed "s|^$rootfs||")
[ -z "$leaked" ] || fail "the image holds files that look like keys or local state:
$leaked"
if [ -n "$canary" ] && grep -rlqF -- "$canary" "$rootfs"; then
  fail "the image holds the canary key placed in .local/"
fi
# A PEM private key block (its header and a line of base64), not code that parses one.
if grep -rlPz -- '-----BEGIN ([A-Z]+ )?PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{16,}' "$rootfs" \
  >"$out/keys.txt"; then
  fail "the image holds private keys: $(sed "s|^$rootfs||" "$out/keys.txt")"
fi

emulate=()
if [ -n "${IMAGE_EMULATOR:-}" ]; then
  mkdir -p -m 755 "$rootfs/.emulator"
  cp "$IMAGE_EMULATOR" "$rootfs/.emulator/"
  emulate=("/.emulator/$(basename "$IMAGE_EMULATOR")")
fi

run_as_nonroot() { # argv inside the image, with the image's environment
  local -a image_env
  mapfile -t image_env < <(node -e 'for (const e of require(process.argv[1]).config.Env ?? []) console.log(e)' "$config")
  env -i "${image_env[@]}" "$chroot" --userspec=65532:65532 "$rootfs" "${emulate[@]}" "$@"
}

# Writability as the kernel sees it: access(2) as uid 65532 on every path but symlinks.
run_as_nonroot /nodejs/bin/node -e '
  const fs = require("node:fs");
  const path = require("node:path");
  if (process.getuid() !== 65532 || process.getgid() !== 65532) {
    console.error(`running as ${process.getuid()}:${process.getgid()}, not 65532:65532`);
    process.exit(1);
  }
  const writable = [];
  let seen = 0;
  (function walk(p) {
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink()) return;
    seen += 1;
    try {
      fs.accessSync(p, fs.constants.W_OK);
      writable.push(p);
    } catch {}
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
  })("/");
  if (writable.length > 0) {
    console.error(`writable by uid 65532: ${writable.slice(0, 20).join(", ")}`);
    process.exit(1);
  }
  console.log(`images:   ${seen} paths, none writable by uid 65532`);
' || fail "a path in the image is writable by the runtime user"

# The entrypoint as the image declares it, with no configuration: the config error.
mapfile -t entrypoint < <(node -e 'for (const a of require(process.argv[1]).config.Entrypoint) console.log(a)' "$config")
set +e
run_as_nonroot "${entrypoint[@]}" >"$out/stdout" 2>"$out/stderr"
code=$?
set -e
if [ "$code" != "$want_exit" ] || ! grep -qF -- "$want_error" "$out/stderr"; then
  echo "--- stdout" >&2
  cat "$out/stdout" >&2
  echo "--- stderr" >&2
  cat "$out/stderr" >&2
  fail "the entrypoint with no configuration exited $code (expected $want_exit with a config error naming $want_error)"
fi
echo "images:   entrypoint exits $code: $(head -c 200 "$out/stderr" | head -n 3 | tr '\n' ' ')"
