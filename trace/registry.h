/* SPDX-License-Identifier: MIT */
/*
 * registry.h - the registry of objects (registry.c), as labels.c reads it: its lock and its
 * regions. Nothing here knows a type of src/.
 */
#ifndef PM_TRACE_REGISTRY_H
#define PM_TRACE_REGISTRY_H

#include <stdint.h>

#include "trace/trace.h"

/* One registered object (or array), by the name of its type; labels.c finds the type. */
struct pm_trace_region {
	uintptr_t base, end;
	const char *type_name;
	uint64_t born, dead;		/* generations; dead 0: alive */
};

/* The registry's lock: the regions, the generation, and labels.c's user types. */
void pm__trace_reg_lock(void);
void pm__trace_reg_unlock(void);
/* The generation now. Context: the registry's lock. */
uint64_t pm__trace_generation_locked(void);
/* The smallest region around @addr alive after @gen, or NULL; @type_name: only that type.
 * Context: the registry's lock. */
const struct pm_trace_region *pm__trace_region_find_locked(uintptr_t addr, uint64_t gen,
							    const char *type_name);

#endif /* PM_TRACE_REGISTRY_H */
