// SPDX-License-Identifier: MIT
/*
 * topology.c - the CPUs a run may use: how many (bench_nproc()), and with hwloc the cores (or
 * hardware threads, -m) tasks are bound to, one after the other, as will-it-scale does. Uses
 * no other bench file.
 */
#include <hwloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

struct bench_topo {
	hwloc_topology_t topo;
	hwloc_obj_type_t obj_type;
	unsigned nr_objs;
};

unsigned bench_nproc(void)
{
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set))
		return (unsigned)CPU_COUNT(&set);
	return (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
}

void bench_topo_close(struct bench_topo *t)
{
	if (!t)
		return;
	hwloc_topology_destroy(t->topo);
	free(t);
}

/*
 * Cores by default, hardware threads with @smt; PUs when hwloc reports no cores (some VMs). A
 * topology that cannot be loaded at all leaves the tasks unbound (*@out = NULL), with a
 * warning.
 */
int bench_topo_open(struct bench_topo **out, bool smt)
{
	struct bench_topo *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -1;
	if (hwloc_topology_init(&t->topo)) {
		free(t);
		fprintf(stderr, "pinmm-bench: warning: hwloc cannot start; tasks run unbound\n");
		return 0;
	}
	if (hwloc_topology_load(t->topo)) {
		fprintf(stderr, "pinmm-bench: warning: hwloc cannot load the topology; tasks "
			"run unbound (as with -n)\n");
		bench_topo_close(t);
		return 0;
	}
	t->obj_type = smt ? HWLOC_OBJ_PU : HWLOC_OBJ_CORE;
	t->nr_objs = (unsigned)hwloc_get_nbobjs_by_type(t->topo, t->obj_type);
	if (!t->nr_objs && t->obj_type == HWLOC_OBJ_CORE) {
		t->obj_type = HWLOC_OBJ_PU;
		t->nr_objs = (unsigned)hwloc_get_nbobjs_by_type(t->topo, t->obj_type);
	}
	if (!t->nr_objs) {
		fprintf(stderr, "No Cores/PUs found. Try adding/removing -m flag\n");
		bench_topo_close(t);
		return -1;
	}
	*out = t;
	return 0;
}

struct bench_cpuset *bench_topo_cpuset(struct bench_topo *t, unsigned i)
{
	hwloc_obj_t obj = hwloc_get_obj_by_type(t->topo, t->obj_type, i % t->nr_objs);

	return (struct bench_cpuset *)hwloc_bitmap_dup(obj->cpuset);
}

struct bench_cpuset *bench_topo_binding(struct bench_topo *t)
{
	hwloc_bitmap_t set = hwloc_bitmap_alloc();

	if (set)
		hwloc_get_cpubind(t->topo, set, HWLOC_CPUBIND_THREAD);
	return (struct bench_cpuset *)set;
}

void bench_topo_bind(struct bench_topo *t, const struct bench_cpuset *set)
{
	if (set)
		hwloc_set_cpubind(t->topo, (hwloc_const_bitmap_t)set, HWLOC_CPUBIND_THREAD);
}

void bench_cpuset_free(struct bench_cpuset *set)
{
	if (set)
		hwloc_bitmap_free((hwloc_bitmap_t)set);
}
