#!/bin/sh
# Installs a pynox bundle (pynox-VERSION-TARGET-cpXY.tar.gz) with no network access.
#
#   install.sh --archive FILE [--prefix DIR] [--bin-dir DIR] [--no-link] [--allow-old-kernel]
#   install.sh --uninstall [--prefix DIR]
#
# The archive's sha256 is checked against FILE.sha256 (the install refuses to go on
# without a tool to check it), then the bundle's MANIFEST.json against this machine:
# CPU architecture, C library (and glibc version), kernel. The bundle is unpacked
# beside the prefix and renamed into place; an existing install stays until the new
# one has run. `pynox` is linked into ~/.local/bin (/usr/local/bin as root) unless
# --no-link, what was done is recorded for --uninstall, and `pynox doctor` ends it.
# Every failure is one line on stderr and exit status 1.

set -eu
umask 022

PROG=install.sh
RECORD=.pynox-install

die() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 1
}

say() {
    printf '%s: %s\n' "$PROG" "$*"
}

usage() {
    cat <<'EOF'
usage: install.sh --archive FILE [--prefix DIR] [--bin-dir DIR] [--no-link] [--allow-old-kernel]
       install.sh --uninstall [--prefix DIR]
EOF
}

# --- options -------------------------------------------------------------------

archive=""
prefix=""
bin_dir=""
link=yes
uninstall=no
old_kernel=no

need_value() {
    if [ "$#" -lt 2 ] || [ -z "$2" ]; then
        die "$1 needs a value (see --help)"
    fi
}

while [ "$#" -gt 0 ]; do
    case "$1" in
        --archive) need_value "$@"; archive=$2; shift 2 ;;
        --archive=*) archive=${1#*=}; shift ;;
        --prefix) need_value "$@"; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#*=}; shift ;;
        --bin-dir) need_value "$@"; bin_dir=$2; shift 2 ;;
        --bin-dir=*) bin_dir=${1#*=}; shift ;;
        --no-link) link=no; shift ;;
        --uninstall) uninstall=yes; shift ;;
        --allow-old-kernel) old_kernel=yes; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

if [ "$(id -u)" = 0 ]; then
    default_prefix=/opt/pynox
    default_bin=/usr/local/bin
else
    [ -n "${HOME:-}" ] || die "HOME is not set; pass --prefix and --bin-dir"
    default_prefix=${XDG_DATA_HOME:-$HOME/.local/share}/pynox
    default_bin=$HOME/.local/bin
