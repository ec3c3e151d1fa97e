#!/usr/bin/env bash
# Builds the local control plane's binaries and the tests' tools from their upstream Go
# modules, only those asked for:
#
#   dev         what `make dev` and the local cluster run: etcd (hack/etcd), kubectl,
#               kube-apiserver, kube-controller-manager (hack/kube) and the agent-sandbox
#               controller (hack/agent-sandbox)
#   all         dev, and what only the tests and the image build use: the controller and
#               the CRDs of the agent-sandbox release before the pinned one
#               (hack/agent-sandbox-previous, for the upgrade test), crane (hack/crane,
#               hack/build-images.sh), promtool (hack/promtool, `make test-monitoring`), an
#               OpenTelemetry Collector (hack/otelcol, test/integration/tracing.test.ts), and
#               prometheus-operator's CRDs (hack/prometheus-operator, the dry run of
#               config/monitoring) and cert-manager's (hack/cert-manager, the dry run of the
#               Kubernetes door's component), copied from their modules, and helm (hack/helm,
#               the chart's tests and `make chart`)
#   test-tools  dockerignore-check (hack/dockerignore), Docker's own .dockerignore matcher
#               (github.com/moby/patternmatcher, docs/images.md), cosign (hack/cosign,
#               github.com/sigstore/cosign: `make release` signs with it, its test verifies),
#               and krew (hack/krew/upstream, sigs.k8s.io/krew: the krew archive's test
#               installs it with krew)
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
: "${AGENT_SANDBOX_PREVIOUS_VERSION:?set by the Makefile}"
: "${CRANE_VERSION:?set by the Makefile}"
: "${PROMTOOL_VERSION:?set by the Makefile}"
: "${PROMETHEUS_OPERATOR_VERSION:?set by the Makefile}"
: "${OTELCOL_VERSION:?set by the Makefile}"
: "${CERT_MANAGER_VERSION:?set by the Makefile}"
: "${PATTERNMATCHER_VERSION:?set by the Makefile}"
: "${COSIGN_VERSION:?set by the Makefile}"
: "${HELM_VERSION:?set by the Makefile}"
: "${KREW_VERSION:?set by the Makefile}"

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
require_pin agent-sandbox-previous sigs.k8s.io/agent-sandbox "$AGENT_SANDBOX_PREVIOUS_VERSION"
require_pin crane github.com/google/go-containerregistry "$CRANE_VERSION"
require_pin promtool github.com/prometheus/prometheus "$PROMTOOL_VERSION"
require_pin otelcol go.opentelemetry.io/collector/otelcol "$OTELCOL_VERSION"
require_pin prometheus-operator github.com/prometheus-operator/prometheus-operator \
  "$PROMETHEUS_OPERATOR_VERSION"
require_pin cert-manager github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION"
require_pin dockerignore github.com/moby/patternmatcher "$PATTERNMATCHER_VERSION"
require_pin cosign github.com/sigstore/cosign/v3 "$COSIGN_VERSION"
require_pin helm helm.sh/helm/v4 "$HELM_VERSION"
require_pin krew/upstream sigs.k8s.io/krew "$KREW_VERSION"

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

build() { # name version module-dir package [ldflags] [link name, default name]
  local name=$1 version=$2 dir=$3 pkg=$4 flags=${5:-} link=${6:-$1}
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
  ln -sfn "$target" "$out/$link"
}

# A module's CRD files, unchanged: go.sum (in hack/<module-dir>) verifies the module, the
# files are copied as they are in it. Its Go code is never built. prometheus-operator's,
# cert-manager's and the previous agent-sandbox release's CRDs come this way.
copy_crds() { # label version module-dir module link folder-in-module file...
  local label=$1 version=$2 moddir=$3 module=$4 link=$5 from=$6 dir file
  shift 6
  local target="$cache/crds/$label-$version"
  if [ -d "$target" ]; then
    progress "$label $version CRDs cached"
  else
    progress "copying $label $version CRDs"
    dir=$(cd "$here/$moddir" && go mod download -json "$module" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] || { echo "hack: go mod download gave no directory for $label $version" >&2; exit 1; }
    rm -rf "$target.tmp"
    mkdir -p "$target.tmp"
    for file in "$@"; do cp "$dir/$from/$file" "$target.tmp/"; done
    chmod 0644 "$target.tmp"/*.yaml
    mv "$target.tmp" "$target"
    echo "hack: copied $label $version CRDs"
  fi
  ln -sfn "$target" "$out/$link"
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
    agent-sandbox-controller-previous)
      # The release before the pinned one, for the upgrade test; cached under the same name
      # as when it was the pinned one.
      build agent-sandbox-controller "$AGENT_SANDBOX_PREVIOUS_VERSION" agent-sandbox-previous \
        sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller "" agent-sandbox-controller-previous ;;
    agent-sandbox-previous-crds)
      copy_crds agent-sandbox "$AGENT_SANDBOX_PREVIOUS_VERSION" agent-sandbox-previous \
        sigs.k8s.io/agent-sandbox agent-sandbox-previous-crds k8s/crds \
        agents.x-k8s.io_sandboxes.yaml extensions.agents.x-k8s.io_sandboxclaims.yaml \
        extensions.agents.x-k8s.io_sandboxtemplates.yaml extensions.agents.x-k8s.io_sandboxwarmpools.yaml ;;
    prometheus-operator-crds)
      copy_crds prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" prometheus-operator \
        github.com/prometheus-operator/prometheus-operator prometheus-operator-crds \
        example/prometheus-operator-crd monitoring.coreos.com_servicemonitors.yaml \
        monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_prometheusrules.yaml ;;
    cert-manager-crds)
      copy_crds cert-manager "$CERT_MANAGER_VERSION" cert-manager github.com/cert-manager/cert-manager \
        cert-manager-crds deploy/crds cert-manager.io_issuers.yaml cert-manager.io_certificates.yaml ;;
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
    krew)
      build krew "$KREW_VERSION" krew/upstream sigs.k8s.io/krew/cmd/krew \
        "-X sigs.k8s.io/krew/internal/version.gitTag=$KREW_VERSION" ;;
  esac
}

dev=(etcd kubectl kube-apiserver kube-controller-manager agent-sandbox-controller)
all=("${dev[@]}" agent-sandbox-controller-previous agent-sandbox-previous-crds crane promtool otelcol
  prometheus-operator-crds cert-manager-crds helm)
test_tools=(dockerignore-check cosign krew)
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
