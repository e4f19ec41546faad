#!/bin/sh
# What a conformance cell runs in its container, in one call (a VM cell boots its kernel
# once per call, some seconds under emulation): install.sh as a user would,
# what `pynox doctor --json` says then, and the suite against the install. Each part's
# output and exit status go to out/PART.stdout, .stderr and .status beside this script,
# where the runner (cell_run.py) reads them; a part that did not run has no .status.
#
# From the environment:
#   CELL_ARCHIVE     the bundle install.sh installs
#   CELL_OLD_KERNEL  install.sh's refusal of a kernel below the sandbox's floor: if it
#                    refuses so, install again with --allow-old-kernel (a cell whose kernel
#                    cannot sandbox); empty: no second try
#   CELL_PYNOX       where install.sh puts the command
#   CELL_PYTHON      the bundle's interpreter, which runs the suite
#   CELL_SELECT      a pytest -k expression, or empty for the whole suite
# The suite's own environment is in suite.env beside this script (install.sh and doctor
# run without it).
here=$(cd "$(dirname "$0")" && pwd) || exit
out=$here/out
mkdir -p "$out" || exit

# part NAME COMMAND...: runs COMMAND, its output and exit status kept under NAME.
part() {
    name=$1
    shift
    "$@" > "$out/$name.stdout" 2> "$out/$name.stderr"
    status=$?
    echo "$status" > "$out/$name.status"
    return "$status"
}

install_bundle() {
    part install sh "$here/install.sh" --archive "$CELL_ARCHIVE" && return
    [ -n "$CELL_OLD_KERNEL" ] && grep -qF -- "$CELL_OLD_KERNEL" "$out/install.stderr" || return
    part install-old-kernel sh "$here/install.sh" --archive "$CELL_ARCHIVE" --allow-old-kernel
}

doctor() {
    part doctor "$CELL_PYNOX" doctor --json
}

suite() (
    set -a
    # shellcheck source=/dev/null  # written by the runner for each cell
    . "$here/suite.env" || exit
    set +a
    cd "$here/suite" || exit
    part suite "$CELL_PYTHON" -m pytest -p no:cacheprovider -q -rfEs --rootdir "$here/suite" \
        --junitxml="$out/junit.xml" -o junit_family=xunit1 \
        ${CELL_SELECT:+-k "$CELL_SELECT"} conformance
)

# This script's own exit status says only whether it ran; the parts' are in out/.
if install_bundle; then
    doctor
    suite
fi
exit 0
