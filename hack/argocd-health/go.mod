module polychrome.dev/hack/argocd-health

go 1.26.0

require (
	github.com/yuin/gopher-lua v1.1.2
	sigs.k8s.io/yaml v1.4.0
)
