// SPDX-License-Identifier: MIT
/*
 * rcu.c - thread registration for liburcu, and the ThreadSanitizer stand-in (see rcu.h).
 *
 * The trace build (lib/trace.h) sees nothing of liburcu's write side, which is not
 * instrumented: call_rcu appends to the queue of the process's one call_rcu worker (an
 * exchange of the queue's tail that every caller shares), and synchronize_rcu takes the
 * grace-period mutex and flips the grace-period counter. There each of them also adds to a
 * stand-in word named for the tracer, so that two call_rcu show up in a trace as the conflict
 * they are on the machine. Other builds have no stand-ins.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <pinmm/machine.h>
#include "lib/atomic.h"
#include "lib/rcu.h"
#include "lib/trace.h"

#if !PM_TSAN
#include <urcu/list.h>
#endif

#if PM_TRACE
static _Atomic unsigned long urcu_call_rcu_queue __cacheline_aligned;
static _Atomic unsigned long urcu_grace_period __cacheline_aligned;
#define rcu_trace_write(word) ((void)atomic_add_relaxed(&(word), 1))
#else
#define rcu_trace_write(word) ((void)0)
#endif

__thread bool pm__rcu_registered;
#if PM_TSAN
_Atomic unsigned long pm__tsan_fence;
#endif
static pthread_key_t rcu_key;
static pthread_once_t rcu_once = PTHREAD_ONCE_INIT;

#if !PM_TSAN
/*
 * The threads pinmm registered with liburcu, for fork() (see "fork()" below): each thread's
 * entry lives in its own TLS; reader is NULL in a thread pinmm did not register. rcu_threads_lock covers the list, and is held around liburcu's
 * register and unregister calls and across fork() itself, so that no thread of the parent is
 * inside either when the child is made.
 */
struct rcu_thread {
	struct cds_list_head link;	/* in rcu_threads */
	struct urcu_reader *reader;	/* the thread's entry in liburcu's registry */
};
static __thread struct rcu_thread rcu_self;
static CDS_LIST_HEAD(rcu_threads);
static pthread_mutex_t rcu_threads_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

/* Registration, for both implementations: liburcu's reader registry, or nothing (TSan). */
static void rcu_thread_exit(void *arg)
{
	if (pm__rcu_registered) {
#if !PM_TSAN
		if (rcu_self.reader) {
			pthread_mutex_lock(&rcu_threads_lock);
			cds_list_del(&rcu_self.link);
			urcu_memb_unregister_thread();
			pthread_mutex_unlock(&rcu_threads_lock);
			rcu_self.reader = NULL;
		}
#endif
		pm__rcu_registered = false;
	}
}

static void rcu_key_init(void)
{
	if (pthread_key_create(&rcu_key, rcu_thread_exit))
		abort();
#if PM_TRACE
	pm__trace_object(&urcu_call_rcu_queue, sizeof(urcu_call_rcu_queue), "urcu_call_rcu_queue");
	pm__trace_object(&urcu_grace_period, sizeof(urcu_grace_period), "urcu_grace_period");
#endif
}

void pm__rcu_register_thread(void)
{
	pthread_once(&rcu_once, rcu_key_init);
#if !PM_TSAN
	/* liburcu registers its call_rcu workers itself: a callback there is a reader already
	 * (and must not wait for rcu_threads_lock, which a fork holds while it pauses them). */
	if (!URCU_TLS(urcu_memb_reader).registered) {
		pthread_mutex_lock(&rcu_threads_lock);
		urcu_memb_register_thread();
		rcu_self.reader = &URCU_TLS(urcu_memb_reader);
		cds_list_add(&rcu_self.link, &rcu_threads);
		pthread_mutex_unlock(&rcu_threads_lock);
	}
#endif
	pm__rcu_registered = true;
	/* Any non-NULL value makes the destructor run at thread exit. */
	pthread_setspecific(rcu_key, (void *)1);
}

#if !PM_TSAN

void pm_call_rcu(struct pm_rcu_head *head, void (*func)(struct pm_rcu_head *))
{
	pm_rcu_ensure_registered();
	rcu_trace_write(urcu_call_rcu_queue);
	urcu_memb_call_rcu(head, func);
}

