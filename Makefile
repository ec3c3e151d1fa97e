# Polychrome. Tool and upstream versions are pinned here and nowhere else that a person
# edits (hack/*/go.mod must agree; hack/build-binaries.sh checks).
KUBE_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
AGENT_SANDBOX_VERSION ?= v0.5.6
# promtool from github.com/prometheus/prometheus (v0.316.0 is Prometheus 3.16.0).
PROMTOOL_VERSION ?= v0.316.0
# prometheus-operator's CRDs, for the dry run of config/monitoring.
PROMETHEUS_OPERATOR_VERSION ?= v0.88.0
export KUBE_VERSION ETCD_VERSION AGENT_SANDBOX_VERSION PROMTOOL_VERSION PROMETHEUS_OPERATOR_VERSION

NPX := npx --no-install
JEST_ARGS ?=

.PHONY: all build generate proto manifests verify-generate lint typecheck test test-unit \
	test-integration test-monitoring bench dev dev-down binaries cluster-up cluster-down clean

all: build

## Build the TypeScript into dist/.
build: node_modules
	$(NPX) tsc -p tsconfig.build.json

node_modules: package-lock.json
	npm ci
	@touch node_modules

## Regenerate committed code: ts-proto output and CRD YAML.
generate: proto manifests

proto: node_modules
	bash hack/gen-proto.sh

manifests: node_modules
	$(NPX) tsx hack/gen-crds.ts

## Fail when regenerating changes committed files.
verify-generate: generate
	@git diff --exit-code -- proto/gen config/crd || { \
	  echo "generated files are stale: run 'make generate' and commit the result" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- proto/gen config/crd)" || { \
	  git status --porcelain -- proto/gen config/crd; \
	  echo "generated files are untracked: run 'make generate' and commit the result" >&2; exit 1; }

typecheck: node_modules
	$(NPX) tsc -p tsconfig.json --noEmit

## ESLint (type-aware) and Prettier.
lint: node_modules typecheck
	$(NPX) eslint . --max-warnings 0
	$(NPX) prettier --check .

## Build kube-apiserver, kube-controller-manager, kubectl, etcd, the agent-sandbox
## controller and promtool from their Go modules, and copy prometheus-operator's CRDs
## (cached by version under ~/.cache/polychrome).
binaries:
	bash hack/build-binaries.sh

## All tests: the alert rules (promtool), unit, then integration against one shared local control plane.
test: node_modules binaries test-monitoring
	$(NPX) jest $(JEST_ARGS)

## promtool check rules and test rules on config/monitoring's PrometheusRule, its .spec
## extracted to a temporary rules file beside copies of config/monitoring/tests/.
test-monitoring: node_modules binaries
	@set -e; dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  $(NPX) tsx hack/monitoring-rules.ts "$$dir/polychrome-rules.yaml"; \
	  cp config/monitoring/tests/*.yaml "$$dir/"; \
	  hack/bin/promtool check rules "$$dir/polychrome-rules.yaml"; \
	  cd "$$dir" && $(CURDIR)/hack/bin/promtool test rules $(notdir $(wildcard config/monitoring/tests/*.yaml))

test-unit: node_modules
	$(NPX) jest --selectProjects unit $(JEST_ARGS)

test-integration: node_modules binaries
	$(NPX) jest --selectProjects integration $(JEST_ARGS)

bench: node_modules
	$(NPX) tsx bench/run.ts

## Start the local control plane, install the CRDs, apply the samples.
cluster-up: node_modules binaries
	$(NPX) tsx hack/cluster.ts up

cluster-down: node_modules
	$(NPX) tsx hack/cluster.ts down

## The whole system locally (see README): control plane, state plane, local node, operator,
## and the sample Conversation, Ready with a running harness. `make dev-down` stops it.
dev: node_modules binaries
	$(NPX) tsx hack/dev.ts up

dev-down: node_modules
	$(NPX) tsx hack/dev.ts down

clean:
	-$(NPX) tsx hack/dev.ts down
	rm -rf dist coverage .local hack/bin
