// SPDX-License-Identifier: MIT
/*
 * interp_print.c - how the differential interpreter says what it ran (interp.h): opcode names,
 * one operation as a C-like call, a sequence as regression-table lines, the statistics.
 */
#include "interp_internal.h"

static const char *const advice_name[INTERP_NR_ADVICE] = {
	"DONTNEED", "HUGEPAGE",	  "NOHUGEPAGE", "DONTFORK",	 "DOFORK",
	"WIPEONFORK", "KEEPONFORK", "FREE",	"POPULATE_READ", "POPULATE_WRITE",
};
static const char *const prot_name[4] = { "NONE", "READ", "RW", "RW" };
static const char *const kind_name[4] = { "PRIVATE|ANON", "SHARED|ANON", "PRIVATE", "SHARED" };
static const char *const gup_name[4] = { "get_user_pages", "get_user_pages_fast",
					 "pin_user_pages", "pin_user_pages_fast" };
const char *const interp_release_name[5] = { "per page", "unpin_user_pages",
					     "unpin_user_pages_dirty_lock",
					     "unpin_user_page_range_dirty_lock", "one page" };

static const char *const op_names[INTERP_NR_OPS] = {
	[OP_MMAP] = "OP_MMAP",
	[OP_MUNMAP] = "OP_MUNMAP",
	[OP_MPROTECT] = "OP_MPROTECT",
	[OP_MADVISE] = "OP_MADVISE",
	[OP_ACCESS] = "OP_ACCESS",
	[OP_FAULT] = "OP_FAULT",
	[OP_FORK] = "OP_FORK",
	[OP_MM_DESTROY] = "OP_MM_DESTROY",
	[OP_MM_CREATE] = "OP_MM_CREATE",
	[OP_GUP] = "OP_GUP",
	[OP_RELEASE] = "OP_RELEASE",
	[OP_PIN_WRITE] = "OP_PIN_WRITE",
	[OP_REF_READ] = "OP_REF_READ",
	[OP_SHMEM_CREATE] = "OP_SHMEM_CREATE",
	[OP_SHMEM_TRUNCATE] = "OP_SHMEM_TRUNCATE",
	[OP_SHMEM_PUT] = "OP_SHMEM_PUT",
	[OP_SHMEM_STAT] = "OP_SHMEM_STAT",
	[OP_CHECK] = "OP_CHECK",
	[OP_BADARG] = "OP_BADARG",
	[OP_MIGRATE] = "OP_MIGRATE",
	[OP_HUGETLB_MMAP] = "OP_HUGETLB_MMAP",
};

void interp_print_stats(FILE *f, const char *what, const struct interp_stats *st)
{
	static const char *const ev[MEV_NR] = {
		[MEV_COW_COPY_HELD] = "COW copies away from a held page",
		[MEV_REFS_UNCERTAIN] = "references made uncertain",
		[MEV_FORK_PINNED] = "pinned pages copied at fork",
		[MEV_FORK_UNKNOWN] = "fork next to a pinned THP",
		[MEV_FILE_COW] = "private copies of object pages",
		[MEV_TRUNCATE_COW] = "private copies dropped by truncate",
		[MEV_SIGBUS] = "faults beyond an object's end",
		[MEV_LIMIT] = "faults beyond an object's limit",
		[MEV_REF_ZERO] = "references to the zero page",
		[MEV_HUGETLB_FAULT] = "hugetlb pages faulted in",
		[MEV_HUGETLB_FORK] = "private hugetlb pages forked",
		[MEV_HUGETLB_UNSURE] = "operations that would cut a hugetlb page (skipped)",
		[MEV_REF_ADOPTED] = "references to never-written THP pages",
	};

	fprintf(f,
		"# %s: %lu sequences, %lu operations run on both sides (%lu skipped), %lu "
		"references, %lu bytes compared, %lu machine checks\n",
		what, st->sequences, st->ops, st->skipped, st->refs, st->bytes, st->checks);
	fprintf(f, "#   operations:");
	for (int k = 0; k < INTERP_NR_OPS; k++)
		fprintf(f, " %s %lu", op_names[k] + 3, st->per_op[k]);
	fprintf(f, "\n#   model rules:");
	for (int e = 0; e < MEV_NR; e++)
		fprintf(f, "%s %s %lu", e ? "," : "", ev[e], st->events[e]);
	fprintf(f, "\n");
}

