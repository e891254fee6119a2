/*
 * threads.h - how many threads the parallel loops use: never more than the
 * cores other programs leave free.
 *
 * Every `#pragma omp parallel` region ends in a barrier: the calling thread
 * waits until each thread of the team has finished its share. On an idle
 * machine that costs microseconds. When another program keeps one of the
 * cores busy, the thread that shares that core gets only part of it (the
 * kernel hands the core out in slices of a few milliseconds), so at every
 * barrier the whole team waits for the one thread that is not running; and
 * the waiting threads spin (OpenMP's default, which makes the next region
 * start fast) and take even more of the machine. A training step has
 * hundreds of regions, so a two-thread run beside one busy process ran at a
 * third of its single-thread speed (chapter 00's README has the numbers).
 *
 * The remedy here: the long loops (training steps, evaluation batches,
 * decoding steps) call threads_adapt() once per iteration. At most every
 * THREADS_CHECK_SECONDS it reads how much processor time the machine spent
 * on other programs since the last check (/proc/stat, minus this process's
 * own time from getrusage) and sets the team size of the following regions
 * (omp_set_num_threads) to the cores left free, rounded to the nearest, at
 * least 1 and at most what the program started with (OMP_NUM_THREADS, or one
 * per core; a later omp_set_num_threads by anyone else becomes the new
 * ceiling). Results do not depend on the number of threads (every value is
 * summed by one thread in a fixed order), so changing it mid-run changes
 * nothing but speed.
 *
 * Without /proc (not Linux) threads_adapt() leaves the team size alone.
 */
#ifndef THREADS_H
#define THREADS_H

#define THREADS_CHECK_SECONDS 0.2

/* Seconds on a monotonic clock (only differences mean anything): the clock
 * of threads_adapt, the progress line and the benches. */
double time_now(void);

/* Sets the team size from the machine's load (see above); cheap to call
 * often: between checks it reads only the clock. Returns the team size now
 * in force. */
int threads_adapt(void);

#endif
