#!/usr/bin/env bash
# Sets everything up (Debian packages, the unprivileged test user, build, dbus + avahi-daemon),
# runs the simulation's 2,000 seeds and the fuzz targets, then the tests in two tiers (below).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
bash scripts/setup.sh
FAST_TIER='^(FerryCoreTests|FerryProtocolTests|FerryStoreTests|FerryWatchTests|FerryNetTests|FerryReplicatorTests|FerrySimulationTests)\.'
if [ "${1:-}" = "--fast" ]; then
    exec swift test --skip-build --filter "$FAST_TIER"
fi
# The DNS-SD tests need a real avahi-daemon (loopback only), reached over the D-Bus system bus.
bash scripts/start-mdns.sh
# The deterministic simulation: 2,000 seeds of 2 to 6 peers (release build, about a minute;
# a failing seed is printed with the command that replays it).
bash scripts/simulate.sh --seeds 2000
# libFuzzer on the JSON parser, the frame codec and the log-line decoder, 60 s each.
bash scripts/fuzz.sh 60
# The fast tier, in parallel: every suite that runs in this process (the store, the protocol and
# its channel, replication over in-memory channels and real sockets on 127.0.0.1, TLS, the
# simulation's own tests). About 10 s. `bash scripts/test.sh --fast` runs only this tier.
swift test --skip-build --filter "$FAST_TIER"
# The end-to-end tier (every other suite), one test at a time: these tests run ferry, editors and shells as child
# processes and wait for them synchronously, each holding one of Swift's cooperative threads
# (two on a 2-core machine); run side by side they starve the in-process tests' heartbeats and
# sockets. Making those waits async is what remains before the whole suite runs in parallel.
exec swift test --skip-build --no-parallel --skip "$FAST_TIER"
