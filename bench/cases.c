// SPDX-License-Identifier: MIT
/*
 * cases.c - the typed table of test cases, built from BENCH_CASE_LIST in bench.h. Adding a
 * case: write bench/cases/<name>.c defining bench_case_<name>, and add <name> to the list.
 */
#include <string.h>

#include "harness.h"

#define BENCH_CASE_ENTRY(n) &bench_case_##n,
const struct bench_case *const bench_cases[] = {
	BENCH_CASE_LIST(BENCH_CASE_ENTRY)
	NULL,
};
#undef BENCH_CASE_ENTRY

const struct bench_case *bench_find_case(const char *name)
{
	for (const struct bench_case *const *c = bench_cases; *c; c++)
		if (!strcmp((*c)->name, name))
			return *c;
	return NULL;
}
