/*
 * team.c — the threads host work runs on: every cpu kernel, and ref's large stages (where
 * OpenMP's idle threads went on spinning for milliseconds beside the cpu team that ran next,
 * bench/results/2026-12-07-ref-team.md). The caller is thread 0; the others wait for
 * the next job spinning (a job follows the last within microseconds while a program runs), and
 * after a while asleep on a futex, so that an idle program costs nothing. A job is handed over
 * with one counter and its end seen with another: about one round trip between cores (0.5 us
 * on this 2-vCPU VM), where an OpenMP parallel region cost 3 us and its barrier 1.4 us
 * (bench/results/2026-12-03-cpu-team.md).
 */
#include "runtime.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Spins of a waiting worker before it sleeps (a pause is 20 ns here: 50 us in all, longer than
 * the host's work between a program's kernels and between its runs; 0.4 ms measured no faster on
 * the shared models and keeps a core from other processes eight times as long), and of the caller
 * waiting for the others before it yields its core to them. */
enum { SPINS_BEFORE_SLEEP = 2500, SPINS_BEFORE_YIELD = 2000 };
/* A worker's stack: the kernels keep planes and packed panels there (up to about 2 MiB). */
#define WORKER_STACK ((size_t)8 << 20)

typedef struct Worker {
  HostTeam *team;
  int tid;
} Worker;

struct HostTeam {
  _Alignas(64) atomic_uint seq;   /* the job's number: a worker runs each new one once */
  _Alignas(64) atomic_int done;   /* workers finished with the current job */
  _Alignas(64) atomic_int sleepers;
  HostJob job;
  void *ctx;
  int nt;                         /* threads of the current job */
  bool stop;
  int size;                       /* threads, the caller included */
  int started;                    /* workers running */
  pthread_t *threads;
  Worker *workers;
};

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void sleep_while(atomic_uint *word, unsigned value) {
#if defined(__linux__)
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
  (void)word, (void)value;
  sched_yield();
#endif
}

static void wake_all(atomic_uint *word) {
#if defined(__linux__)
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
  (void)word;
#endif
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  HostTeam *t = w->team;
  unsigned seen = 0;
  for (;;) {
    unsigned s;
    for (int spins = 0; (s = atomic_load_explicit(&t->seq, memory_order_acquire)) == seen;) {
      if (++spins < SPINS_BEFORE_SLEEP) {
        relax();
        continue;
      }
      atomic_fetch_add_explicit(&t->sleepers, 1, memory_order_seq_cst);
      sleep_while(&t->seq, seen);  /* returns at once when seq moved on meanwhile */
      atomic_fetch_sub_explicit(&t->sleepers, 1, memory_order_relaxed);
      spins = 0;
    }
    seen = s;
    if (t->stop) return NULL;
    if (w->tid < t->nt) t->job(t->ctx, w->tid, t->nt);
    atomic_fetch_add_explicit(&t->done, 1, memory_order_release);
  }
}

/* Hands the workers job number seq + 1 (or the stop) and wakes the sleeping ones. */
static void post(HostTeam *t) {
  atomic_store_explicit(&t->done, 0, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->seq, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&t->sleepers, memory_order_seq_cst)) wake_all(&t->seq);
}

static void wait_workers(HostTeam *t) {
  for (int spins = 0; atomic_load_explicit(&t->done, memory_order_acquire) < t->started;)
    if (++spins < SPINS_BEFORE_YIELD) relax();
    else sched_yield(), spins = 0;  /* a worker may be waiting for this core */
}

void host_team_close(HostTeam *t) {
  if (!t) return;
  if (t->started) {
    t->stop = true;
    post(t);
    for (int i = 0; i < t->started; i++) pthread_join(t->threads[i], NULL);
  }
  kiln_free(t->threads);
  kiln_free(t->workers);
  kiln_free(t);
}

kiln_status host_team_open(int threads, HostTeam **out) {
  *out = NULL;
  if (threads < 1) threads = 1;
  HostTeam *t = kiln_calloc(1, sizeof *t);
  if (!t) return kiln_fail(KILN_ERR_NO_MEMORY, "no memory for a team of %d threads", threads);
  t->size = threads;
  if (threads > 1) {
    t->threads = kiln_calloc((size_t)threads - 1, sizeof *t->threads);
    t->workers = kiln_calloc((size_t)threads - 1, sizeof *t->workers);
    if (!t->threads || !t->workers) {
      host_team_close(t);
      return kiln_fail(KILN_ERR_NO_MEMORY, "no memory for a team of %d threads", threads);
    }
  }
  pthread_attr_t attr;
  bool attr_ok = threads > 1 && !pthread_attr_init(&attr);
  if (attr_ok) pthread_attr_setstacksize(&attr, WORKER_STACK);
  for (int i = 0; i < threads - 1; i++) {
    t->workers[i] = (Worker){ t, i + 1 };
    int rc = pthread_create(&t->threads[i], attr_ok ? &attr : NULL, worker_main, &t->workers[i]);
    if (rc) {
      if (attr_ok) pthread_attr_destroy(&attr);
      host_team_close(t);
      return kiln_fail(KILN_ERR_DEVICE, "could not start thread %d of a team of %d (error %d)", i + 1, threads, rc);
    }
    t->started++;
  }
  if (attr_ok) pthread_attr_destroy(&attr);
  *out = t;
  return KILN_OK;
}

int host_team_size(const HostTeam *t) { return t ? t->size : 1; }

void host_team_run(HostTeam *t, int nt, HostJob job, void *ctx) {
  if (nt < 1) nt = 1;
  if (nt > t->size) nt = t->size;
  if (t->started == 0 || nt == 1) {  /* no one to hand it to: the workers are not woken for nothing */
    job(ctx, 0, 1);
    return;
  }
  t->job = job, t->ctx = ctx, t->nt = nt;
  post(t);
  job(ctx, 0, nt);
  wait_workers(t);
}
