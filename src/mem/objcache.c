// SPDX-License-Identifier: MIT
/*
 * objcache.c - caches of free fixed-size objects: the part of Linux's slab that pinmm needs,
 * for the shmem page cache's tree nodes (m->shmem_nodes).
 *
 * Objects come from malloc and are kept when freed. Each CPU has a cache of them, and the
 * machine a depot behind the caches, as slab has per-CPU slabs and per-node partial lists:
 *
 *  - put: onto the freeing CPU's cache; above OBJ_CACHE_HIGH a batch of OBJ_CACHE_BATCH goes
 *    on to the depot, and what the depot cannot take (above OBJ_DEPOT_MAX) back to malloc;
 *  - get: from this CPU's cache, refilled with a batch from the depot when it is empty; NULL
 *    when both are empty, and the caller calls malloc.
 *
 * So a CPU that frees what another CPU allocated (a shmem object torn down by one thread
 * after two faulted it) hands the objects on through the depot a batch at a time, and
 * neither goes to malloc in steady state. A free object is linked through its first word;
 * the caller sets every field again when it takes one.
 *
 * Locks: a CPU's cache lock, then the depot's, never the other way round; callers may hold
 * other spinlocks (shmem's tree_lock) but no object cache lock. A thread that migrates
 * between taking its CPU number and the lock uses the other CPU's cache, which is only
 * slower: every cache is locked.
 */
#include "mem/mem.h"

static struct pm_obj_cache *depot_of(struct pm_machine *m, struct pm_obj_cache *c)
{
	return &c[m->nr_cpus];
}

static void *obj_next(void *obj)
{
	return *(void **)obj;
}

static void obj_set_next(void *obj, void *next)
{
	*(void **)obj = next;
}

/* Take the first object of @c, or NULL. Context: @c's lock. */
static void *pop(struct pm_obj_cache *c)
{
	void *obj = c->head;

	pm_assert_locked(&c->lock);
	if (obj) {
		c->head = obj_next(obj);
		atomic_store_relaxed(&c->xcount, atomic_load_relaxed(&c->xcount) - 1);
	}
	return obj;
}

/* Context: @c's lock. */
static void push(struct pm_obj_cache *c, void *obj)
{
	pm_assert_locked(&c->lock);
	obj_set_next(obj, c->head);
	c->head = obj;
	atomic_store_relaxed(&c->xcount, atomic_load_relaxed(&c->xcount) + 1);
}

void *pm__obj_cache_get(struct pm_machine *m, struct pm_obj_cache *c)
{
	struct pm_obj_cache *cpu = &c[pm__this_cpu(m)], *depot = depot_of(m, c);
	void *obj;

	pm_spin_lock(&cpu->lock);
	/* An empty depot is seen without its lock: a miss writes no shared line. */
	if (!cpu->head && atomic_load_relaxed(&depot->xcount)) {
		pm_spin_lock(&depot->lock);
		for (unsigned i = 0; i < OBJ_CACHE_BATCH && (obj = pop(depot)); i++)
			push(cpu, obj);
		pm_spin_unlock(&depot->lock);
	}
	obj = pop(cpu);
	pm_spin_unlock(&cpu->lock);
	return obj;
}

void pm__obj_cache_put(struct pm_machine *m, struct pm_obj_cache *c, void *obj)
{
	struct pm_obj_cache *cpu = &c[pm__this_cpu(m)], *depot = depot_of(m, c);
	void *batch = NULL;

	pm_spin_lock(&cpu->lock);
	push(cpu, obj);
	if (atomic_load_relaxed(&cpu->xcount) > OBJ_CACHE_HIGH) {
		for (unsigned i = 0; i < OBJ_CACHE_BATCH; i++) {
			obj = pop(cpu);
			obj_set_next(obj, batch);
			batch = obj;
		}
	}
	pm_spin_unlock(&cpu->lock);
	if (!batch)
		return;
	pm_spin_lock(&depot->lock);
	while (batch && atomic_load_relaxed(&depot->xcount) < OBJ_DEPOT_MAX) {
		obj = batch;
		batch = obj_next(obj);
		push(depot, obj);
	}
	pm_spin_unlock(&depot->lock);
	while (batch) {
		obj = batch;
		batch = obj_next(obj);
		pm__trace_object_gone(obj);
		free(obj);
	}
}

/* The caches of one kind of object: nr_cpus of them and the depot. NULL without memory. */
struct pm_obj_cache *pm__obj_cache_create(struct pm_machine *m)
{
	struct pm_obj_cache *c;

	if (posix_memalign((void **)&c, PM_CACHELINE, (m->nr_cpus + 1) * sizeof(*c)))
		return NULL;
	for (unsigned i = 0; i <= m->nr_cpus; i++) {
		pm_spin_init(&c[i].lock);
		atomic_store_relaxed(&c[i].xcount, 0);
		c[i].head = NULL;
	}
	return c;
}

/* Is a lock of the caches @c held, by any thread? For a fork child, which cannot take one that
 * a thread it lacks held at the fork (mem.c). */
bool pm__obj_cache_locked(struct pm_machine *m, struct pm_obj_cache *c)
{
	bool held = false;

	for (unsigned i = 0; i <= m->nr_cpus; i++)
		held |= pm_spin_is_locked(&c[i].lock);
	return held;
}

/* Free every cached object and the caches. Context: nobody gets or puts any more. */
void pm__obj_cache_destroy(struct pm_machine *m, struct pm_obj_cache *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i <= m->nr_cpus; i++) {
		void *obj = c[i].head;

		while (obj) {
			void *next = obj_next(obj);

			pm__trace_object_gone(obj);
			free(obj);
			obj = next;
		}
	}
	free(c);
}
