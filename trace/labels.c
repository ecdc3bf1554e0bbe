// SPDX-License-Identifier: MIT
/*
 * labels.c - what an address is: the field tables of the types the library names, and the
 * program's symbol tables for globals, read over the registry of objects (registry.c).
 *
 * A conflict must read as "struct pm_page[pfn 1234].xrefcount (head of an order-9 folio)" or
 * "struct pm_mm_range.lock.xcount", never as a bare address. The decisions:
 *  - A registered object's name is a type: the field tables (fields.h) are built with
 *    offsetof(), so they follow src/'s headers. This file is the only one of the tracer that
 *    reads src/'s structs, and nothing in src/ calls it: the library's hooks go to
 *    registry.c, so the tracer's files and the library's call each other in one direction.
 *    A region's type is what its name meant when it was registered: a built-in type, or a user
 *    type registered before it.
 *  - Descriptors describe themselves from their current state (flags, order, head): "head of
 *    an order-9 folio", "a PTE table", "free". That is the state when the label is made,
 *    after the operations, which is what a reader of the report wants to know of the page.
 *  - A global nobody registered is found in the ELF symbol tables of the loaded objects
 *    (static ones too, with their file): pm__machines[3], a static lock. What is in no table
 *    and no symbol is "unlabelled", with its address.
 */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gup/gup.h"
#include "trace/registry.h"

/* ---- types ---- */

#define TYPE(t, disp, idx) static const struct pm_trace_field t##_fields[] = {
#define F(t, m) PM_TRACE_FIELD(struct t, m),
#define A(t, m) PM_TRACE_FIELD_ARRAY(struct t, m),
#define S(t, m, sub) PM_TRACE_FIELD_OF(struct t, m, sub),
#define AS(t, m, sub) PM_TRACE_FIELD_ARRAY_OF(struct t, m, sub),
#define END(t) };
#include "trace/fields.h"
#undef TYPE
#undef F
#undef A
#undef S
#undef AS
#undef END

struct type_info {
	struct pm_trace_type t;
	const char *index_name;	/* an element of an array: "[pfn 12]" */
	uint64_t gen;		/* a user type: the registry's generation when it came; else 0 */
};

