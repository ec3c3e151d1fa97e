# Polychrome. Tool and upstream versions are pinned here and nowhere else that a person
# edits (hack/*/go.mod must agree; hack/build-binaries.sh checks).
KUBE_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
AGENT_SANDBOX_VERSION ?= v0.5.6
export KUBE_VERSION ETCD_VERSION AGENT_SANDBOX_VERSION

NPX := npx --no-install
JEST_ARGS ?=

.PHONY: all build generate proto manifests verify-generate lint typecheck test test-unit \
	test-integration test-argocd-health bench dev dev-down binaries cluster-up cluster-down clean

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

## Build kube-apiserver, kube-controller-manager, kubectl, etcd and the agent-sandbox
## controller from their Go modules (cached by version under ~/.cache/polychrome).
binaries:
	bash hack/build-binaries.sh

## All tests: unit, then integration against one shared local control plane.
test: node_modules binaries test-argocd-health
	$(NPX) jest $(JEST_ARGS)

## Argo CD health scripts (config/argocd) run as Argo CD runs argocd-cm scripts: gopher-lua
## with only the base, table and package libraries (hack/argocd-health; Go module cache).
test-argocd-health:
	cd hack/argocd-health && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go test -count=1 ./...

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
