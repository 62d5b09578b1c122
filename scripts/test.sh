#!/usr/bin/env bash
# Sets everything up (Debian packages, the unprivileged test user, build, dbus + avahi-daemon),
# runs the simulation's 2,000 seeds and the fuzz targets, then every test in one `swift test` process.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
bash scripts/setup.sh
# The DNS-SD tests need a real avahi-daemon (loopback only), reached over the D-Bus system bus.
bash scripts/start-mdns.sh
# The deterministic simulation: 2,000 seeds of 2 to 6 peers (release build, about a minute;
# a failing seed is printed with the command that replays it).
bash scripts/simulate.sh --seeds 2000
# libFuzzer on the JSON parser, the frame codec and the log-line decoder, 60 s each.
bash scripts/fuzz.sh 60
# --no-parallel: many end-to-end tests block while a child process works; run in parallel on a
# 2-core machine they starve Swift's cooperative pool and time out (heartbeats, hostile peers).
# One process, one test at a time: ~6 min here, and no flakes.
exec swift test --skip-build --no-parallel
