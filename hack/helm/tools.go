//go:build tools

// Package tools pins Helm so `go build helm.sh/helm/v4/cmd/helm` resolves from this module:
// the chart's tests render it with `helm template` and `helm lint` (charts/polychrome), and
// `make chart` packages it with `helm package`.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
