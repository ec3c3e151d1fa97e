//go:build tools

// Package tools pins krew so `go build sigs.k8s.io/krew/cmd/krew` resolves from this module:
// the krew archive's test installs the archive with it (hack/krew/pack.test.ts).
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
