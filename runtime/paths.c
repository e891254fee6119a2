/*
 * paths.c - see paths.h.
 */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"   /* file_write_atomic */
#include "text.h"

int file_copy(const char *from, const char *to, Error *err)
{
    Text t = {0};
    if (text_read_file(from, &t, err) != 0) return -1;
    int rc = file_write_atomic(to, &(FilePart){t.data, t.len}, 1, err);
    text_free(&t);
    return rc;
}

int make_dir(const char *dir, Error *err)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) return error_set(err, "bad folder name '%s'", dir);
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0') continue;
        char keep = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return error_set(err, "%s: cannot create the folder: %s", path, strerror(errno));
        path[i] = keep;
    }
    return 0;
}

/* The folder of path into dir: ".", "/" or the part before the last '/'. */
static int folder_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= size) return -1;
    if (!slash) strcpy(dir, ".");
    else if (n == 0) strcpy(dir, "/");
    else {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    return 0;
}

int check_output_path(const char *option, const char *path, Error *err)
{
    char dir[4096];
    struct stat st;
    if (!path[0] || folder_of(path, dir, sizeof dir) != 0)
        return error_set(err, "%s: bad file name '%s'", option, path);
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".lock") == 0)
        return error_set(err, "%s: %s: names ending in .lock are kept for the runs' lock "
                         "files; choose another name", option, path);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return error_set(err, "%s: %s: the folder %s does not exist", option, path, dir);
    /* Writable is best learned by writing: a probe file, removed at once
     * (access() says yes to root in a read-only folder such as /proc). */
    char probe[4096 + 32];
    snprintf(probe, sizeof probe, "%s/.write-probe.XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return error_set(err, "%s: %s: cannot write in the folder %s: %s", option, path, dir,
                         strerror(errno));
    close(fd);
    unlink(probe);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return error_set(err, "%s: %s exists and is not a regular file", option, path);
    return 0;
}

/* path with every link resolved: the last part, while it is a link, by
 * what the link names (which need not exist yet: a link to the checkpoint
 * a run is about to write), then the folder by realpath ("." , "..",
 * links). Gives path as given when its folder cannot be resolved. */
static void canonical(const char *path, char *out, size_t size)
{
    char cur[4096 + PATH_MAX], target[PATH_MAX], dir[4096 + PATH_MAX], real[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0; hops < 40; hops++) {          /* 40: Linux's own limit */
        ssize_t n = readlink(cur, target, sizeof target - 1);
        if (n < 0) break;
        target[n] = '\0';
        if (target[0] == '/' || folder_of(cur, dir, sizeof dir) != 0) {
            memcpy(cur, target, (size_t)n + 1);
        } else {                        /* relative to the link's own folder */
            size_t d = strlen(dir);
            if (d + 1 + (size_t)n + 1 > sizeof cur) break;
            memcpy(cur, dir, d);
            cur[d] = '/';
            memcpy(cur + d + 1, target, (size_t)n + 1);
        }
    }
    const char *slash = strrchr(cur, '/');
    if (folder_of(cur, dir, sizeof dir) != 0 || !realpath(dir, real) ||
        snprintf(out, size, "%s/%s", real, slash ? slash + 1 : cur) >= (int)size)
        snprintf(out, size, "%s", cur);
}

/* Whether a and b name one file: by its identity when both exist (hard
 * links, links), else by the resolved name. */
static int same_file(const char *a, const char *b)
{
    struct stat x, y;
    if (stat(a, &x) == 0 && stat(b, &y) == 0) return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
    char ca[4096 + PATH_MAX], cb[4096 + PATH_MAX];
    canonical(a, ca, sizeof ca);
    canonical(b, cb, sizeof cb);
    return strcmp(ca, cb) == 0;
}

int check_run_paths(const RunPath *outputs, int n_out, const RunPath *inputs, int n_in,
                    Error *err)
{
    for (int i = 0; i < n_out; i++) {
        const RunPath *o = &outputs[i];
        if (!o->path) continue;
        if (check_output_path(o->option, o->path, err) != 0) return -1;
        for (int k = 0; k < i; k++)
            if (outputs[k].path && same_file(outputs[k].path, o->path))
                return error_set(err, "%s and %s name the same file, %s: give each its own",
                                 outputs[k].option, o->option, o->path);
        for (int k = 0; k < n_in; k++) {
            const RunPath *in = &inputs[k];
            if (!in->path || !same_file(in->path, o->path)) continue;
            if (o->may_be && strcmp(o->may_be, in->option) == 0) continue;
            return error_set(err, "%s %s is the file %s reads; writing it would destroy the "
                             "input", o->option, o->path, in->option);
        }
    }
    return 0;
}

int path_lock(PathLock *lock, const char *option, const char *path, Error *err)
{
    /* By the resolved name: a link and the file it names share one lock. */
    char real[4096 + PATH_MAX];
    canonical(path, real, sizeof real);
    size_t n = strlen(real) + sizeof ".lock";
    lock->fd = -1;
    lock->path = malloc(n);
    if (!lock->path) return error_set(err, "out of memory");
    snprintf(lock->path, n, "%s.lock", real);
    /* A run may remove its lock file between our open and our flock; then
     * the lock is on a file no longer there, and we try again. */
    int failed = 0;
    for (int attempt = 0; attempt < 100 && !failed; attempt++) {
        int fd = open(lock->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0) {
            failed = error_set(err, "%s: cannot create the lock file %s: %s", option,
                               lock->path, strerror(errno));
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int busy = errno == EWOULDBLOCK;
            failed = error_set(err, busy ? "%s: %s is in use by another run (it holds %s); "
                                           "wait for it to end or give another path"
                                         : "%s: %s: cannot lock %s", option, path, lock->path);
            close(fd);
            break;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lock->path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            lock->fd = fd;
            return 0;
        }
        close(fd);
    }
    if (!failed) error_set(err, "%s: cannot lock %s", option, lock->path);
    free(lock->path);
    lock->path = NULL;
    return -1;
}

void path_unlock(PathLock *lock)
{
    if (lock->fd >= 0) {
        unlink(lock->path);
        close(lock->fd);
    }
    free(lock->path);
    lock->path = NULL;
    lock->fd = -1;
}

int run_paths_lock(RunLocks *locks, const RunPath *outputs, int n, Error *err)
{
    locks->n = 0;
    for (int i = 0; i < n; i++) {
        if (!outputs[i].path) continue;
        if (locks->n == RUN_LOCKS_MAX) {
            run_paths_unlock(locks);
            return error_set(err, "more than %d files to lock", RUN_LOCKS_MAX);
        }
        if (path_lock(&locks->lock[locks->n], outputs[i].option, outputs[i].path, err) != 0) {
            run_paths_unlock(locks);
            return -1;
        }
        locks->n++;
    }
    return 0;
}

void run_paths_unlock(RunLocks *locks)
{
    for (int i = locks->n - 1; i >= 0; i--) path_unlock(&locks->lock[i]);
    locks->n = 0;
}
