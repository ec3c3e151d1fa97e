#!/usr/bin/env bash
# `make release REGISTRY=… VERSION=… COSIGN_KEY=…` (docs/release.md): the three planes'
# images for amd64 and arm64, one OCI index each, built and checked by hack/build-images.sh
# (the same build as `make images`), pushed to REGISTRY/<plane>:VERSION, each index signed
# with the user's cosign key and given its SBOM as a signed attestation, and install
# manifests pinned by digest written to dist/release/.
#
#   REGISTRY        where the images go: REGISTRY/control-plane, REGISTRY/state, REGISTRY/harness
#   VERSION         the release's version (a semantic version, e.g. 0.2.0): the tag and the
#                   images' org.opencontainers.image.version label
#   COSIGN_KEY      the signing key, a file cosign reads (`cosign generate-key-pair`), never
#                   printed, copied or written anywhere by this script
#   COSIGN_PASSWORD its password, in the environment (empty for a key without one); cosign
#                   reads it from there
#   RELEASE_IMAGES  optional: an IMAGE_LAYOUT that `make images` already built for VERSION
#                   (hack/build-images.sh), instead of building the images again
#   RELEASE_OUT     optional: where the manifests go (default dist/release, emptied first)
#   RELEASE_CHARTS  optional: where `make chart` leaves its packaged chart (default dist/chart)
#
# Signing and attesting are keyed and offline: no certificate is asked of Fulcio and nothing
# is written to a transparency log (`--tlog-upload=false`, `--use-signing-config=false`), so
# a verifier passes `--insecure-ignore-tlog=true` with the public key (docs/release.md).
# The Helm chart that `make chart` packaged for VERSION (dist/chart/*-VERSION.tgz; make
# release runs it first), its values pinned to the images' digests, is pushed with
# hack/bin/helm to oci://REGISTRY/charts and signed too; without one the release says so, and with one but no hack/bin/helm it stops before
# pushing anything.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
# Paths given relative to where make ran (its recipe runs in the repository root anyway).
[ -z "${COSIGN_KEY:-}" ] || [ ! -e "$COSIGN_KEY" ] || COSIGN_KEY=$(realpath "$COSIGN_KEY")
[ -z "${RELEASE_IMAGES:-}" ] || RELEASE_IMAGES=$(realpath -m "$RELEASE_IMAGES")
[ -z "${RELEASE_OUT:-}" ] || RELEASE_OUT=$(realpath -m "$RELEASE_OUT")
[ -z "${RELEASE_CHARTS:-}" ] || RELEASE_CHARTS=$(realpath -m "$RELEASE_CHARTS")
cd "$root"
start=$SECONDS
step() { echo "release: $* ($((SECONDS - start))s)"; }
fail() {
  echo "release: $*" >&2
  exit 1
}

registry=${REGISTRY:-}
version=${VERSION:-}
key=${COSIGN_KEY:-}
out=${RELEASE_OUT:-$root/dist/release}
crane="$here/bin/crane"
cosign="$here/bin/cosign"
kubectl="$here/bin/kubectl"
usage="make release REGISTRY=registry.example.com/polychrome VERSION=0.2.0 COSIGN_KEY=cosign.key (COSIGN_PASSWORD in the environment)"

# What was given, checked before anything is built.
[ -n "$registry" ] || fail "REGISTRY is not set: $usage"
[[ $registry =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$ ]] ||
  fail "REGISTRY '$registry' is not a registry and path (host[:port][/path], lower case, no scheme, tag or trailing '/'): $usage"
[ -n "$version" ] || fail "VERSION is not set: $usage"
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  fail "VERSION '$version' is not a semantic version (MAJOR.MINOR.PATCH[-PRE], no leading 'v'): $usage"
[ -n "$key" ] || fail "COSIGN_KEY is not set: name your cosign private key file (cosign generate-key-pair makes one): $usage"
[ -f "$key" ] && [ -r "$key" ] || fail "COSIGN_KEY '$key' is not a readable file"
grep -q -- '-----BEGIN ENCRYPTED \(SIGSTORE\|COSIGN\) PRIVATE KEY-----' "$key" ||
  fail "COSIGN_KEY '$key' is not a cosign private key (cosign generate-key-pair or import-key-pair writes one)"
[ "${COSIGN_PASSWORD+set}" = set ] ||
  fail "COSIGN_PASSWORD is not set: export the key's password (empty for a key made without one)"
