/* The kernel's own floor under exclusive mode's set-up and tear-down: what the system calls
 * that any per-thread sweep needs cost on this machine, per thread, with no schedkit code
 * around them (bench/exclusive-floor/syscalls.sh).
 *
 *   syscalls N REPEATS
 *
 * Starts N idle threads (each blocked in pause()), then REPEATS times over those N threads:
 *   list:     the thread list: getdents of /proc/self/task (per thread: the share of one walk)
 *   getaff:   sched_getaffinity(tid)
 *   stat:     open + read + close of /proc/self/task/TID/stat (a thread's start time)
 *   pread:    pread of a /proc/self/task/TID/stat descriptor kept open
 *   schedstat: pread of a /proc/self/task/TID/schedstat descriptor kept open (the sampler's
 *             one read per thread per sample)
 *   tgkill:   tgkill(pid, tid, 0): is TID still a thread of this process (an identity check
 *             without /proc)
 *   setaff:   sched_setaffinity(tid, CPU 0), then (timed apart) back to every CPU: the move
 *             and the undo
 * and prints the median per-thread cost of each, in nanoseconds. The threads sleep, as most
 * threads on a machine do (a running thread that must leave its CPU costs the kernel a
 * migration on top). Only this process's own threads are touched. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pid_t *tids;
static volatile int started;

static void *idle(void *arg) {
  tids[(long)arg] = (pid_t)syscall(SYS_gettid);
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  for (;;) pause();
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: syscalls N REPEATS\n");
    return 2;
  }
  int n = atoi(argv[1]), reps = atoi(argv[2]);
  if (n < 1 || reps < 1) return 2;
  tids = calloc(n, sizeof *tids);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 * 1024);
  for (long i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &a, idle, (void *)i)) {
      perror("pthread_create");
      return 1;
    }
  }
  while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < n) usleep(1000);
  usleep(100000);
  cpu_set_t all, zero;
  sched_getaffinity(0, sizeof all, &all);
  CPU_ZERO(&zero);
  CPU_SET(0, &zero);
  int *fds = calloc(n, sizeof *fds), *sfds = calloc(n, sizeof *sfds);
  char path[64], buf[1024];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tids[i]);
    fds[i] = open(path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tids[i]);
    sfds[i] = open(path, O_RDONLY);
    if (fds[i] < 0 || sfds[i] < 0) {
      perror("open (raise ulimit -n)");
      return 1;
    }
  }
  double *r_list = calloc(reps, sizeof(double)), *r_get = calloc(reps, sizeof(double)),
         *r_stat = calloc(reps, sizeof(double)), *r_pread = calloc(reps, sizeof(double)),
         *r_set = calloc(reps, sizeof(double)), *r_back = calloc(reps, sizeof(double)),
         *r_ss = calloc(reps, sizeof(double)), *r_kill = calloc(reps, sizeof(double));
  pid_t me = getpid();
  for (int r = 0; r < reps; r++) {
    double t0 = now_ns();
    int seen = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while ((e = readdir(d))) seen += e->d_name[0] != '.';
    closedir(d);
    double t1 = now_ns();
    cpu_set_t s;
    for (int i = 0; i < n; i++) sched_getaffinity(tids[i], sizeof s, &s);
    double t2 = now_ns();
    for (int i = 0; i < n; i++) {
      snprintf(path, sizeof path, "/proc/self/task/%d/stat", tids[i]);
      int fd = open(path, O_RDONLY);
      if (read(fd, buf, sizeof buf) <= 0) perror("read");
      close(fd);
    }
    double t3 = now_ns();
    for (int i = 0; i < n; i++)
      if (pread(fds[i], buf, sizeof buf, 0) <= 0) perror("pread");
    double t4 = now_ns();
    for (int i = 0; i < n; i++) sched_setaffinity(tids[i], sizeof zero, &zero);
    double t5 = now_ns();
    for (int i = 0; i < n; i++) sched_setaffinity(tids[i], sizeof all, &all);
    double t6 = now_ns();
    for (int i = 0; i < n; i++)
      if (pread(sfds[i], buf, sizeof buf, 0) <= 0) perror("pread schedstat");
    double t7 = now_ns();
    for (int i = 0; i < n; i++)
      if (syscall(SYS_tgkill, me, tids[i], 0)) perror("tgkill");
    double t8 = now_ns();
    r_ss[r] = (t7 - t6) / n;
    r_kill[r] = (t8 - t7) / n;
    r_list[r] = (t1 - t0) / (seen ? seen : 1);
    r_get[r] = (t2 - t1) / n;
    r_stat[r] = (t3 - t2) / n;
    r_pread[r] = (t4 - t3) / n;
    r_set[r] = (t5 - t4) / n;
    r_back[r] = (t6 - t5) / n;
  }
  printf("threads %d repeats %d, median ns per thread: list %.0f  getaff %.0f  stat(open+read+close) %.0f  "
         "pread(open fd) %.0f  setaff(move) %.0f  setaff(undo) %.0f  schedstat(pread) %.0f  "
         "tgkill(0) %.0f\n",
         n, reps, median(r_list, reps), median(r_get, reps), median(r_stat, reps),
         median(r_pread, reps), median(r_set, reps), median(r_back, reps), median(r_ss, reps),
         median(r_kill, reps));
  return 0;
}
