#!/bin/sh
# Installs a pynox bundle (pynox-VERSION-TARGET-cpXY.tar.gz) with no network access.
#
#   install.sh --archive FILE [--prefix DIR] [--bin-dir DIR] [--no-link] [--allow-old-kernel]
#              [--allow-downgrade] [--verify-key=KEY.pub | --allowed-signers=FILE]
#   install.sh --uninstall [--prefix DIR]
#
# The archive's sha256 is checked against FILE.sha256, which must name FILE (the install
# refuses to go on without a tool to check it); with --verify-key or --allowed-signers,
# its signature FILE.sig too (ssh-keygen -Y verify, namespace pynox-bundle). Then the
# bundle's MANIFEST.json is checked against this machine: CPU architecture, C library
# (and glibc version), kernel. All of it reads one copy of FILE in TMPDIR, so what is
# unpacked is what was checked. The bundle is unpacked beside the prefix and renamed into
# place; an existing install stays until the new one has run.
#
# A prefix beneath a folder another user owns or may write to is refused: they could take
# its name as the install runs (or rename a folder above it after), and have their own
# program installed in its place. Nothing is deleted that this script did not install: the prefix gets a receipt
# (.pynox-install) listing every file and folder put there, and an upgrade or --uninstall
# refuses a prefix that holds anything its receipt does not list, or that has no receipt.
# An older version replaces a newer one only with --allow-downgrade. `pynox` is linked
# into ~/.local/bin (/usr/local/bin as root) unless --no-link; an existing `pynox` there
# is replaced only when it links into a pynox install. `pynox doctor` ends it.
# Every failure is one line on stderr and exit status 1.

set -eu
umask 022

PROG=install.sh
RECORD=.pynox-install
# What a bundle's signature is made for (ssh-keygen -Y sign -n NAMESPACE), and the
# principal --verify-key trusts its key as.
NAMESPACE=pynox-bundle
PRINCIPAL=pynox-release

die() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 1
}

say() {
    printf '%s: %s\n' "$PROG" "$*"
}

# first_line TEXT: what a command said first, for a one-line failure.
first_line() {
    printf '%s\n' "$1" | grep -m 1 .
}

usage() {
    cat <<'EOF'
usage: install.sh --archive FILE [--prefix DIR] [--bin-dir DIR] [--no-link] [--allow-old-kernel]
                  [--allow-downgrade] [--verify-key=KEY.pub | --allowed-signers=FILE]
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
downgrade=no
verify_key=""
allowed_signers=""

need_value() {
    if [ "$#" -lt 2 ] || [ -z "$2" ]; then
        die "$1 needs a value (see --help)"
    fi
}

# An empty value is refused in either form: --verify-key="$KEY" with KEY unset would
# otherwise install without checking the signature it asked for.
while [ "$#" -gt 0 ]; do
    case "$1" in
        --archive) need_value "$@"; archive=$2; shift 2 ;;
        --archive=*) need_value --archive "${1#*=}"; archive=${1#*=}; shift ;;
        --prefix) need_value "$@"; prefix=$2; shift 2 ;;
        --prefix=*) need_value --prefix "${1#*=}"; prefix=${1#*=}; shift ;;
        --bin-dir) need_value "$@"; bin_dir=$2; shift 2 ;;
        --bin-dir=*) need_value --bin-dir "${1#*=}"; bin_dir=${1#*=}; shift ;;
        --verify-key) need_value "$@"; verify_key=$2; shift 2 ;;
        --verify-key=*) need_value --verify-key "${1#*=}"; verify_key=${1#*=}; shift ;;
        --allowed-signers) need_value "$@"; allowed_signers=$2; shift 2 ;;
        --allowed-signers=*) need_value --allowed-signers "${1#*=}"; allowed_signers=${1#*=}; shift ;;
        --no-link) link=no; shift ;;
        --uninstall) uninstall=yes; shift ;;
        --allow-old-kernel) old_kernel=yes; shift ;;
        --allow-downgrade) downgrade=yes; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *)
            [ -n "$archive" ] || die "$1 is not an option; give the bundle to install with --archive FILE (see --help)"
            # A glob such as --archive pynox-*.tar.gz that matched more than one file.
            die "one archive at a time: $1 comes after --archive $archive; give only the bundle for this machine" ;;
    esac
