#!/usr/bin/env bash
# Starts one exported image's entrypoint with a throwaway configuration and checks that the
# bundled plane serves (hack/build-images.sh runs it for the state plane and the harness,
# after hack/check-image.sh; docs/images.md):
#   hack/check-image-serving.sh ROOTFS CONFIG_JSON PLANE      (PLANE: state or harness)
# Under `chroot --userspec=65532:65532`, with the image's environment and the plane's
# variables only, the entrypoint must answer 200 on /readyz within 30 s and exit 0 on
# SIGTERM within 30 s. For the state plane its two LevelDB databases must then exist on
# disk, written through the bundle's native binding. Tracing is on (to a closed port), so the
# exporters and propagators the planes load on demand (common/tracing-sdk.ts) are loaded from
# the bundle: OTLP over gRPC for the state plane, OTLP over HTTP and Zipkin for the harness. The configuration is made for the run
# with openssl (a CA, a serving certificate, the signing, records and approval keys) and put
# in the root under /smoke, after the key checks; the process is stopped on every exit path.
# The control plane needs a Kubernetes API to get ready, so it has no such check here.
# With IMAGE_EMULATOR (a static qemu-user binary, for an image of another architecture) the
# entrypoint runs under it, copied into ROOTFS, and may take 120 s to get ready instead of 30.
# Needs root (chroot).
set -euo pipefail

[ $# = 3 ] || {
  echo "usage: $0 ROOTFS CONFIG_JSON PLANE" >&2
  exit 2
}
rootfs=$1 config=$2 plane=$3
chroot=$(command -v chroot)
fail() {
  echo "images: $plane: $*" >&2
  exit 1
}
pid=""
log=$(mktemp)
cleanup() {
  local status=$?
  if [ -n "$pid" ]; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -f "$log"
  exit "$status"
}
trap cleanup EXIT

free_port() {
  node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => {
    console.log(s.address().port);
    s.close();
  });'
}

# The throwaway configuration, readable by the runtime user, not writable by it.
smoke="$rootfs/smoke"
mkdir -m 755 "$smoke"
ssl() { openssl "$@" 2>/dev/null || fail "openssl $1 failed"; }
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=image-smoke-ca -keyout "$smoke/ca-key.pem" -out "$smoke/ca.pem"
serving_cert() { # common name, written as $smoke/tls.pem and $smoke/tls-key.pem
  ssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$smoke/tls-key.pem" -out "$smoke/tls.csr"
  ssl x509 -req -in "$smoke/tls.csr" -CA "$smoke/ca.pem" -CAkey "$smoke/ca-key.pem" \
    -CAcreateserial -days 1 -out "$smoke/tls.pem" \
    -extfile <(printf 'subjectAltName=DNS:%s,IP:127.0.0.1\n' "$1")
}
health=$(free_port)
serve=$(free_port)
case "$plane" in
  state)
    serving_cert localhost
    ssl rand -out "$smoke/signing-key" 32
    ssl rand -hex -out "$smoke/records-key" 32
    mkdir -m 700 "$rootfs/smoke-data"
    chown 65532:65532 "$rootfs/smoke-data"
    vars=(STATE_TLS_CA_FILE=/smoke/ca.pem STATE_TLS_CERT_FILE=/smoke/tls.pem
      STATE_TLS_KEY_FILE=/smoke/tls-key.pem STATE_SIGNING_KEY_FILE=/smoke/signing-key
      STATE_RECORDS_KEY_FILE=/smoke/records-key STATE_DATA_DIR=/smoke-data/journal
      STATE_RECORDS_DIR=/smoke-data/records STATE_LISTEN_HOST=127.0.0.1
      "STATE_PORT=$serve" "STATE_HEALTH_PORT=$health"
      OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=grpc
      OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9)
    ;;
  harness)
    serving_cert polychrome-harness.image-smoke
    ssl genpkey -algorithm ed25519 -out "$smoke/approval-key.pem"
    approval=$(openssl pkey -in "$smoke/approval-key.pem" -pubout -outform DER | tail -c 32 | od -An -tx1 | tr -d ' \n')
    vars=(HARNESS_TLS_CERT_FILE=/smoke/tls.pem HARNESS_TLS_KEY_FILE=/smoke/tls-key.pem
      HARNESS_NAMESPACE=image-smoke "HARNESS_APPROVAL_PUBLIC_KEY=$approval"
      HARNESS_MODEL_SCRIPT=/app/harness/model/demo-script.yaml HARNESS_LISTEN_HOST=127.0.0.1
      "HARNESS_PORT=$serve" "HARNESS_HEALTH_PORT=$health"
      OTEL_TRACES_EXPORTER=otlp,zipkin OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
      OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9
      OTEL_EXPORTER_ZIPKIN_ENDPOINT=http://127.0.0.1:9/api/v2/spans
      OTEL_PROPAGATORS=tracecontext,baggage,b3,jaeger)
    ;;
  *) fail "no serving check for this plane (state, harness)" ;;
