#!/usr/bin/env bash
# The deterministic multi-peer simulation (docs/architecture.md), built in release mode:
#   bash scripts/simulate.sh                        2,000 seeds (what scripts/test.sh runs)
#   bash scripts/simulate.sh --seed N               replay one seed, printing its trace
#   bash scripts/simulate.sh --seeds 100000 --first 1   a long run
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
# Release builds here all link the Swift runtime in (as install.sh and bench.sh do): one set of
# flags, so that none of them rebuilds what another built.
swift build -c release --static-swift-stdlib --product ferry-sim 2>&1 | tail -n 1 >&2
exec .build/release/ferry-sim "$@"
