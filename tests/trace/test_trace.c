// SPDX-License-Identifier: MIT
/*
 * test_trace.c - the tracer's own tests (make check-trace, docs/tracer.md).
 *
 * This harness is not instrumented; the operations it traces are (trace_ops.c, and the
 * library itself in the last tests). Each test runs one operation on two threads between the
 * markers, each thread pinned to its own CPU where the machine has two, and checks what the
 * two logs say:
 *  1. a planted write to a shared word is a C1 and a C64 conflict, labelled with its field and
 *     its source line;
 *  2. each thread's write to a line of its own is no conflict; to its own word of one line, a
 *     C64 conflict only (false sharing);
 *  3. a compare-and-swap that fails on both threads is a write, so a conflict;
 *  4. two reads are no conflict;
 *  5. memset and memcpy are performed and recorded;
 *  6. the harness's own memset, the thread's stack and accesses past the buffer stay out of
 *     the log; every atomic operation is performed, with its flags; a pthread mutex taken
 *     by both threads is a conflict on it;
 *  7. the library's objects are labelled: two write faults in one PTE table conflict on the
 *     table's lock in its descriptor, and, without per-VMA locks, on mmap_lock; two grace
 *     periods conflict on liburcu's stand-in.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

/* src/lib/rcu.c: hidden, but this test links the archive. */
void pm_synchronize_rcu(void);

#include "lib/tap.h"
#include "trace/trace.h"
#include "trace/trace_ops.h"

static const struct pm_trace_field tto_fields[] = {
	PM_TRACE_FIELD(struct tto_obj, shared),
	PM_TRACE_FIELD(struct tto_obj, word),
	PM_TRACE_FIELD_ARRAY(struct tto_obj, own),
	PM_TRACE_FIELD_ARRAY(struct tto_obj, near),
	PM_TRACE_FIELD(struct tto_obj, buf),
	PM_TRACE_FIELD_ARRAY(struct tto_obj, dst),
	PM_TRACE_FIELD(struct tto_obj, counter),
	PM_TRACE_FIELD(struct tto_obj, mutex),
};
static const struct pm_trace_type tto_type = {
	"tto_obj", "struct tto_obj", sizeof(struct tto_obj), tto_fields,
	sizeof(tto_fields) / sizeof(tto_fields[0]), NULL,
};

/* ---- two threads between the markers ---- */

struct run {
	void (*op)(int t, void *arg);
	void *arg;
	struct pm_trace_log log[2];
	pthread_barrier_t start;
};

struct runner {
	struct run *r;
	int t;
};

static void run_on(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *runner(void *p)
{
	struct runner *w = p;

	run_on(w->t);
	pthread_barrier_wait(&w->r->start);
	pm_trace_begin();
	w->r->op(w->t, w->r->arg);
	pm_trace_end(&w->r->log[w->t]);
	return NULL;
}

static void run2(struct run *r)
{
	pthread_t th[2];
	struct runner w[2] = { { r, 0 }, { r, 1 } };

	pthread_barrier_init(&r->start, NULL, 2);
	for (int t = 0; t < 2; t++)
		ASSERT_TRUE(!pthread_create(&th[t], NULL, runner, &w[t]));
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&r->start);
}

static void run_free(struct run *r)
{
	pm_trace_log_free(&r->log[0]);
	pm_trace_log_free(&r->log[1]);
}

static long nconflicts(struct run *r, enum pm_trace_level level)
{
	struct pm_trace_conflict *c;
	long n = pm_trace_conflicts(&r->log[0], &r->log[1], level, &c);

	free(c);
	return n;
}

static uint64_t run_gen(const struct run *r)
{
	return r->log[0].gen < r->log[1].gen ? r->log[0].gen : r->log[1].gen;
}

