#!/usr/bin/env bash
# Builds the local control plane's binaries and the tests' tools from their upstream Go
# modules, only those asked for:
#
#   dev         what `make dev` and the local cluster run: etcd (hack/etcd), kubectl,
#               kube-apiserver, kube-controller-manager (hack/kube) and the agent-sandbox
#               controller (hack/agent-sandbox)
#   all         dev, and what only the tests and the image build use: crane (hack/crane,
#               hack/build-images.sh), promtool (hack/promtool, `make test-monitoring`), an
#               OpenTelemetry Collector (hack/otelcol, test/integration/tracing.test.ts), and
#               prometheus-operator's CRDs (hack/prometheus-operator, the dry run of
#               config/monitoring) and cert-manager's (hack/cert-manager, the dry run of the
#               Kubernetes door's component), copied from their modules, and helm (hack/helm,
#               the chart's tests and `make chart`)
#   test-tools  dockerignore-check (hack/dockerignore), Docker's own .dockerignore matcher
#               (github.com/moby/patternmatcher, docs/images.md), and cosign (hack/cosign,
#               github.com/sigstore/cosign: `make release` signs with it, its test verifies)
#
# or any of those names themselves (`build-binaries.sh promtool`); several may be given.
# Each prints a `[n/m]` line and, when built, the time it took. Versions come from the
# Makefile (the one place they are pinned) and must match the go.mod files; a mismatch
# stops the build.
#
# Binaries are cached by version under $POLYCHROME_CACHE (default ~/.cache/polychrome), so
# only the first build on a machine pays; hack/bin/ (or $POLYCHROME_BIN_DIR) gets symlinks
# to the pinned versions.
set -euo pipefail

: "${KUBE_VERSION:?set by the Makefile}"
: "${ETCD_VERSION:?set by the Makefile}"
: "${AGENT_SANDBOX_VERSION:?set by the Makefile}"
: "${CRANE_VERSION:?set by the Makefile}"
: "${PROMTOOL_VERSION:?set by the Makefile}"
: "${PROMETHEUS_OPERATOR_VERSION:?set by the Makefile}"
: "${OTELCOL_VERSION:?set by the Makefile}"
: "${CERT_MANAGER_VERSION:?set by the Makefile}"
: "${PATTERNMATCHER_VERSION:?set by the Makefile}"
: "${COSIGN_VERSION:?set by the Makefile}"
: "${HELM_VERSION:?set by the Makefile}"

here=$(cd "$(dirname "$0")" && pwd)
cache=${POLYCHROME_CACHE:-$HOME/.cache/polychrome}
# Where the links go: hack/bin, or POLYCHROME_BIN_DIR (as hack/lib/paths.ts reads it).
out=${POLYCHROME_BIN_DIR:-$here/bin}
mkdir -p "$cache/bin" "$out"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
# Go's own caches live beside the binaries so one cache directory holds everything.
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}
export GOCACHE=${GOCACHE:-$(go env GOCACHE)}

require_pin() { # module-dir module version
  if ! grep -qE "^(require )?[[:space:]]*$2 $3\$" "$here/$1/go.mod"; then
    echo "hack/$1/go.mod does not require $2 $3 (the Makefile pins it); update one to match the other" >&2
    exit 1
  fi
}
require_pin kube k8s.io/kubernetes "$KUBE_VERSION"
require_pin etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
require_pin agent-sandbox sigs.k8s.io/agent-sandbox "$AGENT_SANDBOX_VERSION"
require_pin crane github.com/google/go-containerregistry "$CRANE_VERSION"
require_pin promtool github.com/prometheus/prometheus "$PROMTOOL_VERSION"
require_pin otelcol go.opentelemetry.io/collector/otelcol "$OTELCOL_VERSION"
require_pin prometheus-operator github.com/prometheus-operator/prometheus-operator \
  "$PROMETHEUS_OPERATOR_VERSION"
require_pin cert-manager github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION"
require_pin dockerignore github.com/moby/patternmatcher "$PATTERNMATCHER_VERSION"
require_pin cosign github.com/sigstore/cosign/v3 "$COSIGN_VERSION"
require_pin helm helm.sh/helm/v4 "$HELM_VERSION"

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
build_date=2026-07-22T00:00:00Z
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

step=0 steps=0
# [n/m] before each binary or CRD set, so a cold build is never minutes of silence.
progress() { step=$((step + 1)); echo "hack: [$step/$steps] $*"; }

build() { # name version module-dir package [ldflags]
  local name=$1 version=$2 dir=$3 pkg=$4 flags=${5:-}
  local target="$cache/bin/$name-$version"
  if [ -x "$target" ]; then
    progress "$name $version cached"
  else
    progress "building $name $version (first build on this machine; minutes on 2 cores)"
    local start=$SECONDS
    (cd "$here/$dir" && go build -trimpath -ldflags "-s -w $flags" -o "$target.tmp" "$pkg")
    mv "$target.tmp" "$target"
    echo "hack: [$step/$steps] built $name $version in $((SECONDS - start))s"
  fi
  ln -sfn "$target" "$out/$name"
}

