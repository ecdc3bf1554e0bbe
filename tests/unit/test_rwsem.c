// SPDX-License-Identifier: MIT
/*
 * test_rwsem.c - mmap_lock's reader-writer semaphore (src/lib/rwsem.{h,c}): mutual exclusion
 * between writers, and between writers and readers, while readers share; no lost wake-up (the
 * run ends); a stream of readers cannot starve a writer.
 */
#include <pthread.h>

#include "gup/gup.h"
#include "lib/tap.h"

static struct pm_rwsem sem;
static _Atomic int readers_in, writers_in;
static _Atomic long violations, reads, writes, max_readers;
static long shared_value;	/* written only under the write lock */
static _Atomic int stop;

static void *reader(void *arg)
{
	uint64_t rng = (uintptr_t)arg;

	while (!atomic_load_relaxed(&stop)) {
		long seen, n;

		pm_down_read(&sem);
		n = atomic_add_mb(&readers_in, 1) + 1;
		if (atomic_load_mb(&writers_in))
			atomic_add_relaxed(&violations, 1);
		seen = shared_value;
		if (tap_rand(&rng) % 8 == 0)
			sched_yield();
		if (shared_value != seen) /* a writer got in while we read */
			atomic_add_relaxed(&violations, 1);
		if (n > atomic_load_relaxed(&max_readers))
			atomic_store_relaxed(&max_readers, n);
		atomic_sub_mb(&readers_in, 1);
		pm_up_read(&sem);
		atomic_add_relaxed(&reads, 1);
	}
	return NULL;
}

static void *writer(void *arg)
{
	uint64_t rng = (uintptr_t)arg;

	while (!atomic_load_relaxed(&stop)) {
		pm_down_write(&sem);
		if (atomic_add_mb(&writers_in, 1) != 0 || atomic_load_mb(&readers_in))
			atomic_add_relaxed(&violations, 1);
		shared_value++;
		if (tap_rand(&rng) % 4 == 0)
			sched_yield();
		atomic_sub_mb(&writers_in, 1);
		pm_up_write(&sem);
		atomic_add_relaxed(&writes, 1);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[8];
	int nr = 6, nw = 2;

	plan(5);
	pm_rwsem_init(&sem);
	for (int i = 0; i < nr; i++)
		pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < nw; i++)
		pthread_create(&t[nr + i], NULL, writer, (void *)(uintptr_t)(100 + i));
	usleep((useconds_t)(tap_scale(10) * 100000)); /* 1 s, 0.1 s under TSan */
	atomic_store_relaxed(&stop, 1);
	for (int i = 0; i < nr + nw; i++)
		pthread_join(t[i], NULL);
	diag("%ld reads, %ld writes, up to %ld readers at once", atomic_load(&reads),
	     atomic_load(&writes), atomic_load(&max_readers));
	is_int(atomic_load(&violations), 0, "no reader alongside a writer, no two writers");
	is_int(shared_value, atomic_load(&writes), "every write counted once");
	ok(atomic_load(&writes) > 0, "writers were not starved by six readers");
	ok(atomic_load(&reads) > 0, "readers got in");
	is_int(atomic_load(&sem.xcount), 0, "the semaphore is free at the end");
	return done_testing();
}
