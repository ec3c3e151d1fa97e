// Carries cert-manager's CRDs (Issuer, Certificate) at a pinned release:
// hack/build-binaries.sh copies them unchanged from the module's deploy/crds/ (go.sum checks
// the module) for the server-side dry run of config/default, whose Kubernetes door
// component asks cert-manager for its serving certificate. Nothing is built from it.
// Version pinned in the Makefile and here.
module polychrome.dev/hack/cert-manager

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
