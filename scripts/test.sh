#!/usr/bin/env bash
# Sets everything up (Debian packages, build) and runs every test in one `swift test` process.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
bash scripts/setup.sh
exec swift test --skip-build