esac
chmod 644 "$smoke"/*

emulate=()
ready_within=30
if [ -n "${IMAGE_EMULATOR:-}" ]; then
  mkdir -p -m 755 "$rootfs/.emulator"
  cp "$IMAGE_EMULATOR" "$rootfs/.emulator/"
  emulate=("/.emulator/$(basename "$IMAGE_EMULATOR")")
  ready_within=120
fi

mapfile -t image_env < <(node -e 'for (const e of require(process.argv[1]).config.Env ?? []) console.log(e)' "$config")
mapfile -t entrypoint < <(node -e 'for (const a of require(process.argv[1]).config.Entrypoint) console.log(a)' "$config")
# env and chroot exec what they run, so $! ends up being the plane's node process.
env -i "${image_env[@]}" "${vars[@]}" "$chroot" --userspec=65532:65532 "$rootfs" \
  "${emulate[@]}" "${entrypoint[@]}" >"$log" 2>&1 &
pid=$!

show_log() {
  echo "--- the plane's output" >&2
  head -c 4000 "$log" >&2
}
if ! node - "$health" "$pid" "$ready_within" <<'EOF'; then
const [port, pid, within] = process.argv.slice(2).map(Number);
const http = require('node:http');
const deadline = Date.now() + within * 1000;
function poll() {
  try {
    process.kill(pid, 0);
  } catch {
    console.error('images:   the plane exited before it was ready');
    process.exit(1);
  }
  http
    .get({ host: '127.0.0.1', port, path: '/readyz', timeout: 1000 }, (res) => {
      res.resume();
      if (res.statusCode === 200) process.exit(0);
      retry();
    })
    .on('timeout', function () {
      this.destroy();
    })
    .on('error', retry);
}
function retry() {
  if (Date.now() > deadline) {
    console.error(`images:   /readyz did not answer 200 within ${within} s`);
    process.exit(1);
  }
  setTimeout(poll, 200);
}
poll();
EOF
  show_log
  fail "the entrypoint with a full configuration did not get ready"
fi
kill -TERM "$pid"
for _ in $(seq 300); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  show_log
  fail "the plane did not stop within 30 s of SIGTERM"
fi
set +e
wait "$pid"
code=$?
set -e
pid=""
if [ "$code" != 0 ]; then
  show_log
  fail "the plane exited $code on SIGTERM (expected 0)"
fi
if [ "$plane" = state ]; then
  for db in journal records; do
    [ -s "$rootfs/smoke-data/$db/CURRENT" ] || {
      show_log
      fail "the $db LevelDB database was not created in /smoke-data/$db"
    }
  done
fi
echo "images:   served: ready on /readyz, exit 0 on SIGTERM$([ "$plane" != state ] || echo ', both LevelDB databases written')"
