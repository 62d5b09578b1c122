// A C file because posix_spawn_file_actions_addclosefrom_np and _addchdir_np are GNU
// extensions that Swift's Glibc module does not show.
#define _GNU_SOURCE
#include "cspawn.h"
#include <signal.h>
#include <spawn.h>

int cspawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *cwd,
           int in, int out, int err) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int result = posix_spawn_file_actions_init(&actions);
    if (result) return result;
    result = posix_spawnattr_init(&attributes);
    if (result) { posix_spawn_file_actions_destroy(&actions); return result; }

    // Standard descriptors first (dup2 of a descriptor onto itself keeps it open), then close
    // everything else: no pipe or socket of the test process leaks into the child or into
    // what the child leaves running.
    if (!result) result = posix_spawn_file_actions_adddup2(&actions, in, 0);
    if (!result) result = posix_spawn_file_actions_adddup2(&actions, out, 1);
    if (!result) result = posix_spawn_file_actions_adddup2(&actions, err, 2);
    if (!result) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (!result && cwd) result = posix_spawn_file_actions_addchdir_np(&actions, cwd);

    // The test process blocks and ignores signals for its own reasons; a child must not
    // inherit that (a daemon with SIGTERM blocked cannot be stopped politely).
    sigset_t none, reset;
    sigemptyset(&none);
    sigfillset(&reset);
    sigdelset(&reset, SIGKILL);
    sigdelset(&reset, SIGSTOP);
    if (!result) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (!result) result = posix_spawnattr_setsigdefault(&attributes, &reset);
    if (!result) result = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    if (!result) result = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}
