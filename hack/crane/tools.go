//go:build tools

// Package tools pins crane (go-containerregistry) so `go build
// github.com/google/go-containerregistry/cmd/crane` resolves from this module: it assembles,
// pushes and exports the planes' images without a container daemon (hack/build-images.sh).
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
