// SPDX-License-Identifier: MIT
/*
 * registry.c - the registry of typed objects: which object, of which type's name, lies at
 * each address, and when it came and went.
 *
 * The decisions:
 *  - The library names its objects where it makes them (lib/trace.h: the machine with its
 *    frames, descriptors, per-CPU caches and zones; mms, ranges, VMAs, page-table pages by
 *    level, shmem objects and tree nodes, VMA tree nodes, stat blocks) and says when each
 *    goes. Tests and harnesses name theirs with pm_trace_register(). A name is a type, which
 *    labels.c finds in its tables when it makes a label.
 *  - Labels are made after the run, never on the recording path, so an object that went
 *    during the operation must still label its accesses: an entry is not removed when its
 *    object goes, it is marked with the generation it went at, and a lookup for a log takes
 *    the objects still alive at some point after the log began (its gen). An entry made at
 *    the same address replaces the old one, which keeps the registry as small as the set of
 *    addresses the library ever used. Among the objects around an address the smallest wins:
 *    a page-table page lies inside the machine's frames, a per-CPU cache inside its array.
 *  - This file knows no type of src/: the library's hooks call down into it, and only
 *    labels.c, which nothing in src/ calls, reads src/'s structs.
 *  - A fork child gets the registry's lock free: it is held across fork() (reg_atfork_init).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/registry.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The registry's lock, taken by the library's hooks on the recording path too: the real
 * pthread calls, not the wrapped ones that would record the tracer's own lock (runtime.c).
 */
int __real_pthread_mutex_lock(pthread_mutex_t *mu);
int __real_pthread_mutex_unlock(pthread_mutex_t *mu);
#define reg_lock_take() __real_pthread_mutex_lock(&reg_lock)
#define reg_lock_drop() __real_pthread_mutex_unlock(&reg_lock)

void pm__trace_reg_lock(void)
{
	reg_lock_take();
}

void pm__trace_reg_unlock(void)
{
	reg_lock_drop();
}

/*
 * fork(): every object a library call makes is registered under reg_lock, so a thread of the
 * parent may hold it at the fork, and a child that makes a machine would wait for it for
 * ever (test_gup_longterm's process fork). The lock is taken around fork, as glibc takes
 * malloc's, and is free again on both sides. It must be taken last: liburcu's callback
 * workers unregister page tables under it, and lib/rcu.c's prepare handler waits for them to
 * pause. Prepare handlers run in the reverse order of registration, so this one registers
 * first, from a constructor of the earliest priority.
 */
static void reg_atfork_release(void)
{
	reg_lock_drop();
}

__attribute__((constructor(101))) static void reg_atfork_init(void)
{
	pthread_atfork(pm__trace_reg_lock, reg_atfork_release, reg_atfork_release);
}


static struct pm_trace_region *regions;
static size_t nr_regions, cap_regions;
static size_t *by_base;			/* open addressing: region index + 1, 0 = empty */
static size_t by_base_cap;		/* a power of two, at least twice nr_regions */
static uint64_t generation;

static size_t hash_base(uintptr_t base)
{
	return (size_t)((base >> 3) * 0x9e3779b97f4a7c15ULL);
}

static size_t *slot_of(uintptr_t base)
{
	size_t mask = by_base_cap - 1;

	for (size_t i = hash_base(base) & mask;; i = (i + 1) & mask)
		if (!by_base[i] || regions[by_base[i] - 1].base == base)
			return &by_base[i];
}

static bool registry_grow(void)
{
	size_t ncap = cap_regions ? cap_regions * 2 : 1024;
	size_t *nb = calloc(ncap * 2, sizeof(*nb));
	struct pm_trace_region *nr;

	if (!nb)
		return false;
	nr = realloc(regions, ncap * sizeof(*nr));
	if (!nr) {
		free(nb);
		return false;
	}
	regions = nr;
	cap_regions = ncap;
	free(by_base);
	by_base = nb;
	by_base_cap = ncap * 2;
	for (size_t i = 0; i < nr_regions; i++)
		*slot_of(regions[i].base) = i + 1;
	return true;
}

void pm_trace_register(const void *p, size_t n, const char *type)
{
	uintptr_t base = (uintptr_t)p;
	size_t *slot;
	struct pm_trace_region *r;

	if (!p || !n)
		return;
	if (!type)
		type = "?";
	reg_lock_take();
	if (nr_regions == cap_regions && !registry_grow())
		goto out;
	slot = slot_of(base);
	if (*slot) {
		r = &regions[*slot - 1];
	} else {
		r = &regions[nr_regions++];
		*slot = nr_regions;
	}
	r->base = base;
	r->end = base + n;
	r->type_name = type;
	r->born = ++generation;
	r->dead = 0;
out:
	reg_lock_drop();
}

void pm_trace_unregister(const void *p)
{
	size_t *slot;

	if (!p)
		return;
	reg_lock_take();
	if (by_base_cap) {
		slot = slot_of((uintptr_t)p);
		if (*slot && !regions[*slot - 1].dead)
			regions[*slot - 1].dead = ++generation;
	}
	reg_lock_drop();
}

uint64_t pm__trace_generation_locked(void)
{
	return generation;
}

uint64_t pm_trace_generation(void)
{
	uint64_t g;

	reg_lock_take();
	g = generation;
	reg_lock_drop();
	return g;
}

/* The library's hooks (src/lib/trace.h): it calls down into this file, which knows none of
 * its types. */
void pm__trace_object(const void *p, size_t n, const char *type);
void pm__trace_object_gone(const void *p);

void pm__trace_object(const void *p, size_t n, const char *type)
{
	pm_trace_register(p, n, type);
}

void pm__trace_object_gone(const void *p)
{
	pm_trace_unregister(p);
}

/* registry.h */
const struct pm_trace_region *pm__trace_region_find_locked(uintptr_t addr, uint64_t gen,
							    const char *type_name)
{
	const struct pm_trace_region *best = NULL;

	for (size_t i = 0; i < nr_regions; i++) {
		const struct pm_trace_region *r = &regions[i];

		if (addr < r->base || addr >= r->end || (r->dead && r->dead <= gen))
			continue;
		if (type_name && strcmp(r->type_name, type_name))
			continue;
		if (!best || r->end - r->base < best->end - best->base ||
		    (r->end - r->base == best->end - best->base && r->born > best->born))
			best = r;
	}
	return best;
}
