#!/usr/bin/env bash
# make deb: build DIST/gapscope_<version>_amd64.deb with dpkg-deb from a
# staged tree: the binary, a systemd unit for watch, its settings in
# /etc/default/gapscope, man pages generated from the commands and shell
# completions (both written by the binary itself). Usage: build-deb.sh [DIST]
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-dist}
go=${GO:-go}
arch=amd64
umask 022

# The version: the last vX.Y.Z tag (with the commits since), or 0.0 and the
# commit's time and revision; "+modified" when the tree differs from it.
rev=$(git rev-parse --short=12 HEAD)
dirty=$(git diff --quiet HEAD 2>/dev/null || echo +modified)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
if tag=$(git describe --tags --match 'v[0-9]*' --abbrev=0 2>/dev/null); then
	n=$(git rev-list --count "$tag..HEAD")
	version=${tag#v}
	[ "$n" -eq 0 ] || version="$version+git$n.$rev"
else
	version="0.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S).$rev"
fi
version="$version$dirty"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
# Compiled as make build compiles (its cache serves), linked stripped. With
# cgo (the default where a C compiler is) the binary links the C library:
# then it needs the build host's version of it at least.
bin=$stage/usr/bin/gapscope
GOOS=linux GOARCH=$arch "$go" build -buildvcs=auto \
	-ldflags "-s -w -X main.buildRevision=$rev$dirty" -o "$bin" ./cmd/gapscope
depends=adduser
if ldd "$bin" 2>/dev/null | grep -q 'libc\.so'; then
	depends="libc6 (>= $(getconf GNU_LIBC_VERSION | cut -d' ' -f2)), $depends"
fi

man=$stage/usr/share/man/man1
"$bin" man-pages "$man"
gzip -9n "$man"/*.1
install -d "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
	"$stage/usr/share/fish/vendor_completions.d"
"$bin" completion bash >"$stage/usr/share/bash-completion/completions/gapscope"
"$bin" completion zsh >"$stage/usr/share/zsh/vendor-completions/_gapscope"
"$bin" completion fish >"$stage/usr/share/fish/vendor_completions.d/gapscope.fish"

install -D -m 0644 packaging/gapscope.service "$stage/usr/lib/systemd/system/gapscope.service"
install -D -m 0644 packaging/default "$stage/etc/default/gapscope"
install -D -m 0644 packaging/my.cnf "$stage/usr/share/gapscope/my.cnf"
install -D -m 0644 packaging/web-config.yml "$stage/usr/share/gapscope/web-config.yml"

install -d "$stage/DEBIAN"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$stage/DEBIAN/"
install -m 0644 packaging/debian/conffiles "$stage/DEBIAN/"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
	packaging/debian/control.in >"$stage/DEBIAN/control"
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$dist"
deb="$dist/gapscope_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