for tool in crane cosign kubectl; do
  [ -x "$here/bin/$tool" ] || fail "hack/bin/$tool is missing: run 'bash hack/build-binaries.sh $tool' (make release does)"
done
shopt -s nullglob
charts=("${RELEASE_CHARTS:-$root/dist/chart}"/*-"$version".tgz)
shopt -u nullglob
[ ${#charts[@]} -eq 0 ] || [ -x "$here/bin/helm" ] ||
  fail "there is a chart to push (${charts[*]##*/}) but hack/bin/helm is missing: build it (hack/build-binaries.sh helm)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A registry on this machine speaks plain HTTP (crane decides so itself for localhost and
# 127.0.0.1; cosign is told).
host=${registry%%/*}
insecure=()
case ${host%%:*} in localhost | 127.0.0.1 | '[::1]') insecure=(--allow-http-registry) ;; esac
# Keyed, offline: no Fulcio certificate, no transparency log, no TUF signing config.
offline=(--key "$key" --tlog-upload=false --use-signing-config=false --yes "${insecure[@]}")

images=${RELEASE_IMAGES:-}
if [ -z "$images" ]; then
  step "building and checking the images for $version (hack/build-images.sh, amd64 and arm64)"
  images="$work/images"
  IMAGE_VERSION=$version IMAGE_ARCHES="amd64 arm64" IMAGE_LAYOUT=$images bash "$here/build-images.sh"
else
  step "using the images built in $images"
fi
[ "$(cat "$images/inputs/version" 2>/dev/null)" = "$version" ] ||
  fail "$images holds images of version '$(cat "$images/inputs/version" 2>/dev/null)', not $version: build them with IMAGE_VERSION=$version"
[ "$(tr '\n' ' ' <"$images/inputs/arches")" = "amd64 arm64 " ] ||
  fail "$images holds images for $(tr '\n' ' ' <"$images/inputs/arches")only; a release has amd64 and arm64"

rm -rf "$out"
mkdir -p "$out/sbom"
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
export SBOM_CREATED
SBOM_CREATED=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
declare -A pinned=()
for plane in control-plane state harness; do
  ref="$registry/$plane:$version"
  want=$(node -e 'const i = require(process.argv[1]); console.log(i.manifests.length === 1 ? i.manifests[0].digest : "")' \
    "$images/$plane/index.json")
  [ -n "$want" ] || fail "$images/$plane does not hold exactly one index"
  step "$plane: pushing the index to $ref"
  "$crane" push "$images/$plane" "$ref" >/dev/null 2>"$work/crane.log" ||
    { cat "$work/crane.log" >&2; fail "$plane: crane push failed (above)"; }
  digest=$("$crane" digest "$ref")
  [ "$digest" = "$want" ] || fail "$plane: $ref is $digest after the push, not the built index $want"
  pinned[$plane]="$registry/$plane@$digest"

  step "$plane: signing $plane@$digest"
  "$cosign" sign "${offline[@]}" "${pinned[$plane]}" >"$work/cosign.log" 2>&1 ||
    { cat "$work/cosign.log" >&2; fail "$plane: cosign sign failed (above)"; }

  step "$plane: its SBOM (SPDX 2.3) as a signed attestation"
  sbom="$out/sbom/$plane.spdx.json"
  npx --no-install tsx "$here/release/sbom.ts" "$images/inputs" "$plane" "${pinned[$plane]}" >"$sbom"
  "$cosign" attest "${offline[@]}" --type spdxjson --predicate "$sbom" "${pinned[$plane]}" \
    >"$work/cosign.log" 2>&1 || { cat "$work/cosign.log" >&2; fail "$plane: cosign attest failed (above)"; }
done

# The install manifests: config/default, config/with-kube-api and config/sandbox with every
# image pinned by digest (kustomize `images:`, which also rewrites POLYCHROME_HARNESS_IMAGE
# and the SandboxTemplate's image, docs/images.md).
overlay() { # name config-dir
  local dir="$work/overlays/$1"
  mkdir -p "$dir"
  {
    echo 'apiVersion: kustomize.config.k8s.io/v1beta1'
    echo 'kind: Kustomization'
    echo 'resources:'
    echo "  - $(realpath --relative-to="$dir" "$root/config/$2")"
    echo 'images:'
    for plane in control-plane state harness; do
      echo "  - name: registry.invalid/polychrome/$plane"
      echo "    newName: ${pinned[$plane]%@*}"
      echo "    digest: ${pinned[$plane]#*@}"
    done
  } >"$dir/kustomization.yaml"
  "$kubectl" kustomize "$dir" >"$out/$1.yaml"
  if grep -n 'registry.invalid' "$out/$1.yaml" >&2; then fail "$1.yaml still names registry.invalid (above)"; fi
}
step "writing the install manifests to $out"
overlay polychrome default
overlay polychrome-with-kube-api with-kube-api
overlay polychrome-sandbox sandbox
sed -n '/^images:/,$p' "$work/overlays/polychrome/kustomization.yaml" >"$out/kustomize-images.yaml"
for plane in control-plane state harness; do echo "${pinned[$plane]}"; done >"$out/images.txt"

# The Helm chart, when `make chart` packaged one for VERSION: its values pinned to this
# release (image.registry and each plane's digest, hack/release/pin-chart.ts), so its
# defaults install the images signed above by digest as polychrome.yaml does; linted,
# rendered (nothing may still name registry.invalid), packaged again, pushed next to the
# images and signed.
if [ ${#charts[@]} -eq 0 ]; then
  step "no dist/chart/*-$version.tgz: no chart pushed (make chart packages one)"
else
  for chart in "${charts[@]}"; do
    name=$(tar -xzOf "$chart" --wildcards '*/Chart.yaml' | sed -n 's/^name: *//p' | head -n 1)
    step "pinning the chart ${chart##*/} to the images' digests"
    rm -rf "$work/chart" && mkdir -p "$work/chart/src" "$work/chart/pinned"
    tar -xzf "$chart" -C "$work/chart/src"
    npx --no-install tsx "$here/release/pin-chart.ts" "$work/chart/src/$name/values.yaml" \
      "${pinned[control-plane]}" "${pinned[state]}" "${pinned[harness]}" ||
      fail "pinning the chart's values failed (above)"
    "$here/bin/helm" lint --strict "$work/chart/src/$name" >"$work/helm.log" 2>&1 ||
      { cat "$work/helm.log" >&2; fail "helm lint of the pinned chart failed (above)"; }
    "$here/bin/helm" template polychrome "$work/chart/src/$name" --namespace polychrome-system \
      --set kubeApi.enabled=true,conversations.create=true >"$work/chart/rendered.yaml" 2>"$work/helm.log" ||
      { cat "$work/helm.log" >&2; fail "helm template of the pinned chart failed (above)"; }
    if grep -n 'registry.invalid' "$work/chart/rendered.yaml" >&2; then
      fail "the pinned chart still renders registry.invalid (above)"
    fi
    "$here/bin/helm" package "$work/chart/src/$name" --destination "$work/chart/pinned" >"$work/helm.log" 2>&1 ||
      { cat "$work/helm.log" >&2; fail "helm package of the pinned chart failed (above)"; }
    pinned_chart="$work/chart/pinned/${chart##*/}"
    [ -f "$pinned_chart" ] || fail "helm package wrote no ${chart##*/}"

    step "pushing the chart ${chart##*/} to oci://$registry/charts"
    helm_flags=()
    [ ${#insecure[@]} -eq 0 ] || helm_flags=(--plain-http)
    "$here/bin/helm" push "${helm_flags[@]}" "$pinned_chart" "oci://$registry/charts" >"$work/helm.log" 2>&1 ||
      { cat "$work/helm.log" >&2; fail "helm push failed (above)"; }
    chart_ref=$(sed -n 's/^Digest: \(sha256:[0-9a-f]*\)$/\1/p' "$work/helm.log")
    [ -n "$chart_ref" ] || fail "helm push printed no digest for ${chart##*/}"
    "$cosign" sign "${offline[@]}" "$registry/charts/$name@$chart_ref" >"$work/cosign.log" 2>&1 ||
      { cat "$work/cosign.log" >&2; fail "cosign sign of the chart failed (above)"; }
    echo "$registry/charts/$name@$chart_ref" >>"$out/images.txt"
    cp "$pinned_chart" "$out/"
  done
fi

(cd "$out" && find . -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
step "released $version to $registry: $(tr '\n' ' ' <"$out/images.txt")"
step "manifests, SBOMs and SHA256SUMS in $out"
