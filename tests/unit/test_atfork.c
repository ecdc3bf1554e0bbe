// SPDX-License-Identifier: MIT
/*
 * test_atfork.c - fork() of a process that uses pinmm (issue 13, defect 10). The child uses
 * pinmm: the machine it inherited and a new one, each until out of memory, which makes the
 * allocator wait for deferred frees (pm_rcu_barrier). Before the library's pthread_atfork
 * handlers, that barrier waited for ever for an RCU worker thread the child does not have.
 * The parent goes on using pinmm after the fork, too.
 *
 * test_machine_churn: children create machines while other threads of the parent create and
 * destroy theirs, and a third looks up a page that only the registry's search finds (a
 * never-used frame of the last of many machines: the search holds the lock over them all).
 * The registry has a process-global lock (mem/machine.c), which a child must never inherit
 * held by a thread it does not have.
 *
 * test_busy_allocator: the locks of a machine's allocator are held across the fork, as by a
 * thread the child lacks, while page-table frees of that machine wait in the RCU queue. The child inherits the
 * queue and the held locks; its grace periods and barrier must still end (mem/mem.c,
 * "fork_busy").
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"
#include "mem/mem.h"

#define MiB (1UL << 20)
#define PAGE PM_PAGE_SIZE
#define RW (PM_PROT_READ | PM_PROT_WRITE)

/* ThreadSanitizer: the child starts threads (RCU's helper); allow it. */
__attribute__((visibility("default"))) const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}

/* Map, touch and unmap @len (page tables go to RCU), then fill @m until out of memory. */
static int use_until_oom(struct pm_machine *m, const char *what)
{
	size_t free0 = (pm_rcu_barrier(), pm_machine_free_pages(m));
	struct pm_mm *mm = pm_mm_create(m);
	long a, r = 0;
	unsigned long off;

	if (!mm)
		return fprintf(stderr, "%s: pm_mm_create failed\n", what), 1;
	a = pm_mmap(mm, 0, 4 * MiB, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	if (a < 0)
		return fprintf(stderr, "%s: mmap %ld\n", what, a), 1;
	for (off = 0; off < 4 * MiB; off += PAGE)
		pm_access(mm, a + off, (char[1]){ 1 }, 1, 1);
	pm_munmap(mm, a, 4 * MiB);

	/* Page tables of many small mappings go to RCU on munmap; the fill then waits for them. */
	for (int i = 0; i < 64; i++) {
		a = pm_mmap(mm, (unsigned long)(i + 1) << 30, PAGE, RW,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0);
		if (a > 0)
			pm_access(mm, a, (char[1]){ 1 }, 1, 1);
		if (a > 0)
			pm_munmap(mm, a, PAGE);
	}
	a = pm_mmap(mm, 0, 64 * MiB, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	if (a < 0)
		return fprintf(stderr, "%s: mmap %ld\n", what, a), 1;
	for (off = 0; off < 64 * MiB; off += PAGE) {
		r = pm_access(mm, a + off, (char[1]){ 1 }, 1, 1);
		if (r != 1)
			break;
	}
	if (r != -ENOMEM)
		return fprintf(stderr, "%s: filling ended with %ld, not -ENOMEM\n", what, r), 1;
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	if (pm_machine_free_pages(m) != free0 || pm_machine_check(m))
		return fprintf(stderr, "%s: frames lost or check failed\n", what), 1;
	return 0;
}

static void child(struct pm_machine *inherited)
{
	struct pm_machine *m;
	int bad = 0;

	alarm(60); /* a hang is a failure, not a stuck test run */
	bad |= use_until_oom(inherited, "inherited machine");
	m = pmt_machine(8, 0);
	bad |= use_until_oom(m, "new machine");
	pm_machine_destroy(m);
	fflush(NULL);
	_exit(bad);
}

struct churn {
	pthread_t tid;
	atomic_int *stop;
	long rounds, errors;
	struct pm_page *page; /* the searcher's; NULL for a machine churner */
	unsigned long pfn;
};

enum { NR_IDLE = 256 }; /* machines before the searched one */

static void *search_fn(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(c->stop)) {
		if (pm_page_to_pfn(c->page) != c->pfn)
			c->errors++;
		c->rounds++;
	}
	return NULL;
}

/* Machines created, used (a counter block each) and destroyed, back to back. */
static void *machine_churn_fn(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(c->stop)) {
		struct pm_machine *m = pm_machine_create(&(struct pm_config){
			.mem_bytes = 4 * MiB });
		struct pm_mm *mm = m ? pm_mm_create(m) : NULL;
		long a = mm ? pm_mmap(mm, 0, PAGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0)
			    : -1;

		if (a < 0 || pm_access(mm, (unsigned long)a, (char[1]){ 1 }, 1, 1) != 1)
			c->errors++;
		pm_mm_destroy(mm);
		pm_machine_destroy(m);
		c->rounds++;
	}
	return NULL;
}

