/*
 * fork-split: where Linux's fair class places a burst of new threads beside a hog, as
 * schedkit's real engine creates them (from a SCHED_FIFO thread with SCHED_RESET_ON_FORK,
 * so the children are SCHED_OTHER), and with what initial PELT utilisation
 * (`post_init_entity_util_avg`). Written to explain the `short-lived` row of
 * `schedkit experiment fidelity` (docs/results/fidelity.md, "short-lived: the fork path").
 *
 *   cc -O1 -pthread bench/fidelity/fork-split.c -o /tmp/fork-split
 *   /tmp/fork-split SPAWNER_CPU HOG_CPU [BURSTS] [THREADS]
 *
 * The spawner and the hog start on the CPUs given and may then run anywhere (the hog may be
 * moved by the balancer; the spawner, real-time, stays where it wakes). Each burst creates
 * THREADS threads that each spin 40 ms of their own CPU time; 5 ms later it prints every
 * child's CPU and its se.avg.util_avg / load_avg (/proc/self/task/TID/sched), and, before the
 * burst, each CPU's root cfs_rq util_avg / load_avg from /sys/kernel/debug/sched/debug when
 * that is readable. Needs root for SCHED_FIFO (it runs without, as SCHED_OTHER, and says so).
 * It changes nothing outside its own threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXT 64

static volatile int stop;
static volatile int hog_tid;
static volatile int tids[MAXT];
static int hog_cpu;

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void set_cpus(int only) {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (only >= 0) {
        CPU_SET(only, &s);
    } else {
        for (int c = 0; c < CPU_SETSIZE; c++) CPU_SET(c, &s);
    }
    sched_setaffinity(0, sizeof s, &s);
}

static void *hog(void *arg) {
    (void)arg;
    hog_tid = syscall(SYS_gettid);
    set_cpus(hog_cpu);
    usleep(1000);
    set_cpus(-1);
    while (!stop) {
    }
    return 0;
}

static void *child(void *arg) {
    tids[(long)arg] = syscall(SYS_gettid);
    double start = thread_cpu_s();
    while (thread_cpu_s() - start < 0.040) {
    }
    return 0;
}

/* The value of `key` in /proc/self/task/TID/sched, or -1. */
static long sched_field(int tid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/sched", tid);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f) return v;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (colon && !strncmp(line, key, strlen(key)) && line[strlen(key)] == ' ')
            v = atol(colon + 1);
    }
    fclose(f);
    return v;
}

/* Field 39 of /proc/self/task/TID/stat: the CPU it last ran on (or was placed on). */
static int task_cpu(int tid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int cpu = -1;
    if (fgets(buf, sizeof buf, f)) {
        char *p = strrchr(buf, ')');
        int k = 2;
        for (char *t = p ? strtok(p + 2, " ") : 0; t; t = strtok(0, " "))
            if (++k == 39) {
                cpu = atoi(t);
                break;
            }
    }
    fclose(f);
    return cpu;
}

/* Each CPU's root cfs_rq util_avg and load_avg, from the scheduler's debugfs file. */
static void root_cfs(void) {
    FILE *f = fopen("/sys/kernel/debug/sched/debug", "r");
    if (!f) {
        printf("  (no /sys/kernel/debug/sched/debug)");
        return;
    }
    char line[256];
    int cpu = -1, root = 0;
    long load = -1;
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (sscanf(line, "cfs_rq[%d]:", &cpu) == 1)
            root = n >= 3 && !strcmp(line + n - 3, ":/\n");
        else if (!strncmp(line, "rt_rq", 5))
            root = 0;
        long v;
        /* load_avg comes before util_avg in each cfs_rq's block. */
        if (root && sscanf(line, " .load_avg : %ld", &v) == 1) load = v;
        if (root && sscanf(line, " .util_avg : %ld", &v) == 1)
            printf(" cpu%d load %4ld util %4ld;", cpu, load, v);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SPAWNER_CPU HOG_CPU [BURSTS] [THREADS]\n", argv[0]);
        return 2;
    }
    int spawner_cpu = atoi(argv[1]);
    hog_cpu = atoi(argv[2]);
    int bursts = argc > 3 ? atoi(argv[3]) : 10;
    int n = argc > 4 ? atoi(argv[4]) : 4;
    if (n < 1 || n > MAXT || bursts < 1) {
        fprintf(stderr, "BURSTS >= 1, 1 <= THREADS <= %d\n", MAXT);
        return 2;
    }
    FILE *ag = fopen("/proc/self/autogroup", "r");
    char agl[128] = "(none)\n";
    if (ag) {
        if (!fgets(agl, sizeof agl, ag)) strcpy(agl, "?\n");
        fclose(ag);
    }
    printf("autogroup: %s", agl);
    set_cpus(spawner_cpu);
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp))
        printf("spawner stays SCHED_OTHER (SCHED_FIFO refused: not root?)\n");
    pthread_t h;
    pthread_create(&h, 0, hog, 0);
    usleep(300000);
    set_cpus(-1);
    int together = 0;
    for (int b = 0; b < bursts; b++) {
        printf("before burst %d:", b);
        root_cfs();
        printf("\n");
        pthread_t c[MAXT];
        int at = sched_getcpu();
        for (long i = 0; i < n; i++) {
            tids[i] = 0;
            pthread_create(&c[i], 0, child, (void *)i);
        }
        usleep(5000);
        int hc = task_cpu(hog_tid), first = -1, same = 1;
        printf("burst %d: spawner cpu%d, hog cpu%d, children:", b, at, hc);
        for (int i = 0; i < n; i++) {
            int cpu = tids[i] ? task_cpu(tids[i]) : -1;
            if (first < 0) first = cpu;
            same &= cpu == first;
            printf(" cpu%d util %ld load %ld;", cpu, tids[i] ? sched_field(tids[i], "se.avg.util_avg") : -1,
                   tids[i] ? sched_field(tids[i], "se.avg.load_avg") : -1);
        }
        printf("\n");
        together += same;
        for (int i = 0; i < n; i++) pthread_join(c[i], 0);
        usleep(100000);
    }
    printf("bursts with every child on one CPU: %d of %d\n", together, bursts);
    stop = 1;
    pthread_join(h, 0);
    return 0;
}
