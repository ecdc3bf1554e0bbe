// SPDX-License-Identifier: MIT
/*
 * pmtest.c - the helpers of pmtest.h that run no TAP test (see there).
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include "pmtest.h"

#define PG ((unsigned long)PM_PAGE_SIZE)

/* ---- machines and address spaces ---- */

/* Create the machine @cfg describes, or bail out with errno in a diag. */
static struct pm_machine *machine_or_bail(const struct pm_config *cfg)
{
	struct pm_machine *m = pm_machine_create(cfg);

	if (!m)
		diag("pm_machine_create(%zu MiB, knobs %#x, %zu hugepages): errno %d",
		     cfg->mem_bytes >> 20, cfg->knobs, cfg->nr_hugepages, errno);
	ASSERT_TRUE(m != NULL);
	return m;
}

struct pm_machine *pmt_machine(size_t mib, unsigned knobs)
{
	return machine_or_bail(&(struct pm_config){ .mem_bytes = mib << 20, .knobs = knobs });
}

struct pm_machine *pmt_hmachine(size_t mib, size_t nr_huge)
{
	return machine_or_bail(&(struct pm_config){ .mem_bytes = mib << 20,
						    .nr_hugepages = nr_huge });
}

struct pm_mm *pmt_fork(struct pm_mm *mm)
{
	struct pm_mm *c = pm_mm_fork(mm);

	if (!c)
		diag("pm_mm_fork: NULL, errno %d", errno);
	ASSERT_TRUE(c != NULL);
	return c;
}

size_t pmt_setup(struct pm_machine **m, struct pm_mm **mm, size_t mib, unsigned knobs)
{
	size_t free0;

	*m = pmt_machine(mib, knobs);
	free0 = pm_machine_free_pages(*m);
	*mm = pm_mm_create(*m);
	ASSERT_TRUE(*mm != NULL);
	return free0;
}

/* ---- counters ---- */

struct pm_stats pmt_stats(struct pm_machine *m)
{
	struct pm_stats s;

	pm_machine_stats(m, &s);
	return s;
}

bool pmt_run_on(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return false;
	sched_yield();
	return sched_getcpu() == cpu;
}

size_t pmt_free_pages(struct pm_machine *m)
{
	pm_rcu_barrier();
	return pm_machine_free_pages(m);
}

size_t pmt_kept_tables(struct pm_machine *m)
{
	return 1 + 2 * (pm_machine_flags(m) == PM_MACHINE_RANGE_MM);
}

bool pmt_pins_balanced(struct pm_machine *m)
{
	struct pm_stats st = pmt_stats(m);

	if (st.nr_foll_pin_acquired != st.nr_foll_pin_released)
		diag("pins acquired %lu, released %lu", st.nr_foll_pin_acquired,
		     st.nr_foll_pin_released);
	return st.nr_foll_pin_acquired == st.nr_foll_pin_released;
}

/* ---- pages and folios ---- */

unsigned long pmt_pfn_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page *p = NULL;
	unsigned long pfn;

	if (pm_get_user_pages(mm, addr, 1, PM_FOLL_NOFAULT, &p) != 1)
		return ULONG_MAX;
	pfn = pm_page_to_pfn(p);
	pm_put_page(p);
	return pfn;
}

long pmt_nr_maps(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_map_info mi[64];
	long n = pm_mm_maps(mm, start, mi, 64), k = 0;

	for (long i = 0; i < n; i++)
		k += mi[i].start < end;
	return k;
}

struct pm_page *pmt_page_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page *page = NULL;

	ASSERT_EQ(pm_get_user_pages(mm, addr, 1, 0, &page), 1);
	pm_put_page(page);
	return page;
}

long pmt_order_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page *p;
	long r = pm_pin_user_pages(mm, addr, 1, 0, &p);
	unsigned order;

	if (r != 1)
		return r < 0 ? r : -1000;
	order = pm_folio_order(pm_page_folio(p));
	pm_unpin_user_page(p);
	return order;
}

struct pmt_snap *pmt_snapshot(struct pm_mm *mm, unsigned long addr, unsigned long npages)
{
	struct pmt_snap *s = calloc(npages, sizeof(*s));

	ASSERT_TRUE(s);
	for (unsigned long i = 0; i < npages; i++) {
		struct pm_page *page = pmt_page_at(mm, addr + i * PG);

		s[i].pfn = pm_page_to_pfn(page);
		s[i].folio = pm_page_folio(page);
		s[i].ref = pm_folio_ref_count(s[i].folio);
		s[i].pin = pm_folio_pincount(s[i].folio);
		s[i].dirty = pm_folio_test_dirty(s[i].folio);
	}
	return s;
}