/* The label of a conflict, as the report makes it: its first run of conflicting bytes. */
static void conflict_label(const struct run *r, const struct pm_trace_conflict *c, char *buf,
			   size_t len)
{
	unsigned off = (unsigned)(c->addr - c->line), n = 0;

	while (off + n < 64 && (c->mask >> (off + n) & 1))
		n++;
	pm_trace_label(c->addr, n, run_gen(r), buf, len);
}

/* The report of @r at @level, as a string (free it). */
static char *report(struct run *r, enum pm_trace_level level)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	pm_trace_report(f, &r->log[0], &r->log[1], level);
	fclose(f);
	return s;
}

static void diag_lines(const char *s)
{
	const char *p = s;

	while (p && *p) {
		const char *e = strchr(p, '\n');
		int len = e ? (int)(e - p) : (int)strlen(p);

		diag("%.*s", len, p);
		p = e ? e + 1 : NULL;
	}
}

static struct tto_obj *obj;

/* ---- 1. a planted write to a shared line ---- */

static void op_write_shared(int t, void *arg)
{
	tto_write_shared(obj, t + 1);
}

static void test_planted_write(void)
{
	struct run r = { .op = op_write_shared };
	struct pm_trace_conflict *c;
	long n;
	char label[256], want_line[64], *sites[2] = { 0 }, *rep;
	uintptr_t pcs[2];

	run2(&r);
	n = pm_trace_conflicts(&r.log[0], &r.log[1], PM_TRACE_C1, &c);
	is_int(n, 1, "planted write: one C1 conflict");
	if (n != 1) {
		free(c);
		run_free(&r);
		return;
	}
	ok(c[0].addr == (uintptr_t)&obj->shared, "planted write: at the shared word");
	ok((c[0].a.flags & PM_TRACE_WRITE) && (c[0].b.flags & PM_TRACE_WRITE) &&
		   c[0].a.size == 8 && c[0].b.size == 8,
	   "planted write: both sides are 8-byte writes");
	conflict_label(&r, &c[0], label, sizeof(label));
	ok(!strcmp(label, "struct tto_obj.shared"), "planted write: labelled '%s'", label);
	pcs[0] = c[0].a.pc;
	pcs[1] = c[0].b.pc;
	ok(pm_trace_symbolize(pcs, 2, sites) == 0, "planted write: addr2line ran");
	snprintf(want_line, sizeof(want_line), "trace_ops.c:%d", tto_write_shared_line);
	ok(sites[0] && strstr(sites[0], "tto_write_shared") && strstr(sites[0], want_line) &&
		   sites[1] && strstr(sites[1], want_line),
	   "planted write: both sites are %s (%s)", want_line, sites[0] ? sites[0] : "?");
	free(sites[0]);
	free(sites[1]);
	free(c);
	is_int(nconflicts(&r, PM_TRACE_C64), 1, "planted write: one C64 conflict");
	rep = report(&r, PM_TRACE_C1);
	ok(rep && strstr(rep, "struct tto_obj.shared") && strstr(rep, want_line),
	   "planted write: the report names the field and the line");
	diag_lines(rep);
	free(rep);
	run_free(&r);
}

/* ---- 2. per-thread writes ---- */

static void op_write_own(int t, void *arg)
{
	tto_write_own(obj, t, t + 1);
}

static void op_write_near(int t, void *arg)
{
	tto_write_near(obj, t, t + 1);
}

static void test_per_thread_write(void)
{
	struct run r = { .op = op_write_own };
	struct pm_trace_conflict *c;
	char label[256];
	long n;

	run2(&r);
	ok(r.log[0].n >= 1 && r.log[1].n >= 1, "own line: each thread recorded its write");
	is_int(nconflicts(&r, PM_TRACE_C1), 0, "own line: no C1 conflict");
	is_int(nconflicts(&r, PM_TRACE_C64), 0, "own line: no C64 conflict");
	run_free(&r);

	r = (struct run){ .op = op_write_near };
	run2(&r);
	is_int(nconflicts(&r, PM_TRACE_C1), 0, "own word of one line: no C1 conflict");
	n = pm_trace_conflicts(&r.log[0], &r.log[1], PM_TRACE_C64, &c);
	is_int(n, 1, "own word of one line: one C64 conflict (false sharing)");
	if (n == 1) {
		conflict_label(&r, &c[0], label, sizeof(label));
		ok(!strcmp(label, "struct tto_obj.near[0]"), "false sharing: labelled '%s'",
		   label);
	}
	free(c);
	run_free(&r);
}

