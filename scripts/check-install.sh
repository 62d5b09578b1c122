#!/usr/bin/env bash
# Checks what scripts/install.sh promises, on an install into a fresh prefix (the debug build,
# so no release build is needed): --version, `man ferry`, bash completion, `ferry init --sample`
# from any directory as the unprivileged user, and the systemd unit's ExecStart line running
# `serve` for a folder. Prints "install check: N passed, N failed"; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
prefix=$(mktemp -d /tmp/ferry-install-XXXXXX)
chmod 755 "$prefix"
trap 'rm -rf "$prefix"' EXIT
passed=0 failed=0
check() {  # check NAME COMMAND…: passes when the command succeeds
    local name=$1; shift
    if out=$("$@" 2>&1); then passed=$((passed + 1)); echo "  ok: $name"
    else failed=$((failed + 1)); echo "  FAILED: $name"; echo "$out" | tail -n 5 | sed 's/^/    /'; fi
}
as_user() {  # runs a shell command as the unprivileged test user when there is one
    if [ "$(id -u)" = 0 ] && id ferrytest >/dev/null 2>&1; then runuser -u ferrytest -- bash -c "$1"; else bash -c "$1"; fi
}

if ! FERRY_BUILD_CONFIGURATION=debug INSTALL_NO_SETUP=1 bash scripts/install.sh "$prefix" > "$prefix.log" 2>&1; then
    tail -n 20 "$prefix.log"; echo "install check: 0 passed, 1 failed"; exit 1
fi
ferry=$prefix/bin/ferry
version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/ferry/Version.swift)
check "ferry --version prints $version" bash -c "[ \"\$('$ferry' --version)\" = '$version' ]"
check "man ferry shows the manual" bash -c "MANPATH='$prefix/share/man' man -P cat ferry 2>/dev/null | grep -q 'Keep a folder in sync'"
check "man ferry.sync documents --protocol" bash -c "MANPATH='$prefix/share/man' man -P cat ferry.sync 2>/dev/null | grep -q -- '--protocol'"
check "bash completes ferry's commands" bash -c "shopt -s extglob; source '$prefix/share/bash-completion/completions/ferry'; COMP_LINE='ferry sy'; COMP_POINT=\${#COMP_LINE}; COMP_WORDS=(ferry sy); COMP_CWORD=1; _ferry; printf '%s\n' \"\${COMPREPLY[@]}\" | grep -qx sync"
home=$(as_user 'echo $HOME')
folder=$home/ferry-install-check-$$
check "ferry init --sample from any directory" as_user "cd / && '$ferry' init --sample '$folder' >/dev/null && jq -e '.list | length > 50' '$folder/samplelist.json' >/dev/null"
unit=$prefix/lib/systemd/user/ferry@.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
command=${exec_start//%f/$folder}
command=${command//\$FERRY_SERVE_ARGS/--interface 127.0.0.1 --port 0 --tls off --no-advertise}
check "the unit's ExecStart names the installed binary" bash -c "[[ '$exec_start' == '$prefix/bin/ferry -C %f serve '* ]]"
check "the unit's ExecStart runs serve for the folder" as_user "timeout -s TERM 4 $command > '$folder.serve.log' 2>&1; grep -q 'listening on ws://127.0.0.1' '$folder.serve.log' && grep -q watching '$folder.serve.log'"
as_user "rm -rf '$folder' '$folder.serve.log'"
echo "install check: $passed passed, $failed failed"
[ "$failed" = 0 ]
