// SPDX-License-Identifier: MIT
/*
 * interp_encode.c - the differential interpreter's byte encoding (interp.h): two bytes of knobs,
 * then 10 bytes an operation; any byte string decodes to a valid sequence.
 *
 * The knobs bytes hold the bits of PM_KNOB_ALL packed in order (bit j: the j-th knob from the
 * lowest, little-endian), so that sparse knob values fit: at most sixteen knobs.
 */
#include "interp_internal.h"

_Static_assert(__builtin_popcount(PM_KNOB_ALL) <= 8 * INTERP_KNOB_BYTES, "the knobs fit");

static unsigned knobs_pack(unsigned knobs)
{
	unsigned all = PM_KNOB_ALL, j = 0;
	unsigned b = 0;

	for (; all; all &= all - 1, j++)
		if (knobs & all & -all)
			b |= 1U << j;
	return b;
}

static unsigned knobs_unpack(unsigned b)
{
	unsigned all = PM_KNOB_ALL, j = 0, knobs = 0;

	for (; all; all &= all - 1, j++)
		if (b & (1U << j))
			knobs |= all & -all;
	return knobs;
}

size_t interp_encode(unsigned knobs, const struct interp_op *ops, size_t n, uint8_t *out,
		     size_t cap)
{
	size_t len = INTERP_KNOB_BYTES;
	unsigned b = knobs_pack(knobs);

	if (cap < INTERP_KNOB_BYTES)
		return 0;
	out[0] = (uint8_t)b;
	out[1] = (uint8_t)(b >> 8);
	for (size_t i = 0; i < n && len + INTERP_OP_BYTES <= cap; i++) {
		uint8_t *p = out + len;

		p[0] = ops[i].code;
		p[1] = ops[i].mm;
		p[2] = (uint8_t)ops[i].page;
		p[3] = (uint8_t)(ops[i].page >> 8);
		p[4] = (uint8_t)ops[i].npages;
		p[5] = (uint8_t)(ops[i].npages >> 8);
		p[6] = ops[i].a;
		p[7] = ops[i].b;
		p[8] = (uint8_t)ops[i].c;
		p[9] = (uint8_t)(ops[i].c >> 8);
		len += INTERP_OP_BYTES;
	}
	return len;
}

size_t interp_decode(const uint8_t *data, size_t len, unsigned *knobs, struct interp_op *ops,
		     size_t max)
{
	size_t n = 0;

	*knobs = len >= INTERP_KNOB_BYTES ? knobs_unpack(data[0] | (unsigned)data[1] << 8) :
		 len ? knobs_unpack(data[0]) : 0;
	for (size_t off = INTERP_KNOB_BYTES; off + INTERP_OP_BYTES <= len && n < max; off += INTERP_OP_BYTES) {
		const uint8_t *p = data + off;

		ops[n].code = (uint8_t)(p[0] % INTERP_NR_OPS);
		ops[n].mm = p[1];
		ops[n].page = (uint16_t)(p[2] | p[3] << 8);
		ops[n].npages = (uint16_t)(p[4] | p[5] << 8);
		ops[n].a = p[6];
		ops[n].b = p[7];
		ops[n].c = (uint16_t)(p[8] | p[9] << 8);
		n++;
	}
	return n;
}