/* ---- 3. a failed compare-and-swap ---- */

static bool cas_result[2];

static void op_cas_fail(int t, void *arg)
{
	cas_result[t] = tto_cas_fail(obj);
}

static void test_failed_cas(void)
{
	struct run r = { .op = op_cas_fail };
	struct pm_trace_conflict *c;
	char label[256];
	long n;

	atomic_store(&obj->word, 0);
	run2(&r);
	ok(!cas_result[0] && !cas_result[1] && atomic_load(&obj->word) == 0,
	   "failed CAS: both failed, the word is unchanged");
	n = pm_trace_conflicts(&r.log[0], &r.log[1], PM_TRACE_C1, &c);
	is_int(n, 1, "failed CAS: a C1 conflict");
	if (n == 1) {
		unsigned want = PM_TRACE_WRITE | PM_TRACE_ATOMIC | PM_TRACE_RMW | PM_TRACE_CAS_FAILED;

		ok(c[0].addr == (uintptr_t)&obj->word && (c[0].a.flags & want) == want &&
			   (c[0].b.flags & want) == want,
		   "failed CAS: both sides are failed CASes on the word, recorded as writes");
		conflict_label(&r, &c[0], label, sizeof(label));
		ok(!strcmp(label, "struct tto_obj.word"), "failed CAS: labelled '%s'", label);
	}
	free(c);
	run_free(&r);
}

/* ---- 4. read-read ---- */

static long read_result[2];

static void op_read_shared(int t, void *arg)
{
	read_result[t] = tto_read_shared(obj);
}

static void test_read_read(void)
{
	struct run r = { .op = op_read_shared };
	bool saw[2] = { false, false };

	obj->shared = 42;
	run2(&r);
	for (int t = 0; t < 2; t++)
		for (size_t i = 0; i < r.log[t].n; i++)
			if (r.log[t].acc[i].addr == (uintptr_t)&obj->shared &&
			    !(r.log[t].acc[i].flags & PM_TRACE_WRITE))
				saw[t] = true;
	ok(saw[0] && saw[1] && read_result[0] == 42 && read_result[1] == 42,
	   "read-read: both reads recorded and performed");
	is_int(nconflicts(&r, PM_TRACE_C1), 0, "read-read: no C1 conflict");
	is_int(nconflicts(&r, PM_TRACE_C64), 0, "read-read: no C64 conflict");
	run_free(&r);
}

/* ---- 5. memset and memcpy ---- */

static void op_mem(int t, void *arg)
{
	if (t == 0)
		tto_memset(obj, 0x5a);
	else
		tto_memcpy(obj, 1);
}

static bool has_access(const struct pm_trace_log *log, const void *p, uint32_t size,
		       unsigned flags)
{
	for (size_t i = 0; i < log->n; i++)
		if (log->acc[i].addr == (uintptr_t)p && log->acc[i].size == size &&
		    log->acc[i].flags == flags)
			return true;
	return false;
}