const char *interp_op_name(unsigned code)
{
	if (code == OP_TAMPER)
		return "OP_TAMPER";
	return code < INTERP_NR_OPS ? op_names[code] : "?";
}

void interp_describe(const struct interp_op *op, char *buf, size_t len)
{
	unsigned long page = op->page % W_PAGES, n = clamp_pages(page, op->npages);
	int mm = op->mm % MODEL_MAX_MMS, o = op->b % MODEL_MAX_OBJS, g = op->a % MODEL_MAX_GROUPS;
	static const char *const place[4] = { "FIXED", "FIXED", "FIXED_NOREPLACE", "hint" };
	unsigned long max;

	switch (op->code) {
	case OP_MMAP:
		if (((op->a >> 2) & 3) >= 2)
			snprintf(buf, len,
				 "pm_mmap(mm%d, W+0x%lx, 0x%lx, %s, %s|%s%s, obj%d, 0x%lx)", mm,
				 page * PS, n * PS, prot_name[op->a & 3],
				 kind_name[(op->a >> 2) & 3], place[(op->a >> 5) & 3],
				 op->a & 0x10 ? "|POPULATE" : "", o,
				 (op->c % MODEL_OBJ_MAX_PAGES) * PS);
		else
			snprintf(buf, len, "pm_mmap(mm%d, W+0x%lx, 0x%lx, %s, %s|%s%s, NULL, 0)",
				 mm, page * PS, n * PS, prot_name[op->a & 3],
				 kind_name[(op->a >> 2) & 3], place[(op->a >> 5) & 3],
				 op->a & 0x10 ? "|POPULATE" : "");
		break;
	case OP_MUNMAP:
		snprintf(buf, len, "pm_munmap(mm%d, W+0x%lx, 0x%lx)", mm, page * PS, n * PS);
		break;
	case OP_MPROTECT:
		snprintf(buf, len, "pm_mprotect(mm%d, W+0x%lx, 0x%lx, %s)", mm, page * PS, n * PS,
			 prot_name[op->a & 3]);
		break;
	case OP_MADVISE:
		snprintf(buf, len, "pm_madvise(mm%d, W+0x%lx, 0x%lx, %s)", mm, page * PS, n * PS,
			 advice_name[op->a % INTERP_NR_ADVICE]);
		break;
	case OP_ACCESS:
		snprintf(buf, len, "pm_access(mm%d, W+0x%lx, buf, %u, %s)", mm,
			 page * PS + op->c % PS, 1 + op->npages % ACCESS_MAX,
			 op->a & 1 ? "write" : "read");
		break;
	case OP_FAULT:
		snprintf(buf, len, "pm_fault(mm%d, W+0x%lx, %s)", mm, page * PS + op->c % PS,
			 op->a & 1 ? "WRITE" : "0");
		break;
	case OP_FORK:
		snprintf(buf, len, "pm_mm_fork(mm%d)", mm);
		break;
	case OP_MM_DESTROY:
		snprintf(buf, len, "pm_mm_destroy(mm%d)", mm);
		break;
	case OP_MM_CREATE:
		snprintf(buf, len, "pm_mm_create()");
		break;
	case OP_GUP:
		snprintf(buf, len, "pm_%s(mm%d, W+0x%lx, %u, %s%s%s%s, %s)", gup_name[op->a & 3],
			 mm, page * PS, op->npages % (MODEL_GROUP_PAGES + 1),
			 op->a & 0x4 ? "WRITE|" : "", op->a & 0x8 ? "FORCE|" : "",
			 op->a & 0x10 ? "LONGTERM|" : "", "0", op->a & 0x20 ? "NULL" : "pages");
		break;
	case OP_RELEASE:
		snprintf(buf, len, "release(group %d, %s%s)", g, interp_release_name[op->b % 5],
			 op->c & 1 ? ", dirty" : "");
		break;
	case OP_PIN_WRITE:
		snprintf(buf, len, "memcpy(pm_page_address(group %d[%u]) + %u, data, %lu)", g,
			 op->npages, op->c % (unsigned)PS,
			 1 + op->page % (PS - op->c % PS));
		break;
	case OP_REF_READ:
		snprintf(buf, len, "read(group %d)", g);
		break;
	case OP_SHMEM_CREATE:
		max = op->c % 320;
		snprintf(buf, len, "pm_shmem_create(m, 0x%lx, 0x%lx) -> obj%d",
			 (1 + op->npages % MODEL_OBJ_MAX_PAGES) * PS,
			 max >= MODEL_OBJ_MAX_PAGES ? 0 : max * PS, o);
		break;
	case OP_SHMEM_TRUNCATE:
		snprintf(buf, len, "pm_shmem_truncate(obj%d, 0x%lx)", o,
			 (op->npages % (MODEL_OBJ_MAX_PAGES + 1)) * PS);
		break;
	case OP_SHMEM_PUT:
		snprintf(buf, len, "pm_shmem_put(obj%d)", o);
		break;
	case OP_SHMEM_STAT:
		snprintf(buf, len, "pm_shmem_size/nr_pages(obj%d)", o);
		break;
	case OP_CHECK:
		snprintf(buf, len, "pm_machine_check(m)");
		break;
	case OP_BADARG:
		snprintf(buf, len, "bad arguments #%d (mm%d)", op->a % NR_BADARG, mm);
		break;
	case OP_MIGRATE:
		snprintf(buf, len, "pm_migrate_range(mm%d, W+0x%lx, 0x%lx, %s)", mm, page * PS,
			 n * PS, op->a & 1 ? "AWAY_MOVABLE" : "ANYWHERE");
		break;
	case OP_HUGETLB_MMAP: {
		unsigned long hp = page / MODEL_PMD_PAGES * MODEL_PMD_PAGES;

		snprintf(buf, len, "pm_mmap(mm%d, W+0x%lx, 0x%lx, prot %d, %s hugetlb, FIXED)", mm,
			 hp * PS, clamp_pages(hp, (1 + op->npages % 2) * MODEL_PMD_PAGES) * PS,
			 op->a & 3, op->a & 4 ? "shared" : "private");
		break;
	}
	case OP_TAMPER:
		snprintf(buf, len, "tamper(group %d[%u], byte %u)", g, op->npages,
			 op->c % (unsigned)PS);
		break;
	default:
		snprintf(buf, len, "opcode %u", op->code);
		break;
	}
}

void interp_print(FILE *f, const char *prefix, unsigned knobs, const struct interp_op *ops,
		  size_t n)
{
	char desc[256];

	fprintf(f, "%s/* knobs 0x%x, %zu operations; W = 0x%lx */\n", prefix, knobs, n, MODEL_BASE);
	for (size_t i = 0; i < n; i++) {
		interp_describe(&ops[i], desc, sizeof(desc));
		if (ops[i].code < INTERP_NR_OPS)
			fprintf(f, "%s{ %s, %u, %u, %u, 0x%02x, 0x%02x, 0x%04x }, /* %s */\n",
				prefix, op_names[ops[i].code], ops[i].mm, ops[i].page,
				ops[i].npages, ops[i].a, ops[i].b, ops[i].c, desc);
		else
			fprintf(f, "%s{ %u, %u, %u, %u, 0x%02x, 0x%02x, 0x%04x }, /* %s */\n",
				prefix, ops[i].code, ops[i].mm, ops[i].page, ops[i].npages,
				ops[i].a, ops[i].b, ops[i].c, desc);
	}
}