fi
prefix=${prefix:-$default_prefix}
bin_dir=${bin_dir:-$default_bin}
case "$prefix" in
    /*) ;;
    *) prefix=$(pwd)/$prefix ;;
esac
prefix=${prefix%/}
case "$bin_dir" in
    /*) ;;
    *) bin_dir=$(pwd)/$bin_dir ;;
esac
if [ -z "$prefix" ] || [ "$prefix" = / ]; then
    die "the prefix cannot be /; pass --prefix DIR"
fi

# --- helpers -------------------------------------------------------------------

# version_ge A B: whether dotted version A >= B (non-numeric tails are ignored).
version_ge() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, "."); m = split(b, y, ".")
        for (i = 1; i <= (n > m ? n : m); i++) {
            if (x[i] + 0 > y[i] + 0) exit 0
            if (x[i] + 0 < y[i] + 0) exit 1
        }
        exit 0
    }'
}

# The first tool found that computes a sha256, or nothing.
sha256_tool() {
    for tool in sha256sum shasum openssl; do
        if command -v "$tool" >/dev/null 2>&1; then
            echo "$tool"
            return
        fi
    done
}

sha256_of() {
    case "$2" in
        sha256sum) sha256sum <"$1" | cut -d ' ' -f 1 ;;
        shasum) shasum -a 256 <"$1" | cut -d ' ' -f 1 ;;
        openssl) openssl dgst -sha256 -r <"$1" | cut -d ' ' -f 1 ;;
    esac
}

# manifest_field NAME: a top-level scalar of MANIFEST.json ("null" stays "null").
manifest_field() {
    printf '%s\n' "$manifest" |
        sed -n "s/^  \"$1\": \"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\},\\{0,1\\}\$/\\1/p" | head -n 1
}

machine_arch() {
    case "$(uname -m)" in
        x86_64 | amd64) echo x86_64 ;;
        aarch64 | arm64) echo aarch64 ;;
        *) uname -m ;;
    esac
}

# This machine's glibc version, or nothing on a musl (or other) C library.
glibc_version() {
    version=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
    if [ -z "$version" ] && ldd --version 2>&1 | grep -qiE 'glibc|gnu libc'; then
        version=$(ldd --version 2>/dev/null | sed -n '1s/.* \([0-9][0-9.]*\)$/\1/p')
    fi
    echo "$version"
}

# Whether this machine's C library is musl: its loader, or what its ldd says.
host_is_musl() {
    for loader in /lib/ld-musl-*.so.1; do
        [ -e "$loader" ] && return 0
    done
    ldd --version 2>&1 | grep -qi musl
}

# --- uninstall -----------------------------------------------------------------

if [ "$uninstall" = yes ]; then
    [ -f "$prefix/$RECORD" ] || die "$prefix holds no pynox install record ($RECORD); nothing was removed"
    recorded=$(sed -n 's/^prefix=//p' "$prefix/$RECORD")
    linked=$(sed -n 's/^link=//p' "$prefix/$RECORD")
    if [ -n "$linked" ] && [ -L "$linked" ]; then
        target=$(readlink "$linked")
        if [ "$target" = "$prefix/bin/pynox" ] || [ "$target" = "$recorded/bin/pynox" ]; then
            rm -f "$linked" || die "cannot remove the link $linked"
            say "removed the link $linked"
        fi
    fi
    rm -rf "$prefix" || die "cannot remove $prefix"
    say "removed $prefix"
    exit 0
fi

# --- verify the archive ------------------------------------------------------------

[ -n "$archive" ] || die "give the bundle to install with --archive FILE (see --help)"
[ -f "$archive" ] || die "the archive $archive does not exist"
case "$archive" in
    /*) ;;
    *) archive=$(pwd)/$archive ;;
esac
sums=$archive.sha256
[ -f "$sums" ] || die "$sums is missing; copy it along with the archive, the install verifies it"
expected=$(sed -n '1s/^\([0-9a-fA-F]\{64\}\)[ *].*$/\1/p' "$sums" | tr 'A-F' 'a-f')
[ -n "$expected" ] || die "$sums holds no sha256 on its first line"
tool=$(sha256_tool)
[ -n "$tool" ] ||
    die "no sha256sum, shasum or openssl to verify $archive with; install one (an unverified archive is never installed)"
actual=$(sha256_of "$archive" "$tool")
[ "$actual" = "$expected" ] ||
    die "$archive has sha256 $actual, not the $expected of $sums; the file is damaged or not the one released"

top=$(tar -tzf "$archive" 2>/dev/null | head -n 1) || true
top=${top%%/*}
case "$top" in
    pynox-*) ;;
    *) die "$archive is not a pynox bundle (no pynox-* folder at its top)" ;;
esac
manifest=$(tar -xzf "$archive" -O "$top/MANIFEST.json" 2>/dev/null) ||
    die "$archive has no $top/MANIFEST.json; it is not a pynox bundle"

# --- check this machine ------------------------------------------------------------

version=$(manifest_field version)
want_arch=$(manifest_field arch)
want_libc=$(manifest_field libc)
want_glibc=$(manifest_field glibc_min)
want_kernel=$(manifest_field kernel_min)
if [ -z "$version" ] || [ -z "$want_arch" ] || [ -z "$want_libc" ]; then
    die "$top/MANIFEST.json lacks version, arch or libc; the bundle is broken"
fi

arch=$(machine_arch)
[ "$arch" = "$want_arch" ] ||
    die "this bundle is for $want_arch, but this machine is $arch; install the $arch bundle"

if [ "$want_libc" = gnu ]; then
    glibc=$(glibc_version)
    if [ -z "$glibc" ] && host_is_musl; then
        die "this bundle needs glibc, and this machine's C library is musl; install the $want_arch-linux-musl bundle"
    fi
    [ -n "$glibc" ] ||
        die "this bundle needs glibc, and this machine has none that getconf or ldd reports (musl?); install the musl bundle"
    if [ -n "$want_glibc" ] && [ "$want_glibc" != null ] && ! version_ge "$glibc" "$want_glibc"; then
        die "this bundle needs glibc $want_glibc or newer, and this machine has $glibc"
    fi
elif [ "$want_libc" = musl ]; then
    [ -e "/lib/ld-musl-$arch.so.1" ] ||
        die "this bundle needs the musl C library (/lib/ld-musl-$arch.so.1), which this machine lacks; install the gnu bundle"
else
    die "$top/MANIFEST.json names an unknown C library: $want_libc"
fi

kernel=$(uname -r)
if [ -n "$want_kernel" ] && ! version_ge "$kernel" "$want_kernel" && [ "$old_kernel" = no ]; then
    die "Linux $kernel is older than the $want_kernel the sandbox needs; pass --allow-old-kernel to install anyway (only pynox --no-sandbox will work)"
fi

# --- unpack beside the prefix, check it runs, then rename it into place ------------

parent=$(dirname "$prefix")
mkdir -p "$parent" 2>/dev/null || die "cannot create $parent; choose another --prefix"
if [ -e "$prefix" ] && [ ! -f "$prefix/$RECORD" ] && [ ! -f "$prefix/MANIFEST.json" ]; then
    rmdir "$prefix" 2>/dev/null ||
        die "$prefix exists and is not a pynox install; choose another --prefix or remove it"
fi

staging=$prefix.new.$$
cleanup() {
    rm -rf "$staging"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
mkdir "$staging" 2>/dev/null || die "cannot create $staging; may you write to $parent?"
error=$(tar -xzf "$archive" -C "$staging" 2>&1) ||
    die "cannot unpack $archive into $staging: $(printf '%s' "$error" | head -n 1)"
tree=$staging/$top
[ -x "$tree/bin/pynox" ] || die "$archive has no bin/pynox; the bundle is broken"

error=$("$tree/bin/pynox" --version 2>&1) ||
    die "the new pynox does not start here ($(printf '%s' "$error" | head -n 1)); nothing was changed"
# The bundle's own Python loads the sandbox core from the bundle's site-packages (-I -S and
# the root folder: nothing else on sys.path).
site=$(find "$tree/python/lib" -maxdepth 2 -name site-packages -type d 2>/dev/null | head -n 1)
if [ -n "$site" ]; then
    error=$(cd / && "$tree/python/bin/python3" -I -S -c \
        'import sys; sys.path.append(sys.argv[1]); import pynox.engine.sandbox' "$site" 2>&1) ||
        die "the new pynox's Python does not run here ($(printf '%s' "$error" | tail -n 1)); nothing was changed"
fi

kept_link=""
if [ -f "$prefix/$RECORD" ]; then
    kept_link=$(sed -n 's/^link=//p' "$prefix/$RECORD")
fi
if [ -e "$prefix" ]; then
    previous=$prefix.old.$$
    mv "$prefix" "$previous" || die "cannot move the old install $prefix aside"
    if ! mv "$tree" "$prefix"; then
        mv "$previous" "$prefix" || true
        die "cannot move the new install into $prefix; the old one is back in place"
    fi
    rm -rf "$previous"
    action=upgraded
else
    mv "$tree" "$prefix" || die "cannot move the new install into $prefix"
    action=installed
fi

# --- link onto PATH, record, and let pynox check the machine ------------------------

linked=""
if [ "$link" = yes ]; then
    mkdir -p "$bin_dir" 2>/dev/null || die "cannot create $bin_dir; pass --bin-dir DIR or --no-link"
    destination=$bin_dir/pynox
    if [ -e "$destination" ] || [ -L "$destination" ]; then
        current=$(readlink "$destination" 2>/dev/null) ||
            die "$destination exists and is not a link to a pynox install; remove it or pass --no-link"
        case "$current" in
            */bin/pynox) ;;
            *) die "$destination links to $current, not to a pynox install; remove it or pass --no-link" ;;
        esac
    fi
    ln -s "$prefix/bin/pynox" "$bin_dir/.pynox.$$" 2>/dev/null ||
        die "cannot create a link in $bin_dir; pass --bin-dir DIR or --no-link"
    mv -f "$bin_dir/.pynox.$$" "$destination" || die "cannot replace $destination"
    linked=$destination
elif [ -n "$kept_link" ] && [ "$(readlink "$kept_link" 2>/dev/null)" = "$prefix/bin/pynox" ]; then
    linked=$kept_link  # an upgrade with --no-link keeps the earlier link, and its record
fi

{
    echo "version=$version"
    echo "prefix=$prefix"
    echo "link=$linked"
    echo "archive=$(basename "$archive")"
    echo "sha256=$actual"
} >"$prefix/$RECORD" || die "cannot write $prefix/$RECORD"

say "$action pynox $version in $prefix"
if [ -n "$linked" ]; then
    case ":${PATH:-}:" in
        *":$bin_dir:"*) say "linked $linked" ;;
        *) say "linked $linked; add $bin_dir to PATH to call it as pynox" ;;
    esac
fi
if ! "$prefix/bin/pynox" doctor; then
    say "pynox is installed, but this machine cannot sandbox (reasons above); pynox --no-sandbox still runs programs"
fi
