// SPDX-License-Identifier: MIT
/*
 * owner.c - the per-thread lock-owner ids (see owner.h).
 */
#include "lib/atomic.h"
#include "lib/owner.h"

__thread int pm__lock_owner;

/* Hand this thread its lock-owner id: a counter, so ids are small, unique and never 0. */
int pm__lock_owner_init(void)
{
	static _Atomic int next_owner;

	pm__lock_owner = atomic_add_relaxed(&next_owner, 1) + 1;
	return pm__lock_owner;
}
