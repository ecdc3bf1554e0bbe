/* SPDX-License-Identifier: MIT */
/*
 * cli.h - numbers on pinmm's command lines, read strictly: pinmm-bench (bench/), the tools
 * (tools/NAME.c) and the experiments (experiments/NAME.c) all parse with these, so every option
 * takes the same forms and refuses the same mistakes.
 *
 * A number is the whole argument: decimal digits, or 0x and hexadecimal digits; no sign, no
 * space, nothing after it (a signed number may start with '-'). It must lie in [min, max];
 * a value that does not fit in 64 bits is out of range, never wrapped. A size may end in one
 * of K, M, G, T (binary, either case); without one it counts in @unit bytes; the product is
 * range-checked too, so 17179869185G is refused, not 1 GiB.
 *
 * The parsers return 0, -EINVAL (not a number of that form) or -ERANGE (outside [min, max]),
 * and print nothing: cli_complain() says which argument was wrong and why, after which the
 * caller prints its usage and exits 1.
 *
 * Lists: cli_parse_list() reads a comma-separated list, each item once; unlike the number
 * parsers it says what is wrong itself, since only it knows which item.
 *
 * Working sets: cli_check_working_set() refuses one larger than the host's MemAvailable, so a
 * command line says so at once instead of growing until the OOM killer comes.
 */
#ifndef PINMM_TOOLS_CLI_H
#define PINMM_TOOLS_CLI_H

#include <stdint.h>

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
int cli_parse_long(const char *s, long min, long max, long *out);
int cli_parse_size(const char *s, uint64_t unit, uint64_t min, uint64_t max, uint64_t *out);
/* Decimal, with an optional fraction ("0.5", ".25", "2"); no exponent, no inf or nan. */
int cli_parse_double(const char *s, double min, double max, double *out);

/* "@prog: @opt '@arg': not a number" (or "out of range"), on stderr. */
void cli_complain(const char *prog, const char *opt, const char *arg, int err);

/*
 * cli_parse_list() - @s, a list of items separated by commas, in order. @item turns one item
 * into a key (its number, its index in a table of names) or returns a negative errno after
 * saying why on stderr. Refused, with "@prog: @opt '@s': ..." on stderr: an empty list ("an
 * empty list"), an empty item ("1,,2", ",1", "1,": "an empty item"), a key given twice
 * ("1,1" and "1,0x1": "'0x1' more than once"; running a point twice is never what was meant)
 * and more than @max items. Return: the number of keys written to @keys (at least 1), or a
 * negative errno.
 */
typedef int cli_list_item_fn(const char *item, void *ctx, uint64_t *key);
int cli_parse_list(const char *prog, const char *opt, const char *s, unsigned max,
		   cli_list_item_fn *item, void *ctx, uint64_t *keys);

/* MemAvailable from /proc/meminfo in bytes; 0 when it cannot be read. */
uint64_t cli_mem_available(void);
/*
 * cli_check_working_set() - 0 when @bytes fit in the host's available memory (or it cannot be
 * told); otherwise says so on stderr ("@prog: @what: a working set of N MiB is more than the
 * host's available memory (MemAvailable N MiB)") and returns -ENOMEM.
 */
int cli_check_working_set(const char *prog, const char *what, uint64_t bytes);

#endif /* PINMM_TOOLS_CLI_H */