#define TYPE(t, disp, idx) \
	{ { #t, disp, sizeof(struct t), t##_fields, ARRAY_SIZE(t##_fields), NULL }, idx },
#define F(t, m)
#define A(t, m)
#define S(t, m, sub)
#define AS(t, m, sub)
#define END(t)
static struct type_info builtin_types[] = {
#include "trace/fields.h"
	/* Raw memory and structs private to one file of src/: offsets only. */
	{ { "frame", "frame data", PAGE_SIZE, NULL, 0, NULL }, "pfn" },
	{ { "pte_table", "PTE table", sizeof(pm_entry_t), NULL, 0, NULL }, "entry" },
	{ { "pmd_table", "PMD table", sizeof(pm_entry_t), NULL, 0, NULL }, "entry" },
	{ { "pud_table", "PUD table", sizeof(pm_entry_t), NULL, 0, NULL }, "entry" },
	{ { "pgd_table", "PGD table", sizeof(pm_entry_t), NULL, 0, NULL }, "entry" },
	{ { "pm_pcp_away", "struct pm_pcp (another zone's frames)", sizeof(struct pm_pcp),
	    pm_pcp_fields, ARRAY_SIZE(pm_pcp_fields), NULL }, "cpu x zone" },
	{ { "pm_shmem_limit_pcpu", "shmem limit per-CPU reserve", PM_CACHELINE, NULL, 0, NULL },
	  "cpu" },
	{ { "pm_vt_node", "struct pm_vt_node (VMA tree node)", 0, NULL, 0, NULL }, NULL },
	{ { "pm_shmem_node", "struct pm_shmem_node (page-cache node)", 0, NULL, 0, NULL }, NULL },
	{ { "pm_hugetlb_resv", "struct pm_hugetlb_resv (private hugetlb reservations)", 0, NULL, 0,
	    NULL }, NULL },
	{ { "pm_vma_pcpu", "struct pm_vma_pcpu (per-CPU VMA readers)", 0, NULL, 0, NULL }, NULL },
	{ { "pm_mm_count", "struct pm_mm_count (range design's VMA count)", 0, NULL, 0, NULL },
	  NULL },
	{ { "urcu_call_rcu_queue", "liburcu call_rcu queue (stand-in)", 0, NULL, 0, NULL }, NULL },
	{ { "urcu_grace_period", "liburcu grace period (stand-in)", 0, NULL, 0, NULL }, NULL },
};
#undef TYPE
#undef F
#undef A
#undef S
#undef AS
#undef END

#define MAX_USER_TYPES 64
static struct type_info user_types[MAX_USER_TYPES];
static unsigned nr_user_types;
static const struct type_info *type_find_locked(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(builtin_types); i++)
		if (builtin_types[i].t.name == name || !strcmp(builtin_types[i].t.name, name))
			return &builtin_types[i];
	for (unsigned i = 0; i < nr_user_types; i++)
		if (!strcmp(user_types[i].t.name, name))
			return &user_types[i];
	return NULL;
}

/* The type of @r: what its name meant when it was registered - a built-in type, or a user
 * type registered before it (a type registered later does not label it). NULL: a name no
 * table knew. */
static const struct type_info *region_type_locked(const struct pm_trace_region *r)
{
	const struct type_info *ti = type_find_locked(r->type_name);

	return ti && ti->gen < r->born ? ti : NULL;
}

int pm_trace_type_register(const struct pm_trace_type *t)
{
	int ret = -1;

	pm__trace_reg_lock();
	if (!type_find_locked(t->name) && nr_user_types < MAX_USER_TYPES) {
		user_types[nr_user_types++] =
			(struct type_info){ *t, NULL, pm__trace_generation_locked() };
		ret = 0;
	}
	pm__trace_reg_unlock();
	return ret;
}

/* ---- building a label ---- */

struct sbuf {
	char *p;
	size_t len, cap;
};

static __attribute__((format(printf, 2, 3))) void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->len >= b->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n : b->cap - 1;
}

/* ".field[i].sub" for the @size bytes at @off of a @t, nesting into struct fields. */
static void field_path(struct sbuf *b, const struct pm_trace_type *t, size_t off, size_t size,
		       int depth)
{
	const struct pm_trace_field *best = NULL, *before = NULL;
	bool holds = false;
	size_t rel;

	for (size_t i = 0; i < t->nr_fields; i++) {
		const struct pm_trace_field *f = &t->fields[i];
		bool h = off + size <= f->off + f->size;

		if (f->off <= off && (!before || f->off > before->off))
			before = f;
		if (off < f->off || off >= f->off + f->size)
			continue;
		if (!best || (h && !holds) || (h == holds && f->size < best->size)) {
			best = f;
			holds = h;
		}
	}
	if (!best) {
		if (before)
			sb_printf(b, ".%s+%zu", before->name, off - before->off);
		else
			sb_printf(b, "+%zu", off);
		return;
	}
	sb_printf(b, ".%s", best->name);
	rel = off - best->off;
	if (best->elem) {
		sb_printf(b, "[%zu]", rel / best->elem);
		rel %= best->elem;
	}
	if (best->type && depth < 4) {
		const struct type_info *sub = type_find_locked(best->type);

		if (sub && sub->t.fields) {
			field_path(b, &sub->t, rel, holds ? size : 1, depth + 1);
			rel = 0;
		}
	}
	if (rel)
		sb_printf(b, "+%zu", rel);
	if (!holds && depth == 0)
		sb_printf(b, " (and %zu bytes after)", off + size - (best->off + best->size));
}