static void test_memfn(void)
{
	struct run r = { .op = op_mem };
	struct pm_trace_log log;
	struct pm_trace_conflict *c;
	char label[256];
	bool filled = true, copied = true;
	long n;

	memset(obj->buf, 0, sizeof(obj->buf));
	run2(&r);
	for (size_t i = 0; i < sizeof(obj->buf); i++)
		filled &= obj->buf[i] == 0x5a;
	ok(filled, "memset: performed");
	ok(has_access(&r.log[0], obj->buf, 64, PM_TRACE_WRITE | PM_TRACE_MEMFN),
	   "memset: recorded as a 64-byte write");
	ok(has_access(&r.log[1], obj->buf, 64, PM_TRACE_MEMFN) &&
		   has_access(&r.log[1], obj->dst[1], 64, PM_TRACE_WRITE | PM_TRACE_MEMFN),
	   "memcpy: recorded as a 64-byte read and a 64-byte write");
	n = pm_trace_conflicts(&r.log[0], &r.log[1], PM_TRACE_C1, &c);
	is_int(n, 1, "memset x memcpy of its bytes: one C1 conflict");
	if (n == 1) {
		conflict_label(&r, &c[0], label, sizeof(label));
		ok(c[0].mask == ~0ULL && !strcmp(label, "struct tto_obj.buf"),
		   "memset x memcpy: all 64 bytes of '%s'", label);
	}
	free(c);
	run_free(&r);

	pm_trace_begin();
	tto_memcpy(obj, 0);
	pm_trace_end(&log);
	for (size_t i = 0; i < sizeof(obj->buf); i++)
		copied &= obj->dst[0][i] == 0x5a;
	ok(copied && log.n == 2, "memcpy: performed (%zu accesses)", log.n);
	pm_trace_log_free(&log);
}

/* ---- 6. what stays out, and the atomics ---- */

struct overflow {
	long heap[16];
	struct pm_trace_log log;
};

/* A new thread, so that its buffer is made with PINMM_TRACE_ENTRIES=4. */
static void *overflow_thread(void *p)
{
	struct overflow *o = p;

	pm_trace_begin();
	tto_fill(o->heap, 16);
	pm_trace_end(&o->log);
	return NULL;
}

static void test_left_out(void)
{
	struct pm_trace_log log;
	struct overflow *ov = calloc(1, sizeof(*ov));
	long *heap = ov->heap;
	volatile size_t len = 64;
	unsigned char *hbuf = malloc(64);
	pthread_t th;
	size_t rmw = 0, failed = 0, loads = 0, stores = 0;
	long atomics;

	pm_trace_begin();
	memset(hbuf, 1, len);
	pm_trace_end(&log);
	is_int(log.n, 0, "the harness's own memset between the markers is not recorded");
	pm_trace_log_free(&log);

	pm_trace_begin();
	tto_fill(heap, 16);
	pm_trace_end(&log);
	is_int(log.n, 16, "an instrumented fill of a heap array: 16 writes");
	pm_trace_log_free(&log);

	pm_trace_begin();
	tto_stack_only(3);
	pm_trace_end(&log);
	is_int(log.n, 0, "the same fill of an array on the thread's stack: nothing");
	pm_trace_log_free(&log);

	setenv("PINMM_TRACE_ENTRIES", "4", 1);
	ASSERT_TRUE(!pthread_create(&th, NULL, overflow_thread, ov));
	pthread_join(th, NULL);
	unsetenv("PINMM_TRACE_ENTRIES");
	ok(ov->log.n == 4 && ov->log.dropped == 12, "a full buffer keeps 4, counts 12 dropped");
	pm_trace_log_free(&ov->log);

	pm_trace_begin();
	atomics = tto_atomics(obj);
	pm_trace_end(&log);
	is_int(atomics, 1171007, "every atomic operation performed");
	for (size_t i = 0; i < log.n; i++) {
		unsigned f = log.acc[i].flags;

		if (log.acc[i].addr != (uintptr_t)&obj->counter || !(f & PM_TRACE_ATOMIC))
			continue;
		rmw += !!(f & PM_TRACE_RMW);
		failed += !!(f & PM_TRACE_CAS_FAILED);
		loads += !(f & PM_TRACE_WRITE);
		stores += (f & (PM_TRACE_WRITE | PM_TRACE_RMW)) == PM_TRACE_WRITE;
	}
	ok(rmw == 8 && failed == 1 && loads == 2 && stores == 1 && log.fences == 1,
	   "atomics: 8 RMWs (1 failed CAS), 2 loads, 1 store, 1 fence (%zu %zu %zu %zu %zu)", rmw,
	   failed, loads, stores, log.fences);
	pm_trace_log_free(&log);
	free(hbuf);
	free(ov);
}

