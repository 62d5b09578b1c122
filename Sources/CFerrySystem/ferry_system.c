#define _GNU_SOURCE
#include <malloc.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>
#include "ferry_system.h"

/* Flushes every dirty page of the filesystem holding fd: one call makes a batch of
   object files durable, which is what lets `init` group its fsyncs. */
int ferry_syncfs(int fd) { return syncfs(fd); }

/* Starts writing back a range of a file's dirty pages without waiting: a large file's
   fsync then finds most of its data already on disk instead of writing it all at once. */
int ferry_start_writeback(int fd, long long offset, long long count) {
    return sync_file_range(fd, offset, count, SYNC_FILE_RANGE_WRITE);
}

/* Waits until a range of a file is written back, then drops its pages from the page cache:
   a large copy then recycles the same pages instead of filling memory with a second copy. */
int ferry_write_and_drop(int fd, long long offset, long long count) {
    int r = sync_file_range(fd, offset, count,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    if (r != 0) return r;
    return ferry_drop_cached(fd, offset, count);
}

/* Drops a range of a file from the page cache without waiting: pages not yet written back
   stay (a copy written on a thread that must not block on the disk). */
int ferry_drop_cached(int fd, long long offset, long long count) {
    return posix_fadvise(fd, offset, count, POSIX_FADV_DONTNEED);
}

/* rename that fails with EEXIST instead of replacing an existing file. */
int ferry_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

/* Swaps two names atomically (both must exist). */
int ferry_rename_exchange(const char *a, const char *b) {
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}

unsigned long long ferry_heap_in_use(void) {
    return (unsigned long long)mallinfo2().uordblks;
}

/* Fills buffer with count bytes from the kernel's random source in as few calls as it takes
   (one for a few KiB; a signal can cut a large request short). 0, or -1 with errno. */
int ferry_random_bytes(void *buffer, unsigned long count) {
    unsigned char *p = buffer;
    while (count > 0) {
        ssize_t n = getrandom(p, count, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        count -= (unsigned long)n;
    }
    return 0;
}

/* glibc keeps the pages of freed memory for later allocations; after a large document's
   trees are freed, this gives them back. */
void ferry_heap_trim(void) { malloc_trim(0); }
