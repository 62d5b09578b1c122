// zlib for BLIP's per-direction raw-deflate contexts and CRC32 (Debian: zlib1g-dev).
#include <zlib.h>
