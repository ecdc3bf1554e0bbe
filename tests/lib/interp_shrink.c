// SPDX-License-Identifier: MIT
/*
 * interp_shrink.c - what the differential interpreter does with a failing sequence (interp.h):
 * shrink it while it still fails, then report it as regression-table lines, a trace and a hex
 * encoding to replay.
 */
#include <stdlib.h>
#include <string.h>

#include "interp_internal.h"

/* A try of the shrinker runs on the kept machine: interp_run() leaves it quiescent even after
 * a divergence, and measures leaks from its own start. */
static bool fails(unsigned knobs, const struct interp_op *ops, size_t n)
{
	struct interp_result res;

	return interp_run(interp_machine_get(knobs), ops, n, NULL, &res, NULL) != 0;
}

size_t interp_shrink(unsigned knobs, struct interp_op *ops, size_t n, long tries)
{
	struct interp_op *tmp = malloc(sizeof(*tmp) * (n ? n : 1));

	if (!tmp)
		return n;
	/* Delta debugging, simplified: drop chunks of halving size while it still fails. */
	for (size_t chunk = n / 2 ? n / 2 : 1; chunk >= 1 && tries > 0; chunk /= 2) {
		bool progress = true;

		while (progress && tries > 0) {
			progress = false;
			for (size_t start = 0; start < n && tries > 0;) {
				size_t end = start + chunk < n ? start + chunk : n, k = 0;

				for (size_t i = 0; i < n; i++)
					if (i < start || i >= end)
						tmp[k++] = ops[i];
				tries--;
				if (k < n && fails(knobs, tmp, k)) {
					memcpy(ops, tmp, sizeof(*tmp) * k);
					n = k;
					progress = true;
				} else {
					start = end;
				}
			}
		}
		if (chunk == 1)
			break;
	}
	free(tmp);
	return n;
}

void interp_report(FILE *f, unsigned knobs, struct interp_op *ops, size_t n,
		   const struct interp_result *res, long tries)
{
	struct interp_opts opts = { .trace = f };
	struct interp_result r2;
	struct pm_machine *m;
	size_t k, cap, len;
	uint8_t *buf;

	fprintf(f, "# divergence (knobs 0x%x): %s\n", knobs, res->msg);
	k = interp_shrink(knobs, ops, n, tries);
	fprintf(f, "# shrunk from %zu to %zu operations; as a regression entry:\n", n, k);
	interp_print(f, "#   ", knobs, ops, k);
	fprintf(f, "# trace of the shrunk sequence on a fresh machine:\n");
	m = interp_machine(knobs);
	if (m) {
		interp_run(m, ops, k, &opts, &r2, NULL);
		pm_machine_destroy(m);
	}
	cap = INTERP_KNOB_BYTES + k * INTERP_OP_BYTES;
	buf = malloc(cap);
	if (!buf)
		return;
	len = interp_encode(knobs, ops, k, buf, cap);
	fprintf(f, "# replay: test_differential -x ");
	for (size_t i = 0; i < len; i++)
		fprintf(f, "%02x", buf[i]);
	fprintf(f, "\n");
	fflush(f);
	free(buf);
}