void pm_synchronize_rcu(void)
{
	pm_rcu_ensure_registered();
	rcu_trace_write(urcu_grace_period);
	urcu_memb_synchronize_rcu();
}

void pm_rcu_barrier(void)
{
	pm_rcu_ensure_registered();
	rcu_trace_write(urcu_call_rcu_queue);
	urcu_memb_barrier();
}

/*
 * fork(). liburcu-memb asks that every reader registration be released before a fork without
 * exec; pinmm registers a thread at its first use and cannot release another thread's. So a
 * child inherits registry entries of threads it does not have, and two things go wrong there:
 * a grace period waits for ever on an entry whose thread was inside a read section at the
 * fork; and a new thread of the child (the call_rcu worker liburcu starts in it) gets a dead
 * thread's cached stack, so its TLS entry is the dead one's, still linked, and registering it
 * links it a second time: the registry becomes a cycle that synchronize_rcu walks for ever
 * with the registry lock held. Decision: the child drops those entries itself. Its handler
 * runs single-threaded, before liburcu starts the worker; no parent thread was inside
 * register or unregister (rcu_threads_lock is held across the fork), and liburcu's workers
 * are paused outside its registry (call_rcu_before_fork), so the registry is a well-formed
 * list and unlinking an entry touches only its neighbours. (liburcu-bp prunes its registry
 * after fork by design, but its grace periods poll in 10 ms sleeps, which pm_rcu_barrier()
 * on the allocator's retry path would pay.) Threads that registered with liburcu without
 * pinmm are the application's to release, as liburcu documents.
 *
 * The call_rcu workers: pause them before fork, resume them in the parent, and let the child
 * make a new one (liburcu's discipline, done here for the application).
 */
static void rcu_atfork_prepare(void)
{
	pthread_mutex_lock(&rcu_threads_lock);
	urcu_memb_call_rcu_before_fork();
}

static void rcu_atfork_parent(void)
{
	urcu_memb_call_rcu_after_fork_parent();
	pthread_mutex_unlock(&rcu_threads_lock);
}

static void rcu_atfork_child(void)
{
	struct rcu_thread *t, *tmp;

	cds_list_for_each_entry_safe(t, tmp, &rcu_threads, link) {
		if (t == &rcu_self)
			continue;
		cds_list_del(&t->reader->node);
		cds_list_del(&t->link);
	}
	pthread_mutex_init(&rcu_threads_lock, NULL);
	urcu_memb_call_rcu_after_fork_child();
}

#else /* PM_TSAN */

/*
 * The stand-in. Readers hold gp_lock shared (outermost section only); a grace period is one
 * write acquisition, which cannot succeed while any reader is inside. Callbacks queue on
 * cb_list and a helper thread runs them after a grace period. TSan sees the rwlock's
 * happens-before edges, which is the whole point.
 */
static pthread_rwlock_t gp_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t cb_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cb_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cb_done_cond = PTHREAD_COND_INITIALIZER;
static struct pm_rcu_head *cb_list;
static unsigned long cb_queued, cb_done;
static bool cb_thread_started, cb_busy; /* cb_busy: a batch is off cb_list, not yet done */
/* A fork child of a process that had the helper thread: TSan forbids new threads there, so
 * callbacks run inline, after a grace period, outside read sections. */
static bool cb_inline;
static __thread unsigned rcu_nesting;

void pm_rcu_read_lock(void)
{
	if (rcu_nesting++ == 0)
		pthread_rwlock_rdlock(&gp_lock);
}

void pm_rcu_read_unlock(void)
{
	if (--rcu_nesting == 0)
		pthread_rwlock_unlock(&gp_lock);
}

bool pm_rcu_read_ongoing(void)
{
	return rcu_nesting > 0;
}

void pm_synchronize_rcu(void)
{
	pthread_rwlock_wrlock(&gp_lock);
	pthread_rwlock_unlock(&gp_lock);
}

