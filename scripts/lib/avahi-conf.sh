# Sourced by start-mdns.sh and netns-pair.sh: the avahi-daemon configuration ferry's tests use.
#   avahi_conf INTERFACE [HOST-NAME]   prints it: IPv4 only, on INTERFACE only, D-Bus on, no
#   wide-area, nothing published but the services themselves, and a rate limit loose enough
#   for tests that register and withdraw services quickly.
avahi_conf() {
    echo "[server]"
    if [ -n "${2:-}" ]; then echo "host-name=$2"; fi
    cat <<CONF
allow-interfaces=$1
use-ipv4=yes
use-ipv6=no
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000

[wide-area]
enable-wide-area=no

[publish]
publish-hinfo=no
publish-workstation=no
CONF
}
