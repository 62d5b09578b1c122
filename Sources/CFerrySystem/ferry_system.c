#define _GNU_SOURCE
#include <unistd.h>
#include "ferry_system.h"

/* Flushes every dirty page of the filesystem holding fd: one call makes a batch of
   object files durable, which is what lets `init` group its fsyncs. */
int ferry_syncfs(int fd) { return syncfs(fd); }
