#ifndef FERRY_SYSTEM_H
#define FERRY_SYSTEM_H
/// Linux calls that Swift's Glibc overlay does not export (they sit behind _GNU_SOURCE).
int ferry_syncfs(int fd);
#endif