static void op_lock(int t, void *arg)
{
	tto_lock(obj);
}

static void test_mutex(void)
{
	struct run r = { .op = op_lock };
	struct pm_trace_conflict *c;
	char label[256];
	long n;

	run2(&r);
	n = pm_trace_conflicts(&r.log[0], &r.log[1], PM_TRACE_C1, &c);
	is_int(n, 1, "pthread mutex taken on both threads: a C1 conflict");
	if (n == 1) {
		conflict_label(&r, &c[0], label, sizeof(label));
		ok(!strncmp(label, "struct tto_obj.mutex", 20) && (c[0].a.flags & PM_TRACE_RMW),
		   "pthread mutex: an RMW of '%s'", label);
	}
	free(c);
	run_free(&r);
}

static void op_lock_section(int t, void *arg)
{
	tto_lock_section(obj, t, 10 * t);
}

/* The lock events: the mutex's section holds the two words written inside it, no more. */
static void test_lock_section(void)
{
	struct run r = { .op = op_lock_section };

	run2(&r);
	for (int t = 0; t < 2; t++) {
		const struct pm_trace_log *l = &r.log[t];
		size_t in = 0;

		for (size_t i = l->nlocks == 2 ? l->locks[0].pos : l->n;
		     l->nlocks == 2 && i < l->locks[1].pos; i++)
			in += l->acc[i].addr - (uintptr_t)&obj->own[t] < sizeof(obj->own[t]) &&
			      (l->acc[i].flags & PM_TRACE_WRITE) ? l->acc[i].size : 0;
		ok(l->nlocks == 2 && l->locks[0].lock == (uintptr_t)&obj->mutex &&
		   l->locks[0].flags == (PM_TRACE_LOCK_ACQUIRE | PM_TRACE_LOCK_EXCL) &&
		   l->locks[1].lock == (uintptr_t)&obj->mutex &&
		   l->locks[1].flags == PM_TRACE_LOCK_RELEASE,
		   "lock section %d: the mutex's acquisition and release recorded (%zu events)", t,
		   l->nlocks);
		is_int((long)in, 16, "lock section %d: the bytes of the two writes inside it, between "
		       "them (the compiler may merge them)", t);
	}
	run_free(&r);
}

/*
 * Every acquisition in @l has its release, in order (the library's spinlocks and rwsems mark
 * both); count the exclusive and the shared ones.
 */
static bool locks_balanced(const struct pm_trace_log *l, int *excl, int *shared)
{
	int depth = 0;

	*excl = *shared = 0;
	for (size_t i = 0; i < l->nlocks; i++) {
		const struct pm_trace_lock_event *e = &l->locks[i];

		if (i && e->pos < l->locks[i - 1].pos)
			return false;
		if (e->flags & PM_TRACE_LOCK_ACQUIRE) {
			depth++;
			*excl += !!(e->flags & PM_TRACE_LOCK_EXCL);
			*shared += !(e->flags & PM_TRACE_LOCK_EXCL);
		} else if (--depth < 0) {
			return false;
		}
	}
	return depth == 0;
}

/* ---- 7. the library's objects ---- */

struct fault_arg {
	struct pm_mm *mm;
	unsigned long base;
	int err[2];
};

static void op_fault(int t, void *arg)
{
	struct fault_arg *fa = arg;

	fa->err[t] = pm_fault(fa->mm, fa->base + (unsigned long)t * PM_PAGE_SIZE, PM_FAULT_WRITE);
}

/* Does some C1 conflict of @r have a label with both @s1 and @s2 in it? */
static bool conflict_named(struct run *r, const char *s1, const char *s2, char *found, size_t len)
{
	struct pm_trace_conflict *c;
	long n = pm_trace_conflicts(&r->log[0], &r->log[1], PM_TRACE_C1, &c);
	bool hit = false;

	for (long i = 0; i < n && !hit; i++) {
		conflict_label(r, &c[i], found, len);
		hit = strstr(found, s1) && strstr(found, s2);
	}
	free(c);
	return hit;
}

