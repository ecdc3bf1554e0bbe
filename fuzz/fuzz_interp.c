// SPDX-License-Identifier: MIT
/*
 * fuzz_interp.c - libFuzzer over the differential interpreter (issue 9): every input is an
 * encoded operation sequence (tests/lib/interp.h: one byte of knobs, then 10 bytes per
 * operation; any byte string decodes), run against pinmm and the reference model. A divergence,
 * a leak, a failed pm_machine_check() or a sanitizer report aborts, and libFuzzer keeps the input.
 *
 * Build and run with `make fuzz` (mk/fuzz.mk). Replay a crash with its trace:
 *   build/asan/tests/unit/test_differential -f build/fuzz/crash-...
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/interp.h"

#define FUZZ_MAX_OPS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One machine at a time: a new one when an input asks for other knobs. */
static struct pm_machine *machine;
static unsigned machine_knobs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct interp_op ops[FUZZ_MAX_OPS];
	static const struct interp_opts opts = { .light_end = true }; /* speed: ~10 ms a check */
	struct interp_result res;
	unsigned knobs;
	size_t n = interp_decode(data, size, &knobs, ops, FUZZ_MAX_OPS);

	if (machine && machine_knobs != knobs) {
		pm_machine_destroy(machine);
		machine = NULL;
	}
	if (!machine) {
		machine = interp_machine(knobs);
		if (!machine) {
			perror("fuzz_interp: pm_machine_create");
			abort();
		}
		machine_knobs = knobs;
	}
	if (interp_run(machine, ops, n, &opts, &res, NULL)) {
		printf("fuzz_interp: divergence (knobs 0x%x): %s\n", knobs, res.msg);
		interp_print(stdout, "  ", knobs, ops, n);
		fflush(stdout);
		abort();
	}
	return 0;
}