# prometheus-operator's CRDs, unchanged: go.sum verifies the module, the files are copied
# as they are in it. Its Go code is never built.
crds() { # version
  local version=$1 target="$cache/crds/prometheus-operator-$1" dir
  if [ -d "$target" ]; then
    progress "prometheus-operator $version CRDs cached"
  else
    progress "copying prometheus-operator $version CRDs"
    dir=$(cd "$here/prometheus-operator" &&
      go mod download -json github.com/prometheus-operator/prometheus-operator |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] || { echo "hack: go mod download gave no directory for prometheus-operator $version" >&2; exit 1; }
    rm -rf "$target.tmp"
    mkdir -p "$target.tmp"
    for kind in servicemonitors podmonitors prometheusrules; do
      cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$target.tmp/"
    done
    chmod 0644 "$target.tmp"/*.yaml
    mv "$target.tmp" "$target"
    echo "hack: copied prometheus-operator $version CRDs"
  fi
  ln -sfn "$target" "$out/prometheus-operator-crds"
}

# cert-manager's Issuer and Certificate CRDs, unchanged, the same way.
cert_manager_crds() { # version
  local version=$1 target="$cache/crds/cert-manager-$1" dir
  if [ -d "$target" ]; then
    progress "cert-manager $version CRDs cached"
  else
    progress "copying cert-manager $version CRDs"
    dir=$(cd "$here/cert-manager" &&
      go mod download -json github.com/cert-manager/cert-manager |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] || { echo "hack: go mod download gave no directory for cert-manager $version" >&2; exit 1; }
    rm -rf "$target.tmp"
    mkdir -p "$target.tmp"
    for kind in issuers certificates; do
      cp "$dir/deploy/crds/cert-manager.io_$kind.yaml" "$target.tmp/"
    done
    chmod 0644 "$target.tmp"/*.yaml
    mv "$target.tmp" "$target"
    echo "hack: copied cert-manager $version CRDs"
  fi
  ln -sfn "$target" "$out/cert-manager-crds"
}

# One binary or CRD set, by the name it gets in hack/bin.
one() { # name
  case $1 in
    etcd) build etcd "$ETCD_VERSION" etcd . ;;
    kubectl | kube-apiserver | kube-controller-manager)
      build "$1" "$KUBE_VERSION" kube "./cmd/$1" "$ldflags" ;;
    agent-sandbox-controller)
      build agent-sandbox-controller "$AGENT_SANDBOX_VERSION" agent-sandbox \
        sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller ;;
    crane) build crane "$CRANE_VERSION" crane github.com/google/go-containerregistry/cmd/crane ;;
    promtool) build promtool "$PROMTOOL_VERSION" promtool github.com/prometheus/prometheus/cmd/promtool ;;
    otelcol) build otelcol "$OTELCOL_VERSION" otelcol . ;;
    prometheus-operator-crds) crds "$PROMETHEUS_OPERATOR_VERSION" ;;
    cert-manager-crds) cert_manager_crds "$CERT_MANAGER_VERSION" ;;
    helm)
      build helm "$HELM_VERSION" helm helm.sh/helm/v4/cmd/helm \
        "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" ;;
    dockerignore-check)
      # Our own main.go, so the cache key is the pinned module and a digest of the sources.
      local sources
      sources=$(cat "$here/dockerignore/go.mod" "$here/dockerignore/go.sum" "$here/dockerignore/main.go" |
        sha256sum | cut -c1-12)
      build dockerignore-check "$PATTERNMATCHER_VERSION-$sources" dockerignore . ;;
    cosign) build cosign "$COSIGN_VERSION" cosign github.com/sigstore/cosign/v3/cmd/cosign ;;
  esac
}

dev=(etcd kubectl kube-apiserver kube-controller-manager agent-sandbox-controller)
all=("${dev[@]}" crane promtool otelcol prometheus-operator-crds cert-manager-crds helm)
test_tools=(dockerignore-check cosign)
known=" ${all[*]} ${test_tools[*]} "
usage="usage: $0 dev|all|test-tools|NAME... (NAME: ${all[*]} ${test_tools[*]})"
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
wanted=()
for arg in "$@"; do
  case $arg in
    dev) wanted+=("${dev[@]}") ;;
    all) wanted+=("${all[@]}") ;;
    test-tools | --test-tools) wanted+=("${test_tools[@]}") ;;
    *)
      [[ $known == *" $arg "* ]] || { echo "$0: unknown binary \"$arg\"; $usage" >&2; exit 2; }
      wanted+=("$arg") ;;
  esac
done
# Each once, in the order asked.
names=()
for name in "${wanted[@]}"; do
  [[ " ${names[*]:-} " == *" $name "* ]] || names+=("$name")
done
steps=${#names[@]}
begin=$SECONDS
for name in "${names[@]}"; do one "$name"; done
echo "hack: ${names[*]} ready in $out ($((SECONDS - begin))s)"
