// Carries prometheus-operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule) at a
// pinned release: hack/build-binaries.sh copies them unchanged from the module's
// example/prometheus-operator-crd/ (go.sum checks the module) for the server-side dry run
// of config/monitoring in test/integration. Nothing is built from it. Version pinned in the
// Makefile and here.
module polychrome.dev/hack/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.88.0
