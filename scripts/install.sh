#!/usr/bin/env bash
# Installs ferry under PREFIX (default /usr/local): the binary, the samples where it finds
# them (PREFIX/share/ferry/samples), a man page per command (swift-argument-parser's manual
# generator), bash/zsh/fish completions, and the systemd user unit ferry@.service. Builds in
# release mode first (a few minutes on 2 cores). Run as root for a system prefix, or give a
# prefix you own: bash scripts/install.sh ~/.local
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
prefix=${1:-/usr/local}
say() { printf 'install: %s\n' "$*"; }

# FERRY_BUILD_CONFIGURATION=debug installs the debug build (the test suite checks the install
# that way, without a release build).
configuration=${FERRY_BUILD_CONFIGURATION:-release}
if [ "${INSTALL_NO_SETUP:-}" != 1 ]; then SETUP_NO_BUILD=1 bash scripts/setup.sh; fi
# A release build links the Swift runtime in: the installed binary needs nothing from
# /opt/swift, starts faster and is 4-5 MiB smaller in memory (docs/performance.md). The manual
# plugin builds with the same flag (`-Xswiftc -static-stdlib`), or it would rebuild everything.
static=(); plugin_static=()
if [ "$configuration" = release ]; then static=(--static-swift-stdlib); plugin_static=(-Xswiftc -static-stdlib); fi
say "building ferry ($configuration)"
swift build -c "$configuration" "${static[@]}" --product ferry 2>&1 | bash scripts/lib/build-progress.sh
binary=$(swift build -c "$configuration" "${static[@]}" --product ferry --show-bin-path)/ferry

say "generating the manual"
outputs=.build/plugins/GenerateManual/outputs
rm -rf "$outputs"
swift package "${plugin_static[@]}" plugin generate-manual --multi-page --configuration "$configuration" \
    --authors "the ferry engineers" 2>&1 | grep -E "error" >&2 || true
manuals=$(find "$outputs" -name '*.1' 2>/dev/null)
[ -n "$manuals" ] || { echo "install: the manual generator produced nothing" >&2; exit 1; }

say "installing under $prefix"
install -d "$prefix/bin" "$prefix/share/ferry" "$prefix/share/man/man1" \
    "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
    "$prefix/share/fish/vendor_completions.d" "$prefix/lib/systemd/user"
install -m 0755 "$binary" "$prefix/bin/ferry"
rm -rf "$prefix/share/ferry/samples"
cp -R samples "$prefix/share/ferry/samples"
chmod -R a+rX "$prefix/share/ferry/samples"
for m in $manuals; do install -m 0644 "$m" "$prefix/share/man/man1/"; done
"$prefix/bin/ferry" --generate-completion-script bash > "$prefix/share/bash-completion/completions/ferry"
"$prefix/bin/ferry" --generate-completion-script zsh > "$prefix/share/zsh/site-functions/_ferry"
"$prefix/bin/ferry" --generate-completion-script fish > "$prefix/share/fish/vendor_completions.d/ferry.fish"
sed "s|@BINDIR@|$prefix/bin|g" scripts/lib/ferry@.service > "$prefix/lib/systemd/user/ferry@.service"
chmod 0644 "$prefix/lib/systemd/user/ferry@.service"
mandb -q >/dev/null 2>&1 || true
say "done: $("$prefix/bin/ferry" --version)"
say "try: ferry init --sample ~/inventory && ferry -C ~/inventory status; man ferry"
say "run at boot: systemctl --user enable --now ferry@\$(systemd-escape --path ~/inventory)"