bool pmt_counts_equal(const struct pmt_snap *s, unsigned long npages)
{
	for (unsigned long i = 0; i < npages; i++) {
		int ref = pm_folio_ref_count(s[i].folio), pin = pm_folio_pincount(s[i].folio);

		if (ref != s[i].ref || pin != s[i].pin) {
			diag("page %lu (pfn %#lx): ref %d pin %d, was ref %d pin %d", i, s[i].pfn,
			     ref, pin, s[i].ref, s[i].pin);
			return false;
		}
	}
	return true;
}

/* ---- mappings ---- */

long pmt_map_fixed(struct pm_mm *mm, unsigned long addr, size_t len, int prot)
{
	return pm_mmap(mm, addr, len, prot, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL,
		       0);
}

unsigned long pmt_map_anon(struct pm_mm *mm, size_t len, int prot, bool thp)
{
	long addr = pm_mmap(mm, 0, len, prot, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);

	ASSERT_TRUE(addr > 0);
	if (thp)
		ASSERT_EQ(pm_madvise(mm, addr, len, PM_MADV_HUGEPAGE), 0);
	return addr;
}

void pmt_touch(struct pm_mm *mm, unsigned long addr, size_t len)
{
	for (size_t off = 0; off < len; off += PG) {
		char c = (char)(off >> 12) | 1;

		ASSERT_EQ(pm_access(mm, addr + off, &c, 1, 1), 1);
	}
}

/* ---- page contents ---- */

uint64_t pmt_pattern(unsigned long addr, uint64_t seed)
{
	uint64_t x = (addr + 1) * 0x9e3779b97f4a7c15ULL ^ seed;

	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ULL;
}

void pmt_pattern_page(uint64_t *page, unsigned long addr, uint64_t seed)
{
	for (unsigned i = 0; i < PG / 8; i++)
		page[i] = pmt_pattern(addr + i * 8, seed);
}

bool pmt_fill(struct pm_mm *mm, unsigned long addr, unsigned long npages, uint64_t seed)
{
	uint64_t buf[PG / 8];

	for (unsigned long p = 0; p < npages; p++) {
		pmt_pattern_page(buf, addr + p * PG, seed);
		if (pm_access(mm, addr + p * PG, buf, PG, 1) != (long)PG)
			return false;
	}
	return true;
}

bool pmt_check(struct pm_mm *mm, unsigned long addr, unsigned long npages, uint64_t seed)
{
	uint64_t want[PG / 8], got[PG / 8];

	for (unsigned long p = 0; p < npages; p++) {
		pmt_pattern_page(want, addr + p * PG, seed);
		memset(got, 0x5a, sizeof(got));
		if (pm_access(mm, addr + p * PG, got, PG, 0) != (long)PG || memcmp(got, want, PG)) {
			diag("page %#lx does not hold its pattern", addr + p * PG);
			return false;
		}
	}
	return true;
}

bool pmt_reads_zero(struct pm_mm *mm, unsigned long addr, unsigned long npages)
{
	static const char zero[PM_PAGE_SIZE];
	char got[PM_PAGE_SIZE];

	for (unsigned long p = 0; p < npages; p++) {
		memset(got, 0x5a, sizeof(got));
		if (pm_access(mm, addr + p * PG, got, PG, 0) != (long)PG || memcmp(got, zero, PG))
			return false;
	}
	return true;
}

/*
 * A page is filled and compared word by word with relaxed atomics: the page may be a frame
 * that a device reads or writes through a pin while a CPU copies through its mapping
 * (pm_access), as hardware does it, and ThreadSanitizer must not take that for a race of
 * pinmm's.
 */
void pmt_fill_words(void *page, uint64_t v)
{
	uint64_t *w = page;

	for (unsigned long k = 0; k < PG / 8; k++)
		__atomic_store_n(&w[k], v, __ATOMIC_RELAXED);
}

bool pmt_page_all(const void *page, uint64_t v)
{
	const uint64_t *w = page;

	for (unsigned long k = 0; k < PG / 8; k++)
		if (__atomic_load_n(&w[k], __ATOMIC_RELAXED) != v)
			return false;
	return true;
}

uint64_t pmt_tag_word(uint32_t tag, unsigned long idx)
{
	return tag ? (uint64_t)tag << 32 | (uint32_t)idx : 0;
}

void pmt_fill_tag(void *page, uint32_t tag, unsigned long idx)
{
	pmt_fill_words(page, pmt_tag_word(tag, idx));
}

bool pmt_page_is(const void *page, uint32_t tag, unsigned long idx)
{
	return pmt_page_all(page, pmt_tag_word(tag, idx));
}

