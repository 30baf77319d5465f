#!/bin/sh
# fuzz-corpus.sh PKG TARGET: copies the corpus `go test -fuzz TARGET PKG` grew in the build
# cache into PKG/testdata/fuzz/TARGET, where `go test` replays it as seed inputs and git keeps it.
set -eu
pkg=$1 target=$2
path=$(go list "$pkg")
src="$(go env GOCACHE)/fuzz/$path/$target"
dir="$(go list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$target"
[ -d "$src" ] || { echo "fuzz-corpus: no corpus for $target in $src (run make fuzz first)" >&2; exit 1; }
mkdir -p "$dir"
cp "$src"/* "$dir"/
echo "fuzz-corpus: $(ls "$dir" | wc -l) inputs in $dir"
