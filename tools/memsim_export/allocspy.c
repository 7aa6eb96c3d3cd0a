// LD_PRELOAD shim (used by optimizer_record.py, Note [Recorded optimizers] in docs/op-rules.md):
// logs the CPU tensor allocator's aligned allocations and their frees.
// PyTorch's CPU allocator calls posix_memalign(64); we record those pointers and their frees.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <fcntl.h>
#include <unistd.h>

static int (*real_pm)(void **, size_t, size_t);
static void (*real_free)(void *);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int out = -1;
static __thread int inside;
static void emit(const char *buf, int n) { if (out >= 0) { ssize_t w = write(out, buf, n); (void)w; } }
static int enabled;
static unsigned long long seq;
#define CAP (1u << 22)
static uintptr_t keys[CAP];
static size_t vals[CAP];

static size_t slot(uintptr_t p) { return (p >> 6) * 11400714819323198485ull >> 42 & (CAP - 1); }
static void put(uintptr_t p, size_t n) {
  size_t i = slot(p);
  while (keys[i] && keys[i] != p) i = (i + 1) & (CAP - 1);
  keys[i] = p; vals[i] = n;
}
static int take(uintptr_t p, size_t *n) {
  size_t i = slot(p);
  while (keys[i]) {
    if (keys[i] == p) {
      *n = vals[i];
      // backward-shift delete
      size_t j = i;
      for (;;) {
        j = (j + 1) & (CAP - 1);
        if (!keys[j]) break;
        size_t k = slot(keys[j]);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) { keys[i] = keys[j]; vals[i] = vals[j]; i = j; }
      }
      keys[i] = 0;
      return 1;
    }
    i = (i + 1) & (CAP - 1);
  }
  return 0;
}

void allocspy_open(const char *path) { pthread_mutex_lock(&mu); out = open(path, O_WRONLY|O_CREAT|O_TRUNC, 0644); seq = 0; enabled = 1; pthread_mutex_unlock(&mu); }
void allocspy_close(void) { pthread_mutex_lock(&mu); enabled = 0; if (out >= 0) close(out); out = -1; pthread_mutex_unlock(&mu); }
void allocspy_mark(const char *s) { char b[512]; pthread_mutex_lock(&mu); int n = snprintf(b, sizeof b, "M %llu %s\n", seq++, s); emit(b, n < (int)sizeof b ? n : (int)sizeof b - 1); pthread_mutex_unlock(&mu); }

// Only allocations made by libc10 (c10::alloc_cpu) are tensor storages; oneDNN and others also
// call posix_memalign(64) for their own objects, which we ignore.
static int from_c10(void *caller) {
  static uintptr_t lo, hi;
  if (lo) return (uintptr_t)caller >= lo && (uintptr_t)caller < hi;
  Dl_info info;
  if (!dladdr(caller, &info) || !info.dli_fname || !strstr(info.dli_fname, "libc10.so")) return 0;
  // remember the library's text range by probing: accept this object base and a generous span
  lo = (uintptr_t)info.dli_fbase; hi = lo + (64u << 20);
  return 1;
}

int posix_memalign(void **m, size_t a, size_t n) {
  if (!real_pm) real_pm = dlsym(RTLD_NEXT, "posix_memalign");
  int r = real_pm(m, a, n);
  if (r == 0 && a == 64 && !inside && from_c10(__builtin_return_address(0))) {
    inside = 1;
    char b[96];
    pthread_mutex_lock(&mu);
    put((uintptr_t)*m, n);
    if (enabled) emit(b, snprintf(b, sizeof b, "A %llu %zu %lx\n", seq++, n, (unsigned long)*m));
    pthread_mutex_unlock(&mu);
    inside = 0;
  }
  return r;
}
void free(void *p) {
  if (!real_free) real_free = dlsym(RTLD_NEXT, "free");
  if (p && !inside) {
    inside = 1;
    char b[96];
    pthread_mutex_lock(&mu);
    size_t n;
    if (take((uintptr_t)p, &n) && enabled) emit(b, snprintf(b, sizeof b, "F %llu %zu %lx\n", seq++, n, (unsigned long)p));
    pthread_mutex_unlock(&mu);
    inside = 0;
  }
  real_free(p);
}

// Whether p is a storage the spy saw allocated and not yet freed (trace_step.py --check-spy asks
// this of every tensor an ATen op returns, so a storage allocated by another path is caught).
int allocspy_known(const void *p) {
  pthread_mutex_lock(&mu);
  size_t i = slot((uintptr_t)p);
  int found = 0;
  while (keys[i]) {
    if (keys[i] == (uintptr_t)p) { found = 1; break; }
    i = (i + 1) & (CAP - 1);
  }
  pthread_mutex_unlock(&mu);
  return found;
}
