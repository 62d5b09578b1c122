#!/usr/bin/env bash
# Builds ferry in release mode and prints the benchmark figures (see docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
SETUP_NO_BUILD=1 bash scripts/setup.sh   # Debian packages (jq, rsync…) if missing
# The Swift runtime linked in, as scripts/install.sh installs it (docs/performance.md: 4-5 MiB
# less resident than the shared libraries, and a binary that runs without /opt/swift).
swift build -c release --static-swift-stdlib 2>&1 | tail -n 1
sync
# Line-buffered: each figure is printed as soon as it is measured, also into a file.
exec stdbuf -oL .build/release/ferry-bench "$@"
