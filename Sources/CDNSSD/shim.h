// Avahi's Bonjour-compatible DNS-SD API (Debian: libavahi-compat-libdnssd-dev).
#include <dns_sd.h>
