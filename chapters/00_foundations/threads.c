/*
 * threads.c - see threads.h for why the team size follows the machine's load.
 *
 * The one piece of state outside main's hands is here: the previous
 * reading (when, the machine's busy time on our cores, this process's own
 * time) and the team size the program started with. It belongs to the
 * process as OpenMP's own team size does, and nothing else reads it.
 */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_ISSET */
#include "threads.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The cores this process may run on. Linux says which (sched_getaffinity)
 * and how busy each one is (/proc/stat); elsewhere (macOS) neither is
 * known, machine_busy answers -1, and the team size stays as it started. */
#ifdef __linux__
#include <sched.h>
typedef cpu_set_t CoreSet;
#else
typedef int CoreSet;
#endif

static struct {
    int started;         /* 1 after the first call */
    int max_threads;     /* the team size the program started with */
    int cores;           /* cores this process may run on */
    int threads;         /* the team size now */
    double wall;         /* seconds, at the last reading */
    double busy;         /* core-seconds the machine was busy on our cores, ditto */
    double self;         /* core-seconds this process ran, ditto */
    CoreSet mask;        /* the cores this process may run on */
} state;

double time_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#ifdef __linux__
/* Core-seconds spent busy (anything but idle and iowait, steal included:
 * a core the hypervisor gives to someone else is just as taken) on the
 * cores in `mask`, from /proc/stat's cpuN lines; -1 without /proc. */
static double machine_busy(const CoreSet *mask)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1.0;
    char line[512];
    double ticks = 0.0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long v[8] = {0};   /* user nice system idle iowait irq softirq steal */
        if (strncmp(line, "cpu", 3) != 0 || sscanf(line + 3, "%d", &cpu) != 1) continue;
        if (sscanf(line, "%*s %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
            continue;
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, mask)) continue;
        ticks += (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
        found = 1;
    }
    fclose(f);
    return found ? ticks / (double)sysconf(_SC_CLK_TCK) : -1.0;
}

/* Fills `mask` with the cores this process may run on; returns how many. */
static int our_cores(CoreSet *mask)
{
    if (sched_getaffinity(0, sizeof *mask, mask) != 0) {
        CPU_ZERO(mask);
        for (int c = 0; c < CPU_SETSIZE; c++) CPU_SET(c, mask);
    }
    return CPU_COUNT(mask);
}
#else
static double machine_busy(const CoreSet *mask) { (void)mask; return -1.0; }
static int our_cores(CoreSet *mask) { *mask = 0; return 0; }
#endif

/* Core-seconds this process has run, all its threads together. */
static double process_time(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

int threads_adapt(void)
{
    double now = time_now();
    if (!state.started) {
        state.started = 1;
        state.max_threads = state.threads = omp_get_max_threads();
        state.cores = our_cores(&state.mask);
        state.wall = now;
        state.busy = machine_busy(&state.mask);
        state.self = process_time();
        return state.threads;
    }
    /* A team size set by someone else (a test, the program) since our last
     * change is the new ceiling. */
    if (omp_get_max_threads() != state.threads)
        state.max_threads = state.threads = omp_get_max_threads();
    if (state.busy < 0.0 || state.max_threads < 2 || now - state.wall < THREADS_CHECK_SECONDS)
        return state.threads;

    double busy = machine_busy(&state.mask), self = process_time();
    if (busy < 0.0) return state.threads;
    /* Cores the other programs kept busy on average since the last reading. */
    double others = ((busy - state.busy) - (self - state.self)) / (now - state.wall);
    int free_cores = (int)((double)state.cores - others + 0.5);
    int threads = free_cores < 1 ? 1 : free_cores > state.max_threads ? state.max_threads
                                                                       : free_cores;
    if (threads != state.threads) omp_set_num_threads(threads);
    state.threads = threads;
    state.wall = now, state.busy = busy, state.self = self;
    return threads;
}
