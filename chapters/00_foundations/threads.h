/*
 * threads.h - how many threads the parallel loops use: never more than the
 * cores other programs leave free. Why a busy neighbour slows every OpenMP
 * barrier, and what this saves: the chapter's README.
 *
 * The long loops (training steps, evaluation batches, decoding steps) call
 * threads_adapt() once per iteration. At most every THREADS_CHECK_SECONDS
 * it sets the team size of the parallel regions that follow to the cores
 * other programs left free since the last check (/proc/stat, minus this
 * process's own time), at least 1 and at most what the program started with
 * (OMP_NUM_THREADS, or one per core; a later omp_set_num_threads by anyone
 * else becomes the new ceiling). Without /proc (not Linux: macOS) it leaves
 * the team size alone. Results do not depend on the number of threads, so this
 * changes nothing but speed.
 *
 * Read next: error.h.
 */
#ifndef THREADS_H
#define THREADS_H

/* OpenMP where the compiler has it; built without (make OPENMP=0, or a
 * compiler that lacks it), the parallel regions run on one thread, and these
 * stand in for the few OpenMP calls the code makes. */
#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_in_parallel(void) { return 0; }
static inline void omp_set_num_threads(int threads) { (void)threads; }
#endif

#define THREADS_CHECK_SECONDS 0.2

/* Seconds on a monotonic clock (only differences mean anything): the clock
 * of threads_adapt, the progress line and the benches. */
double time_now(void);

/* Sets the team size from the machine's load (see above); cheap to call
 * often: between checks it reads only the clock. Returns the team size now
 * in force. */
int threads_adapt(void);

#endif
