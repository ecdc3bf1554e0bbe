/* SPDX-License-Identifier: MIT */
/*
 * pinmm/pinmm.h - the whole public API of pinmm, a user-space implementation of the Linux
 * memory-management core that makes page pinning scale.
 *
 * Conventions: int/long calls return 0 (or a count) on success and -errno on failure;
 * constructors return NULL and set errno. Every call is thread-safe unless its comment says
 * otherwise, and threads need no registration.
 */
#ifndef PINMM_PINMM_H
#define PINMM_PINMM_H

#include <pinmm/types.h>
#include <pinmm/machine.h>
#include <pinmm/mm.h>
#include <pinmm/shmem.h>
#include <pinmm/gup.h>
#include <pinmm/consumers.h>

#endif /* PINMM_PINMM_H */
