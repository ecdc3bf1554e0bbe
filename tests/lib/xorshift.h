/* SPDX-License-Identifier: MIT */
/*
 * xorshift.h - the tests' deterministic generator (xorshift64*), one copy for tap.h's
 * tap_rand() and the differential interpreter: a seed replays a run exactly.
 */
#ifndef PM_TESTS_XORSHIFT_H
#define PM_TESTS_XORSHIFT_H

#include <stdint.h>

static inline uint64_t xorshift64s(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

#endif
