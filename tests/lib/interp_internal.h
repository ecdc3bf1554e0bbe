/* SPDX-License-Identifier: MIT */
/*
 * interp_internal.h - what the files of the differential interpreter share and its users do not:
 * the window's units, the generator's random numbers, the page clamp every decoder applies, and
 * the names both the trace and the printer use. The public face is interp.h.
 *
 *   interp.c		one sequence run on pinmm and on the model, compared; the kept machines
 *   interp_gen.c	the random generator
 *   interp_encode.c	the byte encoding (replay, corpus, libFuzzer)
 *   interp_print.c	names, descriptions, regression-table lines, statistics
 *   interp_shrink.c	the shrinker and the report of a divergence
 */
#ifndef PM_TESTS_INTERP_INTERNAL_H
#define PM_TESTS_INTERP_INTERNAL_H

#include "interp.h"
#include "xorshift.h" /* the generator's numbers, and the bytes accesses write */

#define W_PAGES MODEL_WINDOW_PAGES
#define PS MODEL_PAGE_SIZE
#define ACCESS_MAX 8192
/* The contract's argument errors OP_BADARG chooses from (badarg() in interp.c). */
#define NR_BADARG 27


/* @n pages from @page, at least one, clamped to the window */
static inline unsigned long clamp_pages(unsigned long page, unsigned long n)
{
	if (n < 1)
		n = 1;
	if (n > W_PAGES - page)
		n = W_PAGES - page;
	return n;
}

/* interp_print.c: OP_RELEASE's methods, by b % 5 */
extern const char *const interp_release_name[5];

#endif /* PM_TESTS_INTERP_INTERNAL_H */