long pmt_put_tag(struct pm_mm *mm, unsigned long addr, unsigned long n, uint32_t tag,
		 unsigned long first)
{
	uint64_t buf[PG / 8];
	long done = 0;

	for (unsigned long i = 0; i < n; i++) {
		pmt_fill_tag(buf, tag, first + i);
		if (pm_access(mm, addr + i * PG, buf, PG, 1) != (long)PG)
			break;
		done++;
	}
	return done;
}

long pmt_bad_tag(struct pm_mm *mm, unsigned long addr, unsigned long n, uint32_t tag,
		 unsigned long first)
{
	uint64_t buf[PG / 8];
	long bad = 0;

	for (unsigned long i = 0; i < n; i++) {
		long r;

		memset(buf, 0x5a, sizeof(buf)); /* neither a tag word nor zero */
		r = pm_access(mm, addr + i * PG, buf, PG, 0);
		if (r != (long)PG || !pmt_page_is(buf, tag, first + i)) {
			if (!bad)
				diag("page %lu: access %ld, word0 %#llx, want %#llx", i, r,
				     (unsigned long long)buf[0],
				     (unsigned long long)pmt_tag_word(tag, first + i));
			bad++;
		}
	}
	return bad;
}

long pmt_bad_pin(struct pm_page **pages, unsigned long n, uint32_t tag, unsigned long first)
{
	long bad = 0;

	for (unsigned long i = 0; i < n; i++) {
		if (!pages[i] || !pmt_page_is(pm_page_address(pages[i]), tag, first + i)) {
			if (!bad && pages[i])
				diag("pinned page %lu: word0 %#llx, want %#llx", i,
				     *(unsigned long long *)pm_page_address(pages[i]),
				     (unsigned long long)pmt_tag_word(tag, first + i));
			bad++;
		}
	}
	return bad;
}

/* ---- threads ---- */

uint64_t pmt_mix(uint64_t a, uint64_t b)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);

	x ^= x >> 32;
	x *= 0xd6e8feb86659fd93ULL;
	return x ^ (x >> 32);
}

void pmt_error(atomic_long *errors, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (atomic_fetch_add(errors, 1) >= 10)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	diag("%s", msg);
}

void pmt_wait_until(double end, atomic_long *errors)
{
	while (tap_now() < end && !(errors && atomic_load(errors))) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
}

void pmt_gate_init(struct pmt_gate *g, unsigned nworkers)
{
	atomic_store(&g->pause, 0);
	atomic_store(&g->done, 0);
	ASSERT_EQ(pthread_barrier_init(&g->paused, NULL, nworkers + 1), 0);
	ASSERT_EQ(pthread_barrier_init(&g->resume, NULL, nworkers + 1), 0);
}

void pmt_gate_destroy(struct pmt_gate *g)
{
	pthread_barrier_destroy(&g->paused);
	pthread_barrier_destroy(&g->resume);
}

bool pmt_gate_pausing(struct pmt_gate *g)
{
	return atomic_load_explicit(&g->pause, memory_order_acquire);
}

bool pmt_gate_wait(struct pmt_gate *g)
{
	pthread_barrier_wait(&g->paused);
	pthread_barrier_wait(&g->resume);
	return !atomic_load(&g->done);
}

bool pmt_gate_point(struct pmt_gate *g)
{
	return pmt_gate_pausing(g) ? pmt_gate_wait(g) : true;
}

void pmt_gate_pause(struct pmt_gate *g)
{
	atomic_store_explicit(&g->pause, 1, memory_order_release);
	pthread_barrier_wait(&g->paused);
}

void pmt_gate_resume(struct pmt_gate *g, bool last)
{
	atomic_store(&g->pause, 0);
	if (last)
		atomic_store(&g->done, 1);
	pthread_barrier_wait(&g->resume);
}

/* ---- process fork watchdog ---- */

#if defined(__SANITIZE_ADDRESS__)
#define PMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PMT_ASAN 1
#endif
#endif

static uintptr_t runtime_lo[4], runtime_hi[4]; /* ASan's executable segments */
static unsigned nr_runtime;

#ifdef PMT_ASAN
static int runtime_segments(struct dl_phdr_info *info, size_t size, void *base)
{
	if (info->dlpi_addr != (uintptr_t)base)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum && nr_runtime < 4; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && ph->p_flags & PF_X) {
			runtime_lo[nr_runtime] = info->dlpi_addr + ph->p_vaddr;
			runtime_hi[nr_runtime++] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		}
	}
	return 1;
}
#endif

void pmt_fork_watchdog_init(void)
{
#ifdef PMT_ASAN
	Dl_info di;

	/* malloc is the runtime's own (its interceptor): the object that holds it is ASan. */
	if (!nr_runtime && dladdr((void *)malloc, &di) && di.dli_fbase)
		dl_iterate_phdr(runtime_segments, di.dli_fbase);
#endif
}