static void describe_page(const void *obj, size_t index, char *buf, size_t len)
{
	const struct pm_page *page = obj;
	unsigned long flags = atomic_load_relaxed(&((struct pm_page *)page)->xflags);
	uintptr_t head = atomic_load_relaxed(&((struct pm_page *)page)->xcompound_head);
	unsigned order = atomic_load_relaxed(&((struct pm_page *)page)->xorder);
	const char *kind = flags & PGF(PG_hugetlb) ? "hugetlb " :
			   flags & PGF(PG_shmem)   ? "shmem " :
			   flags & PGF(PG_anon)	   ? "anonymous " : "";

	if (head & 1) {
		const struct pm_page *h = (const struct pm_page *)(head - 1);

		snprintf(buf, len, "tail of the folio at pfn %zu", (size_t)(index - (page - h)));
	} else if (flags & PGF(PG_table)) {
		static const char *const level[] = { "?", "PTE", "PMD", "PUD", "PGD" };
		int l = page->level;

		snprintf(buf, len, "a %s table", l >= 1 && l <= 4 ? level[l] : "?");
	} else if (flags & PGF(PG_zero)) {
		snprintf(buf, len, "the zero page");
	} else if (flags & PGF(PG_buddy)) {
		snprintf(buf, len, "free, a buddy block of order %u", order);
	} else if (flags & PGF(PG_pcp)) {
		snprintf(buf, len, "free, in a per-CPU cache");
	} else if (flags & PGF(PG_head) || order) {
		snprintf(buf, len, "head of an order-%u %sfolio%s", order, kind,
			 atomic_load_relaxed(&((struct pm_page *)page)->xpincount) > 0 ?
				 ", pinned" : "");
	} else if (atomic_load_relaxed(&((struct pm_page *)page)->xrefcount) > 0) {
		snprintf(buf, len, "a small %sfolio%s", kind,
			 folio_maybe_dma_pinned((const struct pm_folio *)page) ? ", pinned" : "");
	} else {
		snprintf(buf, len, "free");
	}
}

/* ---- globals from the ELF symbol tables ---- */

struct gsym {
	uintptr_t addr;
	size_t size;
	char *name;
	const char *file;	/* a static's source file, or NULL */
};

static struct gsym *gsyms;
static size_t nr_gsyms, cap_gsyms;
static bool gsyms_loaded;

static void gsym_add(uintptr_t addr, size_t size, const char *name, const char *file)
{
	if (nr_gsyms == cap_gsyms) {
		size_t ncap = cap_gsyms ? cap_gsyms * 2 : 4096;
		struct gsym *n = realloc(gsyms, ncap * sizeof(*n));

		if (!n)
			return;
		gsyms = n;
		cap_gsyms = ncap;
	}
	gsyms[nr_gsyms++] = (struct gsym){ addr, size, strdup(name), file };
}

/* The data symbols of one ELF file loaded at @bias: .symtab if it has one, else .dynsym. */
static void load_elf_symbols(const char *path, uintptr_t bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	const unsigned char *map;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh, *symtab = NULL;
	const char *file = NULL;

	if (fd < 0)
		return;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*eh)) {
		close(fd);
		return;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	eh = (const Elf64_Ehdr *)map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > (size_t)st.st_size)
		goto out;
	sh = (const Elf64_Shdr *)(map + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_SYMTAB || (sh[i].sh_type == SHT_DYNSYM && !symtab))
			symtab = &sh[i];
	if (!symtab || symtab->sh_link >= eh->e_shnum)
		goto out;
	{
		const Elf64_Shdr *strs = &sh[symtab->sh_link];
		const Elf64_Sym *sym = (const Elf64_Sym *)(map + symtab->sh_offset);
		size_t n = symtab->sh_size / sizeof(*sym);
		const char *str = (const char *)(map + strs->sh_offset);

		if (symtab->sh_offset + symtab->sh_size > (size_t)st.st_size ||
		    strs->sh_offset + strs->sh_size > (size_t)st.st_size)
			goto out;
		for (size_t i = 0; i < n; i++) {
			const char *name = sym[i].st_name < strs->sh_size ? str + sym[i].st_name : "";
			unsigned type = ELF64_ST_TYPE(sym[i].st_info);

			if (type == STT_FILE) {
				file = ELF64_ST_BIND(sym[i].st_info) == STB_LOCAL ? strdup(name) : NULL;
				continue;
			}
			if (type != STT_OBJECT || !sym[i].st_size || sym[i].st_shndx == SHN_UNDEF ||
			    !*name)
				continue;
			gsym_add(bias + sym[i].st_value, sym[i].st_size, name,
				 ELF64_ST_BIND(sym[i].st_info) == STB_LOCAL ? file : NULL);
		}
	}