static void test_library_labels(unsigned knobs, const char *what, const char *s1,
				const char *s2)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .knobs = knobs,
				 .flags = PM_MACHINE_LINUX_MM };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *mm = m ? pm_mm_create(m) : NULL;
	struct fault_arg fa = { .mm = mm };
	struct run r = { .op = op_fault, .arg = &fa };
	char found[256] = "";
	long addr;
	char *rep;
	bool own;

	ASSERT_TRUE(mm != NULL);
	addr = pm_mmap(mm, 0, 4 * PM_PAGE_SIZE, PM_PROT_READ | PM_PROT_WRITE,
		       PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ASSERT_TRUE(addr > 0);
	fa.base = (unsigned long)addr;
	/* The PTE table exists before the run: both faults fill entries of one table. */
	ASSERT_EQ(pm_fault(mm, fa.base + 3 * PM_PAGE_SIZE, PM_FAULT_WRITE), 0);
	run2(&r);
	ok(fa.err[0] == 0 && fa.err[1] == 0 && r.log[0].dropped == 0 && r.log[1].dropped == 0,
	   "%s: both faults done, nothing dropped (%zu, %zu accesses)", what, r.log[0].n,
	   r.log[1].n);
	ok(conflict_named(&r, s1, s2, found, sizeof(found)), "%s: a conflict on %s...%s ('%s')",
	   what, s1, s2, found);
	own = conflict_named(&r, "static in registry.c", "", found, sizeof(found)) ||
	      conflict_named(&r, "static in labels.c", "", found, sizeof(found)) ||
	      conflict_named(&r, "static in runtime.c", "", found, sizeof(found));
	ok(!own, "%s: none on the tracer's own data%s%s", what, own ? ": " : "", own ? found : "");
	for (int t = 0; t < 2; t++) {
		int excl, shared;
		bool bal = locks_balanced(&r.log[t], &excl, &shared);

		ok(bal && excl >= 1 && (shared >= 1 || !(knobs & PM_KNOB_NO_PER_VMA_LOCK)),
		   "%s: thread %d's lock sections balanced, %d exclusive (the PTE table's lock), "
		   "%d shared (mmap_lock without per-VMA locks)", what, t, excl, shared);
	}
	rep = report(&r, PM_TRACE_C1);
	diag_lines(rep);
	free(rep);
	run_free(&r);
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
}

static void op_synchronize_rcu(int t, void *arg)
{
	pm_synchronize_rcu();
}

static void test_rcu_stand_in(void)
{
	struct run r = { .op = op_synchronize_rcu };
	char found[256] = "";

	run2(&r);
	ok(conflict_named(&r, "liburcu grace period", "stand-in", found, sizeof(found)),
	   "synchronize_rcu on both threads: a conflict on '%s'", found);
	run_free(&r);
}

int main(void)
{
	obj = aligned_alloc(64, sizeof(*obj));
	ASSERT_TRUE(obj != NULL);
	memset(obj, 0, sizeof(*obj));
	pthread_mutex_init(&obj->mutex, NULL);
	ASSERT_EQ(pm_trace_type_register(&tto_type), 0);
	pm_trace_register(obj, sizeof(*obj), "tto_obj");

	test_planted_write();
	test_per_thread_write();
	test_failed_cas();
	test_read_read();
	test_memfn();
	test_left_out();
	test_mutex();
	test_lock_section();
	test_library_labels(0, "faults in one PTE table", "struct pm_page[pfn ",
			    "ptl (a PTE table)");
	test_library_labels(PM_KNOB_NO_PER_VMA_LOCK, "faults under mmap_lock",
			    "struct pm_mm_range.lock", "xcount");
	test_rcu_stand_in();
	free(obj);
	return done_testing();
}
