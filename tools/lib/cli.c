// SPDX-License-Identifier: MIT
/*
 * cli.c - strict numbers, lists and the working-set check of pinmm's command lines (cli.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Digits only (0x: hexadecimal), the whole string, no wrap. */
static int parse_digits(const char *s, const char **end, uint64_t *out)
{
	unsigned base = 10;
	uint64_t v = 0;
	const char *p = s;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (!*p)
		return -EINVAL;
	for (; *p; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (v > (UINT64_MAX - d) / base)
			return -ERANGE;
		v = v * base + d;
	}
	if (p == s || (base == 16 && p == s + 2))
		return -EINVAL;
	*end = p;
	*out = v;
	return 0;
}

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int err;

	if (!s)
		return -EINVAL;
	err = parse_digits(s, &end, &v);
	if (err)
		return err;
	if (*end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	uint64_t v;
	int err = cli_parse_u64(s, min, max, &v);

	if (!err)
		*out = (unsigned)v;
	return err;
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
	bool neg = s && s[0] == '-';
	uint64_t v;
	int err;

	if (!s)
		return -EINVAL;
	err = cli_parse_u64(s + neg, 0, UINT64_MAX, &v);
	if (err)
		return err;
	if (!neg && v > (uint64_t)LONG_MAX)
		return -ERANGE;
	if (neg && v > (uint64_t)LONG_MAX + 1)
		return -ERANGE;
	if (neg) {
		long n = v == (uint64_t)LONG_MAX + 1 ? LONG_MIN : -(long)v;

		if (n < min || n > max)
			return -ERANGE;
		*out = n;
		return 0;
	}
	if ((long)v < min || (long)v > max)
		return -ERANGE;
	*out = (long)v;
	return 0;
}

int cli_parse_size(const char *s, uint64_t unit, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int err;

	if (!s)
		return -EINVAL;
	err = parse_digits(s, &end, &v);
	if (err)
		return err;
	if (*end) {
		switch (end[0]) {
		case 'k': case 'K': unit = 1ull << 10; break;
		case 'm': case 'M': unit = 1ull << 20; break;
		case 'g': case 'G': unit = 1ull << 30; break;
		case 't': case 'T': unit = 1ull << 40; break;
		default: return -EINVAL;
		}
		if (end[1])
			return -EINVAL;
	}
	if (unit && v > UINT64_MAX / unit)
		return -ERANGE;
	v *= unit;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int cli_parse_double(const char *s, double min, double max, double *out)
{
	size_t digits, frac = 0;
	char *end;
	double v;

	if (!s)
		return -EINVAL;
	digits = strspn(s, "0123456789");
	if (s[digits] == '.')
		frac = strspn(s + digits + 1, "0123456789");
	if ((!digits && !frac) || s[digits + (s[digits] == '.' ? 1 + frac : 0)])
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return -ERANGE;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

void cli_complain(const char *prog, const char *opt, const char *arg, int err)
{
	fprintf(stderr, "%s: %s '%s': %s\n", prog, opt, arg ? arg : "",
		err == -ERANGE ? "out of range" : "not a number");
}

/* Whether keys[n] is among keys[0..n-1]: lists are short, so a scan. */
static bool key_seen(const uint64_t *keys, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		if (keys[k] == keys[n])
			return true;
	return false;
}

int cli_parse_list(const char *prog, const char *opt, const char *s, unsigned max,
		   cli_list_item_fn *item, void *ctx, uint64_t *keys)
{
	char *copy, *w, *next;
	unsigned n = 0;
	int err = 0;

	if (!s || !*s) {
		fprintf(stderr, "%s: %s '': an empty list\n", prog, opt);
		return -EINVAL;
	}
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	/* Split by hand: strtok() would skip the empty items this is here to refuse. */
	for (w = copy; w && !err; w = next) {
		next = strchr(w, ',');
		if (next)
			*next++ = 0;
		if (!*w) {
			fprintf(stderr, "%s: %s '%s': an empty item\n", prog, opt, s);
			err = -EINVAL;
		} else if (n == max) {
			fprintf(stderr, "%s: %s '%s': more than %u items\n", prog, opt, s, max);
			err = -E2BIG;
		} else {
			err = item(w, ctx, &keys[n]);
			if (!err && key_seen(keys, n)) {
				fprintf(stderr, "%s: %s '%s': '%s' more than once\n", prog,
					opt, s, w);
				err = -EINVAL;
			}
			n++;
		}
	}
	free(copy);
	return err ? err : (int)n;
}

uint64_t cli_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb = 0;
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb > UINT64_MAX / 1024 ? UINT64_MAX : (uint64_t)kb * 1024;
}

int cli_check_working_set(const char *prog, const char *what, uint64_t bytes)
{
	uint64_t avail = cli_mem_available();

	if (!avail || bytes <= avail)
		return 0;
	fprintf(stderr, "%s: %s: a working set of %" PRIu64 " MiB is more than the host's "
		"available memory (MemAvailable %" PRIu64 " MiB)\n", prog, what,
		(bytes + (1 << 20) - 1) >> 20, avail >> 20);
	return -ENOMEM;
}