/* pm_machine_destroy() waits for a grace period, which a reader of the parent's, inside a
 * read section at the fork, must not hold up (lib/rcu.c, "fork()"). */
static void machine_churn_child(void *arg)
{
	struct pm_machine *m;
	struct pm_mm *mm;
	long a;

	(void)arg;
	pmt_fork_watchdog(10);
	m = pm_machine_create(&(struct pm_config){ .mem_bytes = 4 * MiB });
	mm = m ? pm_mm_create(m) : NULL;
	a = mm ? pm_mmap(mm, 0, PAGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0) : -1;
	if (a < 0 || pm_access(mm, (unsigned long)a, (char[1]){ 1 }, 1, 1) != 1)
		_exit(1);
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
	_exit(0);
}

static void test_machine_churn(void)
{
	struct pm_machine *idle[NR_IDLE + 1];
	struct churn c[3] = { 0 };
	atomic_int stop = 0;
	long forks = tap_scale(100), good = 0, hung = 0, runtime_hung = 0;

	pmt_fork_watchdog_init();
	for (int i = 0; i <= NR_IDLE; i++)
		idle[i] = pmt_machine(i < NR_IDLE ? 2 : 8, 0);
	c[2].pfn = 8 * MiB / PAGE - 1;
	c[2].page = pm_pfn_to_page(idle[NR_IDLE], c[2].pfn);
	ASSERT_TRUE(c[2].page);
	for (int i = 0; i < 3; i++) {
		c[i].stop = &stop;
		ASSERT_EQ(pthread_create(&c[i].tid, NULL, c[i].page ? search_fn : machine_churn_fn,
					 &c[i]), 0);
	}
	for (long i = 0; i < forks; i++) {
		/* A hang in ASan's allocator (pmtest.h) is forked again, a bounded number of times. */
		int status = pmt_fork_wait(machine_churn_child, NULL, &runtime_hung, forks);

		good += pmt_fork_good(status);
		hung += pmt_fork_hung(status);
		if (hung >= 2)
			break; /* failed already: each hang costs the alarm's 10 s */
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(c[i].tid, NULL);
	for (int i = 0; i <= NR_IDLE; i++)
		pm_machine_destroy(idle[i]);
	if (runtime_hung)
		diag("machine churn: %ld children hung in the sanitizer's allocator and were "
		     "forked again", runtime_hung);
	is_int(good, forks, "machine churn: %ld children created a machine while two threads "
	       "created and destroyed machines, a third searched (%ld hung)", forks, hung);
	is_int(c[0].errors + c[1].errors, 0, "machine churn: the parent's threads (%ld rounds)",
	       c[0].rounds + c[1].rounds);
	is_int(c[2].errors, 0, "machine churn: %ld searches found the page's machine",
	       c[2].rounds);
}

/*
 * The busy fork: a prepare handler that runs last, after the library's (registered first, by a
 * constructor ahead of the library's; prepare handlers run in the reverse order): liburcu's
 * worker is paused by then, so the page-table frees that its munmap queues are still queued
 * at the fork. It then takes every lock of the machine's allocator and keeps it in the child,
 * as a thread the child lacks would; the parent's handler gives them back.
 */
static struct {
	struct pm_mm *mm;	/* non-NULL: the next fork is the busy one */
	struct pm_machine *m;
} busy;

static void busy_locks(bool take)
{
	struct pm_machine *m = busy.m;

	for (unsigned c = 0; c < m->nr_cpus; c++)
		take ? pm_spin_lock(&m->pcp[c].lock) : pm_spin_unlock(&m->pcp[c].lock);
	for (unsigned z = 0; z < m->nr_zones; z++)
		take ? pm_spin_lock(&m->zones[z].lock) : pm_spin_unlock(&m->zones[z].lock);
}

static void busy_prepare(void)
{
	if (!busy.mm || PM_TSAN)
		return;
	for (int i = 0; i < 16; i++)
		pm_munmap(busy.mm, (unsigned long)(i + 1) << 30, PAGE);
	busy_locks(true);
}

static void busy_parent(void)
{
	if (busy.mm)
		busy_locks(false);
}

__attribute__((constructor(101))) static void busy_atfork_init(void)
{
	if (pthread_atfork(busy_prepare, busy_parent, NULL))
		abort();
}

static void busy_child(void *arg)
{
	struct pm_machine *m;

	(void)arg;
	pmt_fork_watchdog(10);
	pm_rcu_barrier(); /* the parent's queued frees: dropped, not spun on */
	m = pmt_machine(8, 0);
	if (use_until_oom(m, "a new machine beside a busy one"))
		_exit(1);
	pm_machine_destroy(m);
	fflush(NULL);
	_exit(0);
}

static void test_busy_allocator(void)
{
	struct pm_machine *m = pmt_machine(8, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long runtime_hung = 0, a;
	int status;

	if (PM_TSAN) {
		/* The stand-in's prepare holds its queue's lock: no handler after it can queue. */
		skip(4, "busy allocator: TSan's RCU stand-in (the callbacks are the same code)");
		pm_mm_destroy(mm);
		pm_machine_destroy(m);
		return;
	}
	pmt_fork_watchdog_init();
	ASSERT_TRUE(mm);
	/* Tables of many small mappings, which busy_prepare() unmaps. */
	for (int i = 0; i < 16; i++) {
		a = pm_mmap(mm, (unsigned long)(i + 1) << 30, PAGE, RW,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0);
		ASSERT_TRUE(a > 0);
		pmt_touch(mm, (unsigned long)a, PAGE);
	}
	busy.m = m;
	busy.mm = mm;
	status = pmt_fork_wait(busy_child, NULL, &runtime_hung, 0);
	busy.mm = NULL;
	ok(pmt_fork_good(status), "busy allocator: the child's barrier ended and it used a new "
	   "machine, with the parent's queued frees for a machine whose allocator's locks it "
	   "inherited held (status %#x%s)", status, pmt_fork_hung(status) ? ": hung" : "");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "busy allocator");
}

int main(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	int status = 0;
	long a;
	pid_t pid;

	plan_no_plan();
	ASSERT_TRUE(mm);
	/* Deferred frees are queued when fork comes: the RCU worker exists and has work. */
	for (int round = 0; round < 3; round++) {
		a = pm_mmap(mm, 0, 4 * MiB, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
		ASSERT_TRUE(a > 0);
		pmt_touch(mm, (unsigned long)a, 4 * MiB);
		ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 4 * MiB), 0);
		fflush(NULL);
		pid = fork();
		ASSERT_TRUE(pid >= 0);
		if (pid == 0)
			child(m);
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "fork %d: the child used pinmm until out of memory, twice (status %#x%s)", round,
		   status, WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? ": hung" : "");
	}
	ok(use_until_oom(m, "parent") == 0, "the parent uses pinmm after the forks");
	test_machine_churn();
	test_busy_allocator();
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, NULL);
	return done_testing();
}