out:
	munmap((void *)map, (size_t)st.st_size);
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";

	if (strstr(path, "linux-vdso") || strstr(path, "linux-gate"))
		return 0;
	load_elf_symbols(path, info->dlpi_addr);
	return 0;
}

static int gsym_cmp(const void *a, const void *b)
{
	const struct gsym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const struct gsym *gsym_find_locked(uintptr_t addr)
{
	size_t lo = 0, hi;

	if (!gsyms_loaded) {
		gsyms_loaded = true;
		dl_iterate_phdr(phdr_cb, NULL);
		qsort(gsyms, nr_gsyms, sizeof(*gsyms), gsym_cmp);
	}
	hi = nr_gsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (gsyms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The last symbol at or below @addr, or one before it that is larger and holds it. */
	for (size_t i = lo; i-- > 0 && lo - i <= 8;)
		if (addr < gsyms[i].addr + gsyms[i].size)
			return &gsyms[i];
	return NULL;
}

/* ---- the label ---- */

size_t pm_trace_label(uintptr_t addr, size_t size, uint64_t gen, char *buf, size_t len)
{
	struct sbuf b = { buf, 0, len };
	const struct pm_trace_region *r;
	const struct type_info *ti;
	const struct gsym *g;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (!size)
		size = 1;
	pm__trace_reg_lock();
	r = pm__trace_region_find_locked(addr, gen, NULL);
	ti = r ? region_type_locked(r) : NULL;
	if (ti) {
		size_t esize = ti->t.size ? ti->t.size : r->end - r->base;
		size_t index = (addr - r->base) / esize;
		size_t off = (addr - r->base) % esize;
		char desc[160] = "";
		const struct pm_trace_region *frames;

		sb_printf(&b, "%s", ti->t.display);
		if (r->end - r->base > esize) {
			if (ti->index_name)
				sb_printf(&b, "[%s %zu]", ti->index_name, index);
			else
				sb_printf(&b, "[%zu]", index);
		}
		if (ti->t.fields)
			field_path(&b, &ti->t, off, size, 0);
		else if (off)
			sb_printf(&b, "+%#zx", off);
		if (!ti->t.fields && off + size > esize)
			sb_printf(&b, " (and %zu bytes after)", off + size - esize);
		if (ti->t.describe)
			ti->t.describe((const char *)r->base + index * esize, index, desc,
				       sizeof(desc));
		else if (!strcmp(ti->t.name, "pm_page"))
			describe_page((const char *)r->base + index * esize, index, desc,
				      sizeof(desc));
		if (strcmp(ti->t.name, "frame") && strcmp(ti->t.name, "pm_page") &&
		    (frames = pm__trace_region_find_locked(addr, gen, "frame")) != NULL) {
			size_t l = strlen(desc);

			snprintf(desc + l, sizeof(desc) - l, "%spfn %zu", l ? ", " : "",
				 (size_t)((addr - frames->base) / PAGE_SIZE));
		}
		if (desc[0])
			sb_printf(&b, " (%s)", desc);
	} else if (r) {
		sb_printf(&b, "%s+%#zx", r->type_name, (size_t)(addr - r->base));
	} else if ((g = gsym_find_locked(addr)) != NULL) {
		sb_printf(&b, "%s", g->name);
		if (addr != g->addr)
			sb_printf(&b, "+%zu", (size_t)(addr - g->addr));
		if (g->file)
			sb_printf(&b, " (static in %s)", g->file);
	} else {
		sb_printf(&b, "unlabelled %#lx", (unsigned long)addr);
	}
	pm__trace_reg_unlock();
	return b.len;
}
