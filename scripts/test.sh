#!/usr/bin/env bash
# Sets everything up (Debian packages, the unprivileged test user, build, dbus + avahi-daemon),
# runs the simulation's 2,000 seeds and the fuzz targets, then every test, in parallel.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
bash scripts/setup.sh
# The fast tier: every suite that runs in this process (the store, the protocol and its channel,
# replication over in-memory channels and real sockets on 127.0.0.1, TLS, the simulation's own
# tests). About 10 s.
FAST_TIER='^(FerryCoreTests|FerryProtocolTests|FerryStoreTests|FerryWatchTests|FerryNetTests|FerryReplicatorTests|FerrySimulationTests)\.'
if [ "${1:-}" = "--fast" ]; then
    exec swift test --skip-build --filter "$FAST_TIER"
fi
# The DNS-SD tests need a real avahi-daemon (loopback only), reached over the D-Bus system bus.
bash scripts/start-mdns.sh
# The deterministic simulation: 2,000 seeds of 2 to 6 peers (release build, about a minute;
# a failing seed is printed with the command that replays it).
bash scripts/simulate.sh --seeds 2000
# What scripts/install.sh promises, on an install into a temporary prefix (the debug build).
bash scripts/check-install.sh
# libFuzzer on the JSON parser, the frame codec and the log-line decoder, 60 s each.
bash scripts/fuzz.sh 60
# Every test, in parallel (Swift Testing runs suites side by side; a suite marked serialized runs
# its own tests one at a time). The end-to-end tests, which run ferry, editors and shells as
# child processes and wait for them, run their bodies on threads of their own, at most
# FERRY_E2E_WIDTH (2) at once (`endToEnd` in FerryTesting), so they never hold the cooperative
# threads the in-process tests need. `bash scripts/test.sh --fast` runs only the fast tier.
exec swift test --skip-build
