//go:build tools

// Package tools pins the agent-sandbox controller so `go build
// sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller` resolves from this module.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
