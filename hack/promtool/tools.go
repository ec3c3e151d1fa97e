//go:build tools

// Package tools pins promtool so `go build github.com/prometheus/prometheus/cmd/promtool`
// resolves from this module.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