done
if [ -n "$verify_key" ] && [ -n "$allowed_signers" ]; then
    die "give --verify-key or --allowed-signers, not both"
fi

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
# A prefix that is a link is refused: an upgrade moves the prefix aside and --uninstall
# removes it, which would move or remove the link and leave the install behind it.
if [ -L "$prefix" ]; then
    die "$prefix is a link (to $(readlink "$prefix")); pass the folder it leads to as --prefix (nothing was changed)"
fi

# Scratch files (listings, the signers file --verify-key makes) and the unpacked bundle,
# both removed on every exit.
staging=""
work=""
aside=""  # the old install while an upgrade has it moved aside
cleanup() {
    # Stopped between an upgrade's two renames: the old install goes back in place.
    if [ -n "$aside" ] && [ ! -e "$prefix" ] && [ ! -L "$prefix" ]; then
        mv "$aside" "$prefix" && say "stopped; the previous install is back in $prefix"
    fi
    if [ -n "$staging" ]; then rm -rf "$staging"; fi
    if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
work=$(mktemp -d "${TMPDIR:-/tmp}/pynox-install.XXXXXX" 2>/dev/null) ||
    die "cannot create a temporary folder with mktemp -d; set TMPDIR to a folder you may write to"

# --- helpers -------------------------------------------------------------------

# version_ge A B: whether dotted version A >= B (non-numeric tails are ignored): for the
# C library and the kernel, whose tails (such as 6.1.0-26-amd64) say nothing of the order.
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

# release_ge A B: whether pynox release A >= B, in PEP 440's order: 1.0.dev1 < 1.0a1 <
# 1.0b1 < 1.0rc1 < 1.0 < 1.0.post1. A tail of another shape counts as a final release.
release_ge() {
    awk -v a="$1" -v b="$2" '
        # Splits version v into its release numbers (part[1..parts]), the rank of its
        # phase (dev 0, a 1, b 2, rc 3, final 4, post 5) and that phase'"'"'s number.
        function parse(v) {
            v = tolower(v); sub(/^v/, "", v); sub(/[+].*/, "", v)
            match(v, /^[0-9]+([.][0-9]+)*/)
            parts = split(substr(v, 1, RLENGTH), part, ".")
            tail = substr(v, RLENGTH + 1); gsub(/[-_.]/, "", tail)
            rank = 4; number = 0
            if (match(tail, /^(dev|alpha|a|beta|b|rc|c|preview|pre|post|rev|r)?[0-9]*/) && RLENGTH > 0) {
                word = tail; sub(/[0-9].*$/, "", word)
                number = substr(tail, length(word) + 1, RLENGTH - length(word)) + 0
                if (word == "dev") rank = 0
                else if (word == "a" || word == "alpha") rank = 1
                else if (word == "b" || word == "beta") rank = 2
                else if (word == "rc" || word == "c" || word == "pre" || word == "preview") rank = 3
                else rank = 5  # post, rev, r, or a bare number (1.0-1)
            }
        }
        BEGIN {
            parse(a); n = parts; for (i = 1; i <= n; i++) x[i] = part[i]; ra = rank; na = number
            parse(b); m = parts; for (i = 1; i <= m; i++) y[i] = part[i]
            for (i = 1; i <= (n > m ? n : m); i++) {
                if (x[i] + 0 > y[i] + 0) exit 0
                if (x[i] + 0 < y[i] + 0) exit 1
            }
            if (ra != rank) exit (ra > rank ? 0 : 1)
            exit (na >= number ? 0 : 1)
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

# json_field NAME: a top-level scalar of the MANIFEST.json on stdin ("null" stays "null").
json_field() {
    sed -n "s/^  \"$1\": \"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\},\\{0,1\\}\$/\\1/p" | head -n 1
}

manifest_field() {
    printf '%s\n' "$manifest" | json_field "$1"
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

# The version glibc's own library prints when run ("... release version 2.36."), for a
# minimal machine with neither getconf nor ldd; nothing where there is no such library.
libc_so_version() {
    for libc in /lib64/libc.so.6 /lib/libc.so.6 /lib/*-linux-gnu/libc.so.6 \
        /usr/lib64/libc.so.6 /usr/lib/*-linux-gnu/libc.so.6; do
        [ -f "$libc" ] && [ -x "$libc" ] || continue
        version=$("$libc" 2>/dev/null | sed -n '1s/.*release version \([0-9][0-9.]*[0-9]\).*/\1/p')
        if [ -n "$version" ]; then
            echo "$version"
            return
        fi
    done
}

# known_paths DIR: every path (as ./relative) that the receipt in DIR lists, itself included.
known_paths() {
    if grep -q '^file=' "$1/$RECORD"; then
        sed -n -e 's/^file=//p' -e 's/^dir=//p' "$1/$RECORD"
    else
        # A record from an install.sh before receipts: what its bundle's manifest lists
        # (the "files" and "links" objects, one key a line), with their folders.
        if [ -f "$1/MANIFEST.json" ]; then
            awk '/^  "(files|links)": \{$/ { inside = 1; next }
                inside && /^  \}/ { inside = 0; next }
                inside && match($0, /^    "[^"\\]*": /) {
                    path = substr($0, 6, RLENGTH - 8); print "./" path
                    n = split(path, part, "/"); folder = "."
                    for (i = 1; i < n; i++) { folder = folder "/" part[i]; print folder }
                }' "$1/MANIFEST.json"
        fi
        echo ./MANIFEST.json
    fi
    echo "./$RECORD"
}

# first_unknown DIR: the first path in DIR that its receipt does not list, or nothing;
# fails when DIR cannot be listed to the end.
first_unknown() {
    known_paths "$1" >"$work/known" || return 1
    (cd "$1" && find . ! -name .) >"$work/found" 2>/dev/null || return 1
    awk 'FNR == NR { known[$0] = 1; next } !($0 in known) { print; exit }' \
        "$work/known" "$work/found"
}

# refuse_unknown DIR WHAT: dies unless DIR holds only what its receipt lists.
refuse_unknown() {
    unknown=$(first_unknown "$1") ||
        die "cannot list every file in $1, so cannot tell what is yours there; nothing was $2"
    [ -z "$unknown" ] ||
        die "$1 holds ${unknown#./}, which no pynox install put there; move it out of the prefix and run again (nothing was $2)"
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
    refuse_unknown "$prefix" removed
    recorded=$(sed -n 's/^prefix=//p' "$prefix/$RECORD")
    linked=$(sed -n 's/^link=//p' "$prefix/$RECORD")
    if [ -n "$linked" ] && [ -L "$linked" ]; then
        target=$(readlink "$linked")
        if [ "$target" = "$prefix/bin/pynox" ] || [ "$target" = "$recorded/bin/pynox" ]; then
            error=$(rm -f "$linked" 2>&1) ||
                die "cannot remove the link $linked ($(printf '%s\n' "$error" | head -n 1))"
            say "removed the link $linked"
        fi
    fi
    # rm says a line per file it could not remove (thousands on a read-only disk): one.
    error=$(rm -rf "$prefix" 2>&1) ||
        die "cannot remove $prefix ($(printf '%s\n' "$error" | head -n 1))"
    say "removed $prefix"
    exit 0
fi

# --- where it goes: in folders no other user could swap it in ---------------------

# folder_risk PATH FIRST: why another user could replace what is installed beneath PATH
# ("belongs to user N" or "other users may write to"), or nothing. FIRST (yes or no)
# says whether PATH is the folder the install is made in: no one else may write to that
# one at all, since with the sticky bit (/tmp) others cannot move what is in it but can
# take a name in it first (the prefix, between its checks and the rename that puts the
# install there). Above it, a sticky folder is safe. Write by root's group, or the user's
# own where it is theirs alone (own_group), is the user's. A folder with an access control list ("+" after its mode) may let
# other users write to it (its group's bits then show the list's mask), or to the
# folders the install makes in it (a default list, which the mode does not show).
folder_risk() {
    # shellcheck disable=SC2012  # ls -n: the portable way to read one path's mode and owner
    ls -ldn "$1" 2>/dev/null | awk -v me="$(id -u)" -v group="$(own_group)" -v first="$2" '
        NR == 1 {
            if ($3 != 0 && $3 != me) { print "belongs to user " $3; exit }
            if (substr($1, 1, 1) == "l") exit  # its target is checked where it resolves
            others = substr($1, 9, 1) == "w" || (substr($1, 6, 1) == "w" && $4 != 0 && $4 != group)
            if (substr($1, 11, 1) == "+" && (first == "yes" || substr($1, 6, 1) == "w")) others = 1
            if (others && (first == "yes" || substr($1, 10, 1) !~ /[tT]/)) print "other users may write to"
        }'
}

# own_group: the user's primary group where it is theirs alone (named after them, no other
# member listed), else root's (0): a group others have too ("users", nogroup) lets them
# write where it may.
own_group() {
    gid=$(id -g)
    user=$(id -un 2>/dev/null) || user=
    if [ -z "$user" ] || [ "$(id -gn 2>/dev/null)" != "$user" ]; then
        echo 0
        return
    fi
    entry=$(getent group "$gid" 2>/dev/null || grep "^[^:]*:[^:]*:$gid:" /etc/group 2>/dev/null)
    members=${entry##*:}
    if [ -z "$members" ] || [ "$members" = "$user" ]; then echo "$gid"; else echo 0; fi
}

# shared_folder DIR: the first folder, from DIR up to /, that folder_risk finds, and why
# ("FOLDER: WHY"); nothing when there is none. Folders not made yet are skipped: the
# install makes them, its own, in the first one that exists.
shared_folder() {
    path=$1
    first=yes
    while :; do
        if [ -e "$path" ] || [ -L "$path" ]; then
            why=$(folder_risk "$path" "$first")
            if [ -n "$why" ]; then
                printf '%s: %s\n' "$path" "$why"
                return
            fi
            first=no
        fi
        parent=$(dirname "$path")
        [ "$parent" != "$path" ] || return 0  # / (or //, which POSIX lets dirname keep)
        path=$parent
    done
}

# Both as the prefix is written and where its links lead.
existing=$(dirname "$prefix")
while [ ! -e "$existing" ] && [ "$existing" != / ]; do existing=$(dirname "$existing"); done
shared=$(shared_folder "$(dirname "$prefix")")
[ -n "$shared" ] || shared=$(shared_folder "$(cd -P "$existing" 2>/dev/null && pwd -P)")
if [ -n "$shared" ]; then
    die "$prefix is beneath ${shared%%: *}, which ${shared#*: }: they could replace what is installed there with a program of their own; choose a --prefix in folders only you or root may write to (nothing was changed)"
fi

# --- verify the archive ------------------------------------------------------------

[ -n "$archive" ] || die "give the bundle to install with --archive FILE (see --help)"
[ ! -d "$archive" ] || die "$archive is a folder; give the bundle's .tar.gz file with --archive"
[ -f "$archive" ] || die "the archive $archive does not exist"
case "$archive" in
    /*) ;;
    *) archive=$(pwd)/$archive ;;
esac
name=$(basename "$archive")
sums=$archive.sha256
[ -f "$sums" ] || die "$sums is missing; copy it along with the archive, the install verifies it"
# The sha256 on the line that names this archive, in sha256sum's format: "HEX  NAME" or
# "HEX *NAME". A .sha256 made for another file does not vouch for this one.
found=$(NAME=$name awk '
    { sub(/\r$/, "") }  # a .sha256 with CRLF line ends, as copied through Windows
    length($0) > 66 && substr($0, 1, 64) !~ /[^0-9a-fA-F]/ && substr($0, 65, 1) == " " {
        hashes++
        file = substr($0, 67)
        if (substr($0, 66, 1) == " " || substr($0, 66, 1) == "*") {
            if (file == ENVIRON["NAME"]) { print "sha256 " tolower(substr($0, 1, 64)); exit }
            if (other == "") other = file
        }
    }
    END { if (other != "") print "other " other; else if (!hashes) print "none" }' "$sums" | head -n 1)
case "$found" in
    "sha256 "*) expected=${found#sha256 } ;;
    "other "*) die "$sums gives the sha256 of ${found#other }, not of $name; copy the .sha256 that came with the archive" ;;
    *) die "$sums holds no sha256 line for $name (HEX  $name)" ;;
esac
tool=$(sha256_tool)
[ -n "$tool" ] ||
    die "no sha256sum, shasum or openssl to verify $archive with; install one (an unverified archive is never installed)"
# Every check below and the unpacking read one private copy: the file where it lies could
# change between two reads (another writer, or a file server that answers as it likes), and
# the bytes unpacked must be the bytes checked.
bundle=$work/bundle.tar.gz
# cp's complaint is kept in memory: a file for it would be on the disk that is full.
error=$(cp "$archive" "$bundle" 2>&1) ||
    die "cannot copy $archive into $work to check it ($(printf '%s\n' "$error" | grep -m 1 .)); set TMPDIR to a folder with room for it"
actual=$(sha256_of "$bundle" "$tool")
[ "$actual" = "$expected" ] ||
    die "$archive has sha256 $actual, not the $expected of $sums; the file is damaged or not the one released"
say "checked the sha256 of $name against $(basename "$sums")"

# --- verify its signature: who made it, not only that it is whole -------------------

# ssh_keygen_lacks OPERATION: whether this ssh-keygen has no -Y OPERATION, from what it says
# when asked for it with no arguments: OpenSSH before -Y existed rejects the option, a
# later one without that operation names it unsupported; one that has it asks for more.
ssh_keygen_lacks() {
    said=$(ssh-keygen -Y "$1" </dev/null 2>&1)
    case "$said" in
        *"option -- Y"* | *"option -- 'Y'"* | *"Unsupported operation"*) return 0 ;;
    esac
    return 1
}

sig=$archive.sig
if [ -n "$verify_key$allowed_signers" ]; then
    [ -f "$sig" ] ||
        die "$sig is missing, and this install accepts only a signed archive; copy the .sig that came with it"
    command -v ssh-keygen >/dev/null 2>&1 ||
        die "no ssh-keygen to verify $sig with; install OpenSSH's client (a signature is never skipped)"
    # An OpenSSH too old for a -Y operation fails it as it fails a bad signature: said so
    # here, not as a signature that does not match.
    operations=verify
    [ -z "$allowed_signers" ] || operations="find-principals verify"
    for operation in $operations; do
        ! ssh_keygen_lacks "$operation" ||
            die "this ssh-keygen cannot verify signatures (its OpenSSH is too old for ssh-keygen -Y $operation); install a newer OpenSSH client to check $sig (nothing was changed)"
    done
    if [ -n "$verify_key" ]; then
        [ -f "$verify_key" ] || die "the key $verify_key does not exist"
        # Trust the key as one principal, for bundle signatures only.
        signers=$work/allowed_signers
        awk -v principal="$PRINCIPAL" -v namespace="$NAMESPACE" '
            /^[ \t]*(#|$)/ { next }
            NF >= 2 && $1 ~ /^(ssh-|ecdsa-|sk-)/ {
                printf "%s namespaces=\"%s\" %s %s\n", principal, namespace, $1, $2; keys++; next
            }
            { bad = 1 }
            END { exit bad || !keys }' "$verify_key" >"$signers" ||
            die "$verify_key is not an OpenSSH public key (a line like ssh-ed25519 AAAA... name); give the .pub file"
        principals=$PRINCIPAL
        source="the key in $verify_key"
    else
        [ -f "$allowed_signers" ] || die "the allowed signers file $allowed_signers does not exist"
        signers=$allowed_signers
        principals=$(ssh-keygen -Y find-principals -s "$sig" -f "$signers" 2>/dev/null | tr ',' '\n') ||
            principals=""
        source="the allowed signers in $allowed_signers"
    fi
    # -Y verify, unlike -Y check-novalidate, binds the signature to a principal's key
    # and to the namespace the signers file allows that key.
    signer=$(printf '%s\n' "$principals" | while IFS= read -r principal; do
        [ -n "$principal" ] || continue
        if ssh-keygen -Y verify -f "$signers" -I "$principal" -n "$NAMESPACE" -s "$sig" \
            <"$bundle" >/dev/null 2>&1; then
            printf '%s\n' "$principal"
            break
        fi
    done)
    [ -n "$signer" ] ||
        die "$sig is not a $NAMESPACE signature of $name by $source; the archive is not the one that was signed, or not by a key you trust"
    say "verified the signature $(basename "$sig"): made for $name by $signer, per $source"
elif [ -f "$sig" ]; then
    say "did not check the signature $(basename "$sig"); pass --verify-key=KEY.pub to check who made the archive"
fi

# --- read it: a pynox bundle, whole, with nothing outside its folder ---------------

members=$work/members
command -v tar >/dev/null 2>&1 || die "no tar to unpack $archive with; install tar"
if ! tar -tzf "$bundle" >"$members" 2>/dev/null; then
    command -v gzip >/dev/null 2>&1 ||
        die "no gzip to unpack $archive with (tar uses it for a .tar.gz); install gzip"
    # Read again without writing anything: a TMPDIR with room for the copy but not for
    # the list of its files is no reason to copy the archive again.
    if error=$(tar -tzf "$bundle" 2>&1 >/dev/null); then
        die "cannot write the list of the files in $archive into $work; set TMPDIR to a folder with room"
    fi
    die "$archive is truncated or corrupt (tar: $(printf '%s\n' "$error" | grep -m 1 .)); copy it again"
fi
top=$(sed -n '1{s|^\./||;s|/.*||;p;}' "$members")
case "$top" in
    pynox-*) ;;
    *) die "$archive is not a pynox bundle (no pynox-* folder at its top)" ;;
esac
outside=$(TOP=$top awk '{
        path = $0; sub(/^\.\//, "", path)
        if ((path != ENVIRON["TOP"] && index(path, ENVIRON["TOP"] "/") != 1) ||
            ("/" path "/") ~ /\/\.\.\//) { print $0; exit }
    }' "$members")
[ -z "$outside" ] || die "$archive is not a pynox bundle: $outside is outside its $top folder"
manifest=$(tar -xzf "$bundle" -O "$top/MANIFEST.json" 2>/dev/null) ||
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
    [ -n "$glibc" ] || glibc=$(libc_so_version)
    [ -n "$glibc" ] ||
        die "this bundle needs glibc, and this machine has none that getconf, ldd or libc.so.6 reports (musl?); install the musl bundle"
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

# --- what is at the prefix now: nothing, an empty folder, or our own install --------

previous_version=""
if [ -f "$prefix/$RECORD" ]; then
    refuse_unknown "$prefix" changed
    previous_version=$(json_field version <"$prefix/MANIFEST.json" 2>/dev/null) || true
    [ -n "$previous_version" ] || previous_version=$(sed -n 's/^version=//p' "$prefix/$RECORD")
    [ -n "$previous_version" ] || previous_version=unknown
    if [ "$previous_version" != unknown ] && [ "$downgrade" = no ] &&
        ! release_ge "$version" "$previous_version"; then
        die "$prefix holds pynox $previous_version, newer than this bundle's $version; pass --allow-downgrade to install the older one (nothing was changed)"
    fi
elif [ -e "$prefix/MANIFEST.json" ] || [ -L "$prefix/MANIFEST.json" ]; then
    die "$prefix holds a MANIFEST.json but no receipt of a pynox install ($RECORD), so nothing there is known to be pynox's; choose another --prefix (nothing was changed)"
elif [ -e "$prefix" ] || [ -L "$prefix" ]; then
    if [ ! -d "$prefix" ] || [ -L "$prefix" ] || [ -n "$(ls -A "$prefix")" ]; then
        die "$prefix exists and is not a pynox install; choose another --prefix or remove it"
    fi
fi

# The link's folder is checked before anything is unpacked: an install that then could
# not be linked would be in place, and reported as a failure.
if [ "$link" = yes ]; then
    mkdir -p "$bin_dir" 2>/dev/null ||
        die "cannot create $bin_dir; pass --bin-dir DIR or --no-link (nothing was changed)"
    ln -s "$prefix/bin/pynox" "$bin_dir/.pynox.$$" 2>/dev/null ||
        die "cannot create a link in $bin_dir; pass --bin-dir DIR or --no-link (nothing was changed)"
    rm -f "$bin_dir/.pynox.$$"
fi

# --- unpack beside the prefix, check it runs, then rename it into place ------------

# Why mkdir failed, from its message's end ("...: Read-only file system").
mkdir_reason() {
    sed -n '1s/.*: //p' "$work/mkdir-error"
}

parent=$(dirname "$prefix")
mkdir -p "$parent" 2>"$work/mkdir-error" ||
    die "cannot create $parent ($(mkdir_reason)); choose a --prefix in a folder you may write to"
staging=$prefix.new.$$
# The bundle is unpacked beside the prefix, so that moving it into place is one rename.
mkdir "$staging" 2>"$work/mkdir-error" ||
    die "cannot create $staging beside the prefix ($(mkdir_reason)); choose a --prefix in a folder you may write to"
# In the C locale, so that a disk's complaint reads the same everywhere.
if ! error=$(LC_ALL=C tar -xzf "$bundle" -C "$staging" 2>&1); then
    error=$(printf '%s\n' "$error" | head -n 1)
    case "$error" in
        *"No space left on device"* | *"Disk quota exceeded"* | *"Read-only file system"*)
            die "cannot unpack $archive into $staging ($error); make room there, or choose a --prefix on another disk (nothing was changed)" ;;
    esac
    die "cannot unpack $archive into $staging ($error); nothing was changed"
fi
tree=$staging/$top
[ -f "$tree/bin/pynox" ] || die "$archive has no bin/pynox; the bundle is broken"
if [ ! -x "$tree/bin/pynox" ]; then
    # Executable by its mode, but not here: a file system mounted noexec.
    [ -z "$(find "$tree/bin/pynox" -perm -100)" ] ||
        die "the file system of $parent does not let programs run (mounted noexec?); choose a --prefix on another one (nothing was changed)"
    die "$archive has a bin/pynox that is not executable; the bundle is broken"
fi

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

# The receipt: every folder and file the bundle put into the prefix, by type.
if ! { (cd "$tree" && find . ! -name . -type d) | sed 's/^/dir=/' >"$work/entries" &&
    (cd "$tree" && find . ! -name . ! -type d) | sed 's/^/file=/' >>"$work/entries"; }; then
    die "cannot list the unpacked bundle in $tree"
fi

# write_receipt DIR LINK: the receipt, written whole or not at all.
write_receipt() {
    {
        echo "# What install.sh put here: an upgrade or --uninstall removes only these."
        echo "version=$version"
        echo "prefix=$prefix"
        echo "link=$2"
        echo "archive=$name"
        echo "sha256=$actual"
        cat "$work/entries"
    } >"$1/$RECORD.tmp" && mv -f "$1/$RECORD.tmp" "$1/$RECORD"
}
error=$(write_receipt "$tree" "" 2>&1) ||
    die "cannot write the receipt $tree/$RECORD ($(first_line "$error")); nothing was changed"

kept_link=""
if [ -n "$previous_version" ]; then
    kept_link=$(sed -n 's/^link=//p' "$prefix/$RECORD")
    previous=$prefix.old.$$
    error=$(mv "$prefix" "$previous" 2>&1) ||
        die "cannot move the old install $prefix aside ($(first_line "$error")); nothing was changed"
    aside=$previous
    if ! error=$(mv "$tree" "$prefix" 2>&1); then
        mv "$previous" "$prefix" 2>/dev/null || true
        aside=""
        die "cannot move the new install into $prefix ($(first_line "$error")); the old one is back in place"
    fi
    aside=""
    # Checked again now that nothing else can write there: only what the receipt lists goes.
    unknown=$(first_unknown "$previous") || unknown="(a file that cannot be listed)"
    if [ -z "$unknown" ]; then
        rm -rf "$previous"
        say "removed the previous pynox $previous_version: the $(wc -l <"$work/known" | tr -d ' ') paths its receipt lists"
    else
        say "kept the previous install in $previous: it holds ${unknown#./}, which no pynox install put there"
    fi
    if [ "$previous_version" = "$version" ]; then
        done_line="reinstalled pynox $version in $prefix"
    elif [ "$previous_version" = unknown ] || release_ge "$version" "$previous_version"; then
        done_line="upgraded pynox $previous_version to $version in $prefix"
    else
        done_line="downgraded pynox $previous_version to $version in $prefix (--allow-downgrade)"
    fi
else
    if [ -d "$prefix" ]; then
        rmdir "$prefix" 2>/dev/null || die "$prefix is no longer empty; choose another --prefix"
    fi
    error=$(mv "$tree" "$prefix" 2>&1) ||
        die "cannot move the new install into $prefix ($(first_line "$error"))"
    done_line="installed pynox $version in $prefix"
fi
say "$done_line"

# --- link onto PATH, complete the receipt, and let pynox check the machine ----------

# into_pynox LINK: whether the symlink LINK points at bin/pynox of a pynox install
# (a folder with our receipt).
into_pynox() {
    current=$(readlink "$1" 2>/dev/null) || return 1
    case "$current" in
        /*) ;;
        *) current=$(dirname "$1")/$current ;;
    esac
    owner=${current%/bin/pynox}
    [ "$owner" != "$current" ] && [ -f "$owner/$RECORD" ]
}

linked=""
if [ "$link" = yes ]; then
    mkdir -p "$bin_dir" 2>/dev/null || die "cannot create $bin_dir; pass --bin-dir DIR or --no-link"
    destination=$bin_dir/pynox
    replacing=""
    if [ -L "$destination" ] && into_pynox "$destination"; then
        [ "$owner" = "$prefix" ] || replacing=$owner
    elif [ -e "$destination" ] || [ -L "$destination" ]; then
        destination=""
    fi
    if [ -n "$destination" ]; then
        ln -s "$prefix/bin/pynox" "$bin_dir/.pynox.$$" 2>/dev/null ||
            die "cannot create a link in $bin_dir; pass --bin-dir DIR or --no-link"
        error=$(mv -f "$bin_dir/.pynox.$$" "$destination" 2>&1) ||
            die "cannot replace $destination ($(first_line "$error"))"
        linked=$destination
        if [ -n "$replacing" ]; then
            say "replaced the link $linked, which pointed into the pynox install in $replacing"
        fi
        case ":${PATH:-}:" in
            *":$bin_dir:"*) say "linked $linked" ;;
            *) say "linked $linked; add $bin_dir to PATH to call it as pynox" ;;
        esac
    else
        say "left $bin_dir/pynox as it is: it is not a link into a pynox install; run $prefix/bin/pynox, or remove it and run this again"
    fi
elif [ -n "$kept_link" ] && [ "$(readlink "$kept_link" 2>/dev/null)" = "$prefix/bin/pynox" ]; then
    linked=$kept_link  # an upgrade with --no-link keeps the earlier link, and its record
fi
error=$(write_receipt "$prefix" "$linked" 2>&1) ||
    die "cannot write the receipt $prefix/$RECORD ($(first_line "$error"))"

if ! "$prefix/bin/pynox" doctor; then
    say "pynox is installed, but this machine cannot sandbox (reasons above); pynox --no-sandbox still runs programs"
fi
