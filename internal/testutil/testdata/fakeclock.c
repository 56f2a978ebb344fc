/*
 * fakeclock: an LD_PRELOAD shim that freezes a process's wall clock at the
 * nanosecond a test chooses. Tests run redis-server (with the redis-cell
 * module) under it so that the module and an in-process celld on its fake
 * clock decide at the very same time (internal/testutil/rediscell.go).
 *
 * CELLD_FAKECLOCK_FILE names a file whose first 8 bytes are the time in ns
 * since the Unix epoch (int64, little-endian); the test rewrites them in
 * place and this shim maps the file and reads them on every call. Only the
 * wall clock is faked (clock_gettime REALTIME, gettimeofday, time):
 * monotonic clocks stay real, so event loops and timers keep working.
 *
 * Written without malloc or dlsym (the real clock is read by a raw
 * syscall): redis-server is linked with jemalloc, which reads the clock
 * while it initialises, and a shim that allocated there would recurse
 * (libfaketime does, and cannot be used with Debian's redis-server).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *clk;
static int state; /* 0 not tried, 1 mapped, 2 not available */

static volatile int64_t *fake(void) {
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (s == 1)
		return clk;
	if (s == 2)
		return 0;
	const char *p = getenv("CELLD_FAKECLOCK_FILE");
	void *m = MAP_FAILED;
	if (p) {
		int fd = (int)syscall(SYS_openat, AT_FDCWD, p, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			m = mmap(0, 8, PROT_READ, MAP_SHARED, fd, 0);
			syscall(SYS_close, fd);
		}
	}
	if (m == MAP_FAILED) {
		__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
		return 0;
	}
	clk = (volatile int64_t *)m;
	__atomic_store_n(&state, 1, __ATOMIC_RELEASE);
	return clk;
}

static int64_t now_ns(void) { return __atomic_load_n(fake(), __ATOMIC_ACQUIRE); }

int clock_gettime(clockid_t id, struct timespec *ts) {
	if ((id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) && fake()) {
		int64_t ns = now_ns();
		ts->tv_sec = ns / 1000000000;
		ts->tv_nsec = ns % 1000000000;
		return 0;
	}
	return (int)syscall(SYS_clock_gettime, id, ts);
}

int gettimeofday(struct timeval *tv, void *tz) {
	if (fake()) { /* tv is nonnull, as glibc declares it */
		int64_t ns = now_ns();
		tv->tv_sec = ns / 1000000000;
		tv->tv_usec = (ns % 1000000000) / 1000;
		return 0;
	}
	return (int)syscall(SYS_gettimeofday, tv, tz);
}

time_t time(time_t *t) {
	time_t v;
	if (fake())
		v = (time_t)(now_ns() / 1000000000);
	else
		v = (time_t)syscall(SYS_time, 0);
	if (t)
		*t = v;
	return v;
}
