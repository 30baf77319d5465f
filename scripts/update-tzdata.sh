#!/bin/sh
# Replaces the time-zone rules compiled into Orrery (grains/schedule/zonerules) with the Go
# toolchain's copy, and their version with the toolchain's tzdata release. A silo built after
# this leads partitions onto the new rules zone by zone (docs/architecture.md, "Zone rules").
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
goroot=$(go env GOROOT)
version=$(sed -n 's/^DATA=//p' "$goroot/lib/time/update.bash")
[ -n "$version" ] || { echo "no DATA= line in $goroot/lib/time/update.bash" >&2; exit 1; }
cp "$goroot/lib/time/zoneinfo.zip" "$root/grains/schedule/zonerules/zoneinfo.zip"
sed -i "s/^const Version = \".*\"/const Version = \"$version\"/" "$root/grains/schedule/zonerules/zonerules.go"
echo "zone rules: tzdata $version"