static bool in_runtime(uintptr_t pc)
{
	for (unsigned i = 0; i < nr_runtime; i++)
		if (pc >= runtime_lo[i] && pc < runtime_hi[i])
			return true;
	return false;
}

/*
 * Whether another thread of this process is blocked in a system call made from the runtime's
 * code: /proc/self/task/TID/syscall ends with the user pc of the call. System calls and string
 * functions that do not allocate only: this runs in a signal handler.
 */
static bool other_thread_in_runtime(void)
{
	char dents[4096];
	long n;
	int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
	bool found = false;

	if (dir < 0)
		return false;
	while (!found && (n = syscall(SYS_getdents64, dir, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n && !found;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type;
				 char name[]; } *d = (void *)(dents + off);
			char path[64], buf[256], *pc;
			ssize_t len;
			int fd;

			off += d->reclen;
			if (d->name[0] == '.' || atoi(d->name) == gettid())
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", d->name);
			fd = open(path, O_RDONLY);
			if (fd < 0)
				continue;
			len = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (len <= 0)
				continue;
			buf[len] = 0;
			pc = strrchr(buf, ' ');
			found = pc && in_runtime(strtoul(pc + 1, NULL, 16));
		}
	}
	close(dir);
	return found;
}

static void watchdog_alarm(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t pc = 0;

	(void)si;
#if defined(__x86_64__)
	pc = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	pc = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.pc;
#else
	(void)ctx;
#endif
	if (in_runtime(pc) || (nr_runtime && other_thread_in_runtime()))
		_exit(PMT_EXIT_RUNTIME_HANG);
	signal(sig, SIG_DFL);
#if !defined(__SANITIZE_THREAD__)
	/* Say where it hung; should the unwinder hang too, the next alarm ends it. (Not under
	 * TSan, which reports the unwinder's allocation in a signal handler.) */
	alarm(2);
	{
		void *bt[64];
		int n = backtrace(bt, 64);

		if (write(2, "# hung child's stack:\n", 22) == 22)
			backtrace_symbols_fd(bt, n, 2);
	}
#endif
	raise(sig);
}

void pmt_fork_watchdog(unsigned seconds)
{
	struct sigaction sa = { .sa_sigaction = watchdog_alarm, .sa_flags = SA_SIGINFO };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	alarm(seconds);
}

/*
 * Wait for the fork child @pid. One that its own alarm did not end within PMT_FORK_DEADLINE_S
 * is killed. Under TSan that is the runtime's hang: TSan holds a signal back until the thread
 * leaves the runtime, so a child stopped on the runtime allocator's lock never runs its
 * watchdog. Elsewhere it counts as hung, as the watchdog would have said.
 */
#define PMT_FORK_DEADLINE_S 60

static int fork_reap(pid_t pid)
{
	struct timespec now, end;
	int status = 0;
	pid_t r;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += PMT_FORK_DEADLINE_S;
	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)) {
			kill(pid, SIGKILL);
			ASSERT_EQ(waitpid(pid, &status, 0), pid);
#if defined(__SANITIZE_THREAD__)
			return W_EXITCODE(PMT_EXIT_RUNTIME_HANG, 0);
#else
			return SIGALRM; /* WIFSIGNALED, WTERMSIG() == SIGALRM */
#endif
		}
		usleep(1000);
	}
	ASSERT_EQ(r, pid);
	return status;
}

int pmt_fork_wait(void (*child)(void *arg), void *arg, long *retries, long max_retries)
{
	for (;;) {
		int status = 0;
		pid_t pid;

		fflush(NULL);
		pid = fork();
		ASSERT_TRUE(pid >= 0);
		if (pid == 0) {
			child(arg);
			_exit(3); /* a child that returns is a test bug */
		}
		status = fork_reap(pid);
		if (!pmt_fork_runtime_hung(status) || *retries >= max_retries)
			return status;
		++*retries;
	}
}

int pmt_longterm_start(struct pm_mm *mm, unsigned long addr, uint64_t size, uint32_t flags)
{
	struct pm_pin_longterm_test a = { .addr = addr, .size = size, .flags = flags };

	return pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_START, &a);
}

int pmt_longterm_read(struct pm_mm *mm, unsigned long dst)
{
	uint64_t d = dst;

	return pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_READ, &d);
}

int pmt_longterm_stop(struct pm_mm *mm)
{
	return pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_STOP, NULL);
}

unsigned pmt_page_kind(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page_info pi;

	ASSERT_EQ(pm_pagemap(mm, addr, 1, &pi), 1);
	return pi.flags & (PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_ZERO | PM_PAGE_THP);
}
