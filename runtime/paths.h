/*
 * paths.h - the files a program writes, checked before it does any work:
 * each can be written, none is another under a second name, none is a file
 * the run reads, and a checkpoint is held by one run at a time.
 *
 * A run that fails these checks has done nothing: no data read, no file
 * touched. (Writes themselves are atomic, see file_write_atomic in
 * safetensors.h: a file is replaced whole or not at all.)
 */
#ifndef PATHS_H
#define PATHS_H

#include "error.h"

/* mkdir -p dir. */
int make_dir(const char *dir, Error *err);

/* Copies the file from to the file to, written atomically (the training
 * logs shipped beside a model, into a plot folder). */
int file_copy(const char *from, const char *to, Error *err);

/* Checks that a file can be written at path: its folder exists and is
 * writable, path, if it exists, is a regular file (or a link to one), and
 * its name does not end in ".lock" (the lock files of path_lock). The
 * message names the option (e.g. "--checkpoint"). */
int check_output_path(const char *option, const char *path, Error *err);

/* One file of a run and the option that named it. An output may name the
 * same file as the input `may_be` (the option name; NULL: none): a resumed
 * run writes its checkpoint where it read it. */
typedef struct {
    const char *option;
    const char *path;       /* NULL: not given, skipped */
    const char *may_be;
} RunPath;

/* check_output_path on every output; then no two outputs, and no output
 * and input, may be one file (the same name, another spelling of it
 * through "." or links, a link in the last part of the name included, even
 * one to a file not yet there, or a hard link). Inputs are not opened. */
int check_run_paths(const RunPath *outputs, int n_out, const RunPath *inputs, int n_in,
                    Error *err);

/* A lock on path for the whole run: path.lock (path with its links
 * resolved), created if need be and held with flock, so a second run on the
 * same file is refused while the first lives (the kernel drops the lock
 * when a run dies, however it dies). */
typedef struct {
    int fd;                 /* -1: nothing held */
    char *path;             /* the lock file */
} PathLock;

int path_lock(PathLock *lock, const char *option, const char *path, Error *err);
/* Removes the lock file and lets go; safe on a lock that holds nothing. */
void path_unlock(PathLock *lock);

/* A lock on every output of a run (those with a path), so that no two runs
 * write one file, whichever option names it in each: all of them, or none
 * and an error naming the option whose file is in use. */
#define RUN_LOCKS_MAX 8
typedef struct {
    PathLock lock[RUN_LOCKS_MAX];
    int n;
} RunLocks;

int run_paths_lock(RunLocks *locks, const RunPath *outputs, int n, Error *err);
void run_paths_unlock(RunLocks *locks);

#endif
