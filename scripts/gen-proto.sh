#!/usr/bin/env bash
# Regenerates api/v1/*.pb.go with pinned tools and records the descriptor hash that the
# staleness test checks when protoc is absent. Needs protoc (Debian: protobuf-compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_GEN_GO_VERSION=v1.36.12
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
bin="$(go env GOPATH)/bin"
if [ ! -x "$bin/protoc-gen-go" ] || ! "$bin/protoc-gen-go" --version | grep -q "${PROTOC_GEN_GO_VERSION}"; then
  GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
out="${1:-.}"
PATH="$bin:$PATH" protoc -I. --go_out="$out" --go_opt=paths=source_relative api/v1/*.proto
if [ "$out" = "." ]; then
  cat api/v1/*.proto | sha256sum | cut -d' ' -f1 > api/v1/proto.sha256
fi
