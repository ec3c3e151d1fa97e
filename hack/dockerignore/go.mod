// Builds dockerignore-check (main.go): Docker's own .dockerignore matcher
// (github.com/moby/patternmatcher, as BuildKit uses it) for the Dockerfile context test and
// hack/build-images.sh. Version pinned in the Makefile and here.
module polychrome.dev/hack/dockerignore

go 1.26.0

require github.com/moby/patternmatcher v0.6.1