/*
 * Take the queued callbacks off cb_list and run them after a grace period, cb_mutex dropped
 * meanwhile (cb_busy says a batch is out). Called with cb_mutex held; returns with it held.
 */
static void cb_take_and_run(void)
{
	struct pm_rcu_head *list = cb_list;
	unsigned long n = 0;

	cb_list = NULL;
	cb_busy = true;
	pthread_mutex_unlock(&cb_mutex);
	pm_synchronize_rcu();
	while (list) {
		struct pm_rcu_head *next = list->next;

		list->func(list);
		list = next;
		n++;
	}
	pthread_mutex_lock(&cb_mutex);
	cb_done += n;
	cb_busy = false;
	pthread_cond_broadcast(&cb_done_cond);
}

static void *cb_thread(void *arg)
{
	pthread_mutex_lock(&cb_mutex);
	for (;;) {
		while (!cb_list)
			pthread_cond_wait(&cb_cond, &cb_mutex);
		cb_take_and_run();
	}
	return NULL;
}

/* Start the helper thread if this process has none (first use, or a fork child). */
static void cb_thread_start_locked(void)
{
	pthread_t t;
	pthread_attr_t attr;

	if (cb_thread_started)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, cb_thread, NULL))
		abort();
	pthread_attr_destroy(&attr);
	cb_thread_started = true;
}

/* Inline mode: run what is queued, after a grace period. Not inside a read section. */
static void cb_run_inline(void)
{
	pthread_mutex_lock(&cb_mutex);
	cb_take_and_run();
	pthread_mutex_unlock(&cb_mutex);
}

void pm_call_rcu(struct pm_rcu_head *head, void (*func)(struct pm_rcu_head *))
{
	head->func = func;
	if (cb_inline) {
		pthread_mutex_lock(&cb_mutex);
		head->next = cb_list;
		cb_list = head;
		cb_queued++;
		pthread_mutex_unlock(&cb_mutex);
		if (!rcu_nesting)
			cb_run_inline();
		return;
	}
	pthread_mutex_lock(&cb_mutex);
	cb_thread_start_locked();
	head->next = cb_list;
	cb_list = head;
	cb_queued++;
	pthread_cond_signal(&cb_cond);
	pthread_mutex_unlock(&cb_mutex);
}

void pm_rcu_barrier(void)
{
	if (cb_inline) {
		cb_run_inline();
		return;
	}
	pthread_mutex_lock(&cb_mutex);
	unsigned long target = cb_queued;

	if (cb_done < target)
		cb_thread_start_locked();
	while (cb_done < target)
		pthread_cond_wait(&cb_done_cond, &cb_mutex);
	pthread_mutex_unlock(&cb_mutex);
}

/*
 * fork(): only the forking thread goes on in the child. Before fork, wait until the helper
 * holds no batch (callbacks off cb_list would be lost) and keep cb_mutex; the child starts
 * with fresh locks (no reader of another thread is left, and the forking thread is in no read
 * section) and starts a new helper when it needs one - unless the parent had one: TSan does not
 * let a child of a multi-threaded process start threads, so that child runs callbacks inline.
 */
static void rcu_atfork_prepare(void)
{
	pthread_mutex_lock(&cb_mutex);
	while (cb_busy)
		pthread_cond_wait(&cb_done_cond, &cb_mutex);
}

static void rcu_atfork_parent(void)
{
	pthread_mutex_unlock(&cb_mutex);
}

static void rcu_atfork_child(void)
{
	pthread_rwlock_init(&gp_lock, NULL);
	pthread_mutex_init(&cb_mutex, NULL);
	pthread_cond_init(&cb_cond, NULL);
	pthread_cond_init(&cb_done_cond, NULL);
	cb_inline = cb_thread_started; /* the parent had threads: TSan allows no new one */
	cb_thread_started = false;
	cb_busy = false;
}

#endif /* PM_TSAN */

/* A process that uses pinmm may fork(), and the child may use pinmm: see the handlers above. */
__attribute__((constructor)) static void rcu_atfork_init(void)
{
	if (pthread_atfork(rcu_atfork_prepare, rcu_atfork_parent, rcu_atfork_child))
		abort();
}
