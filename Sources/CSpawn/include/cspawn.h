// Starts a child the way a shell would, for the tests' process runner (FerryTesting.ChildProcess).
#ifndef CSPAWN_H
#define CSPAWN_H
#include <sys/types.h>

/// posix_spawn of `path` with `argv`/`envp`: standard input, output and error from the three
/// descriptors, every other descriptor closed, working directory `cwd` (NULL: unchanged), an
/// empty signal mask and default dispositions. Returns 0 and sets *pid, or an errno value.
int cspawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *cwd,
           int in, int out, int err);

#endif
