// A job of N threads for the run-cost benchmarks: `threads N MODE SECONDS`.
// MODE sleep: every thread blocks (a 1 s nanosleep loop: one wake-up per thread per second);
// busy: every thread spins; mix: odd threads spin, even ones sleep. Exits after SECONDS.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
// Every thread waits here until all are created: spinners that started at once would starve
// the creating thread (on a loaded 2-CPU machine a 1,000-thread job had about 400 threads
// after 6 s), so a "1,000-thread" run would sample far fewer.
static pthread_barrier_t all_created;

static void *sleeper(void *arg) {
  (void)arg;
  pthread_barrier_wait(&all_created);
  struct timespec ts = {1, 0};
  while (!stop) nanosleep(&ts, NULL);
  return NULL;
}

static void *spinner(void *arg) {
  (void)arg;
  pthread_barrier_wait(&all_created);
  unsigned long x = 1;
  while (!stop) x = x * 6364136223846793005UL + 1;
  return (void *)x;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: threads N sleep|busy|mix SECONDS\n");
    return 2;
  }
  int n = atoi(argv[1]);
  const char *mode = argv[2];
  double secs = atof(argv[3]);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 * 1024);
  pthread_barrier_init(&all_created, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++) {
    int busy = !strcmp(mode, "busy") || (!strcmp(mode, "mix") && (i & 1));
    pthread_t t;
    if (pthread_create(&t, &a, busy ? spinner : sleeper, NULL)) {
      perror("pthread_create");
      return 1;
    }
  }
  pthread_barrier_wait(&all_created);
  struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
  stop = 1;
  _exit(0);
}
