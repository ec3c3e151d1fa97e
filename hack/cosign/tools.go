//go:build tools

// Package tools pins cosign (sigstore) so `go build github.com/sigstore/cosign/v3/cmd/cosign`
// resolves from this module: `make release` signs the images and attaches their SBOMs with it
// (hack/release.sh), and its test verifies them with it (docs/release.md).
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
