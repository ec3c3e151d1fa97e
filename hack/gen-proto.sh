#!/usr/bin/env bash
# Regenerates proto/gen from proto/**/*.proto with Debian's protoc and ts-proto.
# The output is committed; CI fails when this changes it (make verify-generate).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
rm -rf proto/gen
mkdir -p proto/gen
mapfile -t files < <(cd proto && find polychrome -name '*.proto' | LC_ALL=C sort)
protoc \
  --plugin=protoc-gen-ts_proto=node_modules/.bin/protoc-gen-ts_proto \
  --ts_proto_out=proto/gen \
  --ts_proto_opt=outputServices=grpc-js,env=node,esModuleInterop=true,forceLong=number,oneof=unions-value,useOptionals=messages,useExactTypes=false,outputTypeRegistry=false,exportCommonSymbols=false \
  -I proto "${files[@]}"
echo "proto: generated $(find proto/gen -name '*.ts' | wc -l) files from ${#files[@]} .proto files"
