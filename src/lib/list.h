/* SPDX-License-Identifier: MIT */
/*
 * list.h - a circular doubly linked list, the kernel's shape. The caller provides the locking.
 */
#ifndef PM_LIB_LIST_H
#define PM_LIB_LIST_H

#include <stdbool.h>
#include "lib/compiler.h"

struct pm_list {
	struct pm_list *next, *prev;
};

#define PM_LIST_INIT(name) { &(name), &(name) }

static inline void pm_list_init(struct pm_list *h)
{
	h->next = h->prev = h;
}

static inline bool pm_list_empty(const struct pm_list *h)
{
	return h->next == h;
}

static inline void pm_list_insert_between(struct pm_list *n, struct pm_list *prev,
					  struct pm_list *next)
{
	next->prev = n;
	n->next = next;
	n->prev = prev;
	prev->next = n;
}

static inline void pm_list_add(struct pm_list *n, struct pm_list *h)
{
	pm_list_insert_between(n, h, h->next);
}

static inline void pm_list_add_tail(struct pm_list *n, struct pm_list *h)
{
	pm_list_insert_between(n, h->prev, h);
}

static inline void pm_list_del(struct pm_list *n)
{
	n->next->prev = n->prev;
	n->prev->next = n->next;
	n->next = n->prev = n;
}

#define pm_list_entry(ptr, type, member) container_of(ptr, type, member)
#define pm_list_first_entry(h, type, member) pm_list_entry((h)->next, type, member)
#define pm_list_for_each(pos, h) for (pos = (h)->next; pos != (h); pos = pos->next)
#define pm_list_for_each_safe(pos, n, h) \
	for (pos = (h)->next, n = pos->next; pos != (h); pos = n, n = pos->next)

#endif /* PM_LIB_LIST_H */
