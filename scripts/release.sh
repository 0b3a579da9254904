#!/usr/bin/env bash
# release.sh [OUTDIR]: the release binaries of agentry, for linux, darwin
# and windows on amd64 and arm64, stripped (-trimpath, -s -w), without
# cgo, with SHA256SUMS beside them; each binary's size is printed. The
# same commit and Go release build the same bytes. OUTDIR defaults to
# dist/VERSION. A work tree with uncommitted changes is refused (its
# binaries would not be the commit's) unless ALLOW_DIRTY=1.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' agentry.go)
[ -n "$version" ] || { echo "release.sh: no Version in agentry.go" >&2; exit 1; }
if [ "${ALLOW_DIRTY:-}" != 1 ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
	echo "release.sh: the work tree has uncommitted changes; commit them or set ALLOW_DIRTY=1" >&2
	exit 1
fi
out=${1:-dist/$version}
mkdir -p "$out"
rm -f "$out"/agentry_* "$out/SHA256SUMS"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	os=${target%/*} arch=${target#*/}
	name="agentry_${version}_${os}_${arch}"
	[ "$os" = windows ] && name+=.exe
	GOOS=$os GOARCH=$arch go build -trimpath -ldflags='-s -w -buildid=' -o "$out/$name" ./cmd/agentry
	awk -v n="$name" -v s="$(wc -c <"$out/$name")" 'BEGIN { printf "%-40s %6.1f MB\n", n, s / 1e6 }'
done
# sha256sum on Linux, shasum on macOS: the same format.
sum=sha256sum
command -v sha256sum >/dev/null || sum="shasum -a 256"
(cd "$out" && $sum agentry_* >SHA256SUMS)
echo "release.sh: agentry $version in $out (SHA256SUMS)"
