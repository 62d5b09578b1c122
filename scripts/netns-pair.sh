#!/usr/bin/env bash
# Two hosts on one machine, for testing discovery across a real network link: two network
# namespaces joined by a veth pair (10.99.0.1/24 and 10.99.0.2/24, addresses that exist only
# inside the namespaces made here), each with its own D-Bus system bus and its own
# avahi-daemon (host names ferry-a and ferry-b), so that mDNS crosses the veth as it would
# cross a LAN. Needs root (ip netns, mount).
#
#   netns-pair.sh up DIR     make them; DIR keeps the configs, sockets and pids
#   netns-pair.sh down DIR   stop the daemons and remove the namespaces (idempotent)
#   netns-pair.sh env DIR a|b   prints: NAMESPACE ADDRESS DBUS_SYSTEM_BUS_ADDRESS
#   netns-pair.sh avahi-start DIR a|b   starts that host's avahi-daemon again (after a test
#                               stopped it) and waits until it answers
#
# Run a program on host a: ip netns exec "$ns" env DBUS_SYSTEM_BUS_ADDRESS="$bus" PROGRAM…
set -euo pipefail

. "$(dirname "$0")/lib/avahi-conf.sh"
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: netns-pair.sh up|down DIR | env|avahi-start DIR a|b" >&2; exit 2; }

# Names unique to DIR, so that parallel or leftover pairs never collide.
tag=$(printf '%s' "$(realpath -m "$dir")" | sha256sum | cut -c1-6)
ns_of() { echo "ferry-$1-$tag"; }
addr_of() { case $1 in a) echo 10.99.0.1 ;; b) echo 10.99.0.2 ;; esac; }

down() {
    for h in a b; do
        for f in "$dir/$h/avahi.pid" "$dir/$h/dbus.pid"; do
            if [ -s "$f" ]; then kill "$(cat "$f")" 2>/dev/null || true; fi
            rm -f "$f"
        done
        ip netns del "$(ns_of $h)" 2>/dev/null || true
    done
}

up() {
    mkdir -p "$dir"
    down
    ip netns add "$(ns_of a)"
    ip netns add "$(ns_of b)"
    ip link add "veth-a-$tag" netns "$(ns_of a)" type veth peer name "veth-b-$tag" netns "$(ns_of b)"
    for h in a b; do
        local ns; ns=$(ns_of $h)
        mkdir -p "$dir/$h"
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$(addr_of $h)/24" dev "veth-$h-$tag"
        ip -n "$ns" link set "veth-$h-$tag" up multicast on

        # A private system bus: anyone on it may own any name (it serves this test only).
        cat >"$dir/$h/dbus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <auth>EXTERNAL</auth>
  <listen>unix:path=$dir/$h/dbus.sock</listen>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
</busconfig>
EOF
        rm -f "$dir/$h/dbus.sock"
        dbus-daemon --config-file="$dir/$h/dbus.conf" --nofork --nopidfile >"$dir/$h/dbus.out" 2>&1 &
        echo $! >"$dir/$h/dbus.pid"

        avahi_conf "veth-$h-$tag" "ferry-$h" >"$dir/$h/avahi.conf"
    done
    for h in a b; do
        for _ in $(seq 50); do [ -S "$dir/$h/dbus.sock" ] && break; sleep 0.1; done
        [ -S "$dir/$h/dbus.sock" ] || { echo "netns-pair: dbus-daemon for $h did not start: $(cat "$dir/$h/dbus.out")" >&2; exit 1; }
        start_avahi $h
    done
    for h in a b; do await_avahi $h; done
}

# Starts host $1's avahi-daemon. It keeps its pid file and socket in /run/avahi-daemon: a
# private tmpfs in a mount namespace of its own, so the two daemons (and the machine's) never
# meet.
start_avahi() {
    local h=$1
    mkdir -p /run/avahi-daemon
    ip netns exec "$(ns_of $h)" unshare -m sh -c '
        mount --make-rprivate / && mount -t tmpfs tmpfs /run/avahi-daemon &&
        exec env DBUS_SYSTEM_BUS_ADDRESS="unix:path='"$dir/$h/dbus.sock"'" \
            avahi-daemon --no-drop-root --no-chroot --no-rlimits -f "'"$dir/$h/avahi.conf"'"' \
        >>"$dir/$h/avahi.out" 2>&1 &
    echo $! >"$dir/$h/avahi.pid"
}

# Waits (bounded) until host $1's daemon answers a browse on its own bus.
await_avahi() {
    local h=$1 ok=""
    for _ in $(seq 100); do
        if ip netns exec "$(ns_of $h)" env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dir/$h/dbus.sock" \
                avahi-browse -at >/dev/null 2>&1; then ok=1; break; fi
        sleep 0.1
    done
    [ -n "$ok" ] || { echo "netns-pair: avahi-daemon for $h did not answer: $(tail -3 "$dir/$h/avahi.out")" >&2; exit 1; }
}

case $cmd in
    up) up ;;
    down) down ;;
    env) h=${3:?a or b}; echo "$(ns_of "$h") $(addr_of "$h") unix:path=$dir/$h/dbus.sock" ;;
    avahi-start) h=${3:?a or b}; start_avahi "$h"; await_avahi "$h" ;;
    *) echo "netns-pair: unknown command $cmd" >&2; exit 2 ;;
esac
