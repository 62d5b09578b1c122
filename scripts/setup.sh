#!/usr/bin/env bash
# Installs what ferry's build, tests and demo need on a Debian machine, then builds.
# Idempotent; run as root or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Swift is not a Debian package: it ships with the machine image under /opt/swift.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
command -v swift >/dev/null 2>&1 || { echo "setup: swift not found (expected /opt/swift/usr/bin/swift)" >&2; exit 1; }

# Tools the tests drive as a user would: jq and sha256sum to read the format, vim and sed to
# edit, openssl for certificates, flock to hold the lock from outside, python3 for rewrites,
# curl for plain HTTP requests to the listener. DNS-SD: Avahi's dns_sd library to build
# against, avahi-daemon and dbus to run it, avahi-utils (avahi-browse, avahi-publish-service)
# and iproute2 (network namespaces) for the tests. rsync: the benchmark's yardstick. strace: a
# test reads the order of the receiver's fsyncs from it. nano and emacs-nox: the editors the
# tests save with besides vim; inotify-tools: a test watches the peer's folder with inotifywait.
# python3-websockets: a strict third-party WebSocket client, for the hostile peer (Tests/Tools).
# zlib1g-dev: zlib to build against, for BLIP's raw-deflate compression and CRC32 (FerryProtocol).
# man-db: `man ferry` after scripts/install.sh (the install check reads the pages with it).
# syncthing: the scale benchmark's second yardstick (two instances on 127.0.0.1).
packages=(jq vim nano emacs-nox openssl util-linux coreutils procps python3 python3-websockets curl rsync strace inotify-tools
          libavahi-compat-libdnssd-dev avahi-daemon avahi-utils dbus iproute2 zlib1g-dev man-db syncthing)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  as_root apt-get install -y -q "${missing[@]}"
fi

# The end-to-end tests run ferry, editors and tools as an unprivileged user in a folder under
# its home, as ferry's users do (root's tests would hide permission errors, and vim saves
# differently under /tmp).
if [ "$(id -u)" = 0 ] && ! id ferrytest >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash ferrytest
fi

# SETUP_NO_BUILD=1: packages only (the benchmark builds in release mode itself).
if [ "${SETUP_NO_BUILD:-}" != 1 ]; then
  echo "setup: building ferry and its tests (debug; the first build takes several minutes on 2 cores)"
  swift build --build-tests 2>&1 | bash scripts/lib/build-progress.sh
fi
