#ifndef FERRY_SYSTEM_H
#define FERRY_SYSTEM_H
/// Linux calls that Swift's Glibc overlay does not export (they sit behind _GNU_SOURCE).
int ferry_syncfs(int fd);
int ferry_start_writeback(int fd, long long offset, long long count);
int ferry_write_and_drop(int fd, long long offset, long long count);
int ferry_drop_cached(int fd, long long offset, long long count);
int ferry_rename_noreplace(const char *from, const char *to);
int ferry_rename_exchange(const char *a, const char *b);
/// Fills buffer with count random bytes from the kernel (getrandom; 0, or -1 with errno).
int ferry_random_bytes(void *buffer, unsigned long count);
/// Bytes the heap has handed out and not had back (glibc's mallinfo2: the benchmark's count
/// of what an index holds).
unsigned long long ferry_heap_in_use(void);
/// Returns the heap's free memory to the system (glibc's malloc_trim).
void ferry_heap_trim(void);
#endif
