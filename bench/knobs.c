// SPDX-License-Identifier: MIT
/*
 * knobs.c - what `--knobs` and `--variant` may say: pinmm's historical behaviours by name or
 * number ("before" being the case's own), and a case's variants ("a|b|c", the first the
 * default). Uses no other bench file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harness.h"

static const struct {
	const char *name;
	unsigned bit;
} knob_names[] = {
	{ "has_pinned_always_write", PM_KNOB_HAS_PINNED_ALWAYS_WRITE },
	{ "no_gup_fast", PM_KNOB_NO_GUP_FAST },
	{ "gup_fast_restart", PM_KNOB_GUP_FAST_RESTART },
	{ "unpin_per_page", PM_KNOB_UNPIN_PER_PAGE },
	{ "shmem_lock_twice", PM_KNOB_SHMEM_LOCK_TWICE },
	{ "no_per_vma_lock", PM_KNOB_NO_PER_VMA_LOCK },
	{ "shmem_tree_lock", PM_KNOB_SHMEM_TREE_LOCK },
	{ "pte_table_lock", PM_KNOB_PTE_TABLE_LOCK },
	{ "folio_shared_pins", PM_KNOB_FOLIO_SHARED_PINS },
	{ "no_huge_zero_page", PM_KNOB_NO_HUGE_ZERO_PAGE },
	{ "longterm_pin_in_place", PM_KNOB_LONGTERM_PIN_IN_PLACE },
	{ "vma_lock_shared_count", PM_KNOB_VMA_LOCK_SHARED_COUNT },
	{ "hugetlb_pool_lock", PM_KNOB_HUGETLB_POOL_LOCK },
};

static int parse_one_knob(const struct bench_case *bc, const char *w, unsigned *knobs)
{
	uint64_t v;

	if (!strcmp(w, "before")) {
		*knobs |= bc->before_knobs;
		return 0;
	}
	if (!strcmp(w, "after") || !strcmp(w, "none") || !*w)
		return 0;
	for (size_t i = 0; i < sizeof(knob_names) / sizeof(knob_names[0]); i++) {
		if (!strcmp(w, knob_names[i].name)) {
			*knobs |= knob_names[i].bit;
			return 0;
		}
	}
	if (cli_parse_u64(w, 0, PM_KNOB_ALL, &v) || v & ~(uint64_t)PM_KNOB_ALL)
		return -EINVAL;
	*knobs |= (unsigned)v;
	return 0;
}

/* "before", "after", or a comma list of knob names or numbers. */
int bench_parse_knobs(const struct bench_case *bc, const char *s, unsigned *knobs)
{
	char *copy, *w, *save = NULL;
	int err = 0;

	*knobs = 0;
	if (!s)
		return 0;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	for (w = strtok_r(copy, ",", &save); w && !err; w = strtok_r(NULL, ",", &save))
		err = parse_one_knob(bc, w, knobs);
	free(copy);
	return err;
}

const char *bench_knob_names(unsigned knobs, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(knob_names) / sizeof(knob_names[0]); i++) {
		if (knobs & knob_names[i].bit)
			off += snprintf(buf + off, off < len ? len - off : 0, "%s%s",
					off ? "," : "", knob_names[i].name);
	}
	if (!off)
		snprintf(buf, len, "none");
	return buf;
}

bool bench_variant_valid(const struct bench_case *bc, const char *v)
{
	size_t n = strlen(v);
	const char *p = bc->variants;

	while (p && *p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == n && !strncmp(p, v, n))
			return true;
		p = bar ? bar + 1 : NULL;
	}
	return false;
}

const char *bench_default_variant(const struct bench_case *bc, char *buf, size_t len)
{
	size_t n;

	if (!bc->variants)
		return NULL;
	n = strcspn(bc->variants, "|");
	snprintf(buf, len, "%.*s", (int)n, bc->variants);
	return buf;
}

int bench_check_case_opts(const struct bench_opts *o)
{
	const struct bench_case *bc = o->bc;
	unsigned knobs;

	if (o->variant && !bench_variant_valid(bc, o->variant)) {
		fprintf(stderr, "pinmm-bench: %s: unknown variant '%s' (one of %s)\n", bc->name,
			o->variant, bc->variants ? bc->variants : "none");
		return -EINVAL;
	}
	if (bench_parse_knobs(bc, o->knobs, &knobs)) {
		fprintf(stderr, "pinmm-bench: bad --knobs '%s'\n", o->knobs);
		return -EINVAL;
	}
	if ((bc->flags & BENCH_F_HOST) && o->knobs && strcmp(o->knobs, "after") &&
	    strcmp(o->knobs, "none")) {
		fprintf(stderr, "pinmm-bench: %s: knobs select pinmm behaviour; a host case runs "
			"the kernel as it is\n", bc->name);
		return -EINVAL;
	}
	return 0;
}
