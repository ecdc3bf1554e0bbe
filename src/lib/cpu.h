/* SPDX-License-Identifier: MIT */
/*
 * cpu.h - which CPU this thread runs on, for the per-CPU slots (page caches, hot folios, PTE
 * table readers, shmem quota reserves).
 *
 * The kernel keeps the answer in the thread's rseq area, which glibc (2.35 and later)
 * registers for every thread, so reading it is one load at a fixed offset from the thread
 * pointer. sched_getcpu() reads the same field through a call into libc, which the hot pin
 * and unpin paths are written to avoid. Where glibc registered no area (__rseq_size is 0: an
 * old kernel, a sandbox, valgrind, GLIBC_TUNABLES=glibc.pthread.rseq=0) the area is not read;
 * where it did, a negative cpu_id (the kernel has not filled it in yet) also falls back to
 * sched_getcpu().
 *
 * The answer may be stale by the time it is used (the thread migrates): every user treats
 * it as a hint for locality and stays correct on any slot (its updates are atomic).
 */
#ifndef PM_LIB_CPU_H
#define PM_LIB_CPU_H

#include <sched.h>
#include <stdint.h>
#include <sys/rseq.h>

#include "lib/compiler.h"

static inline int pm_cpu_now(void)
{
	if (likely(__rseq_size != 0)) {
		const volatile struct rseq *r =
			(const volatile struct rseq *)((char *)__builtin_thread_pointer() +
						       __rseq_offset);
		int cpu = (int)r->cpu_id;

		if (likely(cpu >= 0))
			return cpu;
	}
	return sched_getcpu();
}

/* pm_cpu_now() as an index below @nr: a CPU that @nr does not cover folds onto one that it
 * does (a modulo only then), an unknown one onto 0. */
static inline unsigned pm_cpu_index(unsigned nr)
{
	int cpu = pm_cpu_now();

	if (likely((unsigned)cpu < nr))
		return (unsigned)cpu;
	return cpu > 0 ? (unsigned)cpu % nr : 0;
}

#endif /* PM_LIB_CPU_H */
