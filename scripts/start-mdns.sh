#!/usr/bin/env bash
# Starts the D-Bus system bus and avahi-daemon (restricted to loopback) without systemd,
# unless they already run: what ferry's DNS-SD tests need (see ../shared/notes/platform-facts.md).
# Idempotent; run as root or with sudo.
set -euo pipefail
. "$(dirname "$0")/lib/avahi-conf.sh"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -S /run/dbus/system_bus_socket ] || ! dbus-send --system --dest=org.freedesktop.DBus --type=method_call --print-reply \
        /org/freedesktop/DBus org.freedesktop.DBus.ListNames >/dev/null 2>&1; then
    as_root mkdir -p /run/dbus
    as_root rm -f /run/dbus/pid /run/dbus/system_bus_socket   # a stale pid file blocks the next start
    as_root dbus-daemon --system --fork
fi

if ! avahi-daemon --check 2>/dev/null; then
    conf=/run/ferry-avahi-daemon.conf
    avahi_conf lo | as_root tee "$conf" >/dev/null
    as_root mkdir -p /run/avahi-daemon
    as_root rm -f /run/avahi-daemon/pid
    as_root avahi-daemon --daemonize --no-drop-root --no-chroot -f "$conf"
fi

# Ready when a browse answers (bounded).
for _ in $(seq 50); do
    if avahi-browse -at >/dev/null 2>&1; then exit 0; fi
    sleep 0.1
done
echo "start-mdns: avahi-daemon did not answer over D-Bus" >&2
exit 1
