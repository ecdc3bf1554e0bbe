// SPDX-License-Identifier: MIT
/*
 * args.c - the numbers, lists and words on pinmm-bench's command lines (a case, `runtest`,
 * `report`), read with tools/lib/cli.c's strict parsers: the whole argument, range-checked,
 * never wrapped; a list item by item, each once. Each says what is wrong on stderr; the caller
 * then prints its usage and exits 1. Uses no other bench file.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "harness.h"

int bench_arg_uint(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *out)
{
	int err = cli_parse_uint(arg, min, max, out);

	if (err)
		cli_complain("pinmm-bench", opt, arg, err);
	return err;
}

int bench_arg_size(const char *opt, const char *arg, size_t *out)
{
	uint64_t v;
	int err = cli_parse_size(arg, 1, 1, SIZE_MAX, &v);

	if (err) {
		cli_complain("pinmm-bench", opt, arg, err);
		return err;
	}
	*out = (size_t)v;
	return 0;
}

int bench_arg_working_set(const char *opt, size_t size)
{
	return cli_check_working_set("pinmm-bench", opt, size);
}

int bench_arg_list(const char *opt, const char *arg, unsigned max,
		   int (*item)(const char *word, void *ctx, uint64_t *key), void *ctx,
		   uint64_t *keys)
{
	return cli_parse_list("pinmm-bench", opt, arg, max, item, ctx, keys);
}

/* One check for the case form and runtest, so that both take and refuse the same words. */
int bench_arg_mm(const char *arg, bool *range_mm)
{
	if (strcmp(arg, "linux") && strcmp(arg, "range")) {
		fprintf(stderr, "pinmm-bench: --mm '%s': linux or range\n", arg);
		return -EINVAL;
	}
	*range_mm = !strcmp(arg, "range");
	return 0;
}
