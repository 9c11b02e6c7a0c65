// How long the CPU is taken away from a busy thread: a loop that reads the clock for 4 s and
// prints every gap over 2 ms. Under SCHED_RR (chrt -r 10, as dev/bench/bench_cpu_step.py --rt runs
// its measurements) the kernel's real-time throttling (/proc/sys/kernel/sched_rt_runtime_us of
// sched_rt_period_us: 950000 of 1000000 by default) stops it for about 50 ms once a second; at
// normal priority on an idle machine it is never stopped. Why bench_cpu_step takes the median
// of a run's steps (docs/results/cpu_yardstick_median.md).
//
//   gcc -O2 dev/bench/rt_gaps.c -o build/bench/rt_gaps
//   chrt -r 10 build/bench/rt_gaps; build/bench/rt_gaps
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    const double t0 = now();
    double prev = t0, lost = 0.0;
    int gaps = 0;
    for (;;) {
        const double t = now();
        if (t - prev > 0.002) {
            printf("  gap %.1f ms at %.2f s\n", (t - prev) * 1e3, t - t0);
            lost += t - prev;
            gaps++;
        }
        prev = t;
        if (t - t0 > 4.0) break;
    }
    printf("%d gaps over 2 ms in 4 s, %.0f ms in all\n", gaps, lost * 1e3);
    return 0;
}
