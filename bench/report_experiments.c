// SPDX-License-Identifier: MIT
/*
 * report_experiments.c - the table of experiments `pinmm-bench report` runs, in the table's
 * order: each one's configurations (the cases, variants, knobs, modes and designs it runs),
 * the views the table shows of it, and the metrics that show its mechanism at work. report.c
 * runs them and fills in their results. A new experiment is an entry here and
 * REPORT_NR_EXPERIMENTS (report.h) one higher.
 */
#include "report.h"

#define CLASSIC(n, title_)							\
	{									\
		.id = #n, .title = title_, .scale = true,			\
		.cfg = { [CFG_AFTER] = { #n }, [CFG_HOST] = { "host_" #n },	\
			 [CFG_PROC] = { #n, NULL, NULL, "processes" },		\
			 [CFG_RANGE] = { #n, NULL, NULL, NULL, "range" } },	\
		.views = { { #n, "will-it-scale classic (no seed figure)", METRIC_OPS } }, \
	}

/* The fault classics: before is every fault under mmap_lock (Linux before 6.4). */
#define FAULT_CLASSIC(n, title_)						\
	{									\
		.id = #n, .title = title_, .scale = true,			\
		.cfg = { [CFG_BEFORE] = { #n, NULL, "before" }, [CFG_AFTER] = { #n },	\
			 [CFG_HOST] = { "host_" #n },				\
			 [CFG_PROC] = { #n, NULL, NULL, "processes" },		\
			 [CFG_RANGE] = { #n, NULL, NULL, NULL, "range" } },	\
		.views = { { #n, "will-it-scale; Linux 6.4 per-VMA locks", METRIC_OPS } }, \
		.evidence = "vma_lock_share",					\
	}

struct report_experiment report_experiments[] = {
	{
		.id = "pin_fast",
		.title = "pin_user_pages_fast from every thread of one mm (2021)",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "pin_fast", NULL, "before" },
			[CFG_AFTER] = { "pin_fast", NULL, "after" },
			[CFG_HOST] = { "host_pin_fast" },
		},
		.views = { { "pin_fast", "25.6k -> 1.19M ops/s, 256 thr (46.7x)", METRIC_OPS,
			     2.0 } },
		.evidence = "has_pinned_writes",
	},
	{
		.id = "gup_fast",
		.title = "64-page direct-I/O pins against an mmap/munmap writer (2008)",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "gup_fast", "churn", "before" },
			[CFG_AFTER] = { "gup_fast", "churn", "after" },
			[CFG_HOST] = { "host_gup_fast", "churn" },
			[CFG_RANGE] = { "gup_fast", "churn", "after", NULL, "range" },
		},
		.views = { { "gup_fast +churn", "DB2 OLTP +9.8%, fast_gup_slow = 0", METRIC_OPS,
			     1.0, true } },
		.evidence = "gup_slow_pages,gup_fast_fallbacks",
	},
	{
		.id = "gup_fast_nochurn",
		.title = "64-page direct-I/O pins, no writer",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "gup_fast", "nochurn", "before" },
			[CFG_AFTER] = { "gup_fast", "nochurn", "after" },
			[CFG_HOST] = { "host_gup_fast", "nochurn" },
		},
		.views = { { "gup_fast no writer", "(readers only: mmap_lock cacheline)",
			     METRIC_OPS } },
	},
	{
		.id = "mr_reg_thp",
		.shrinks = true,
		.title = "register + deregister 1 GiB, THP (2020 batched / range unpin)",
		.cfg = {
			[CFG_BEFORE] = { "mr_reg", "thp", "before" },
			[CFG_V1] = { "mr_reg", "thp-batch", "after" },
			[CFG_AFTER] = { "mr_reg", "thp", "after" },
			[CFG_HOST] = { "host_mr_reg", "thp" },
		},
		.views = {
			{ "mr_reg THP release v2", "per-page -> range unpin", METRIC_RELEASE_USEC,
			  20.0 },
			{ "mr_reg THP round v2", "hugetlbfs 10748 -> 3652 us/round (2.9x)",
			  METRIC_ROUND_USEC },
			{ "mr_reg THP round v1", "hugetlbfs 10748 -> 4664 us/round (2.3x)",
			  METRIC_ROUND_USEC, 0, false, CFG_V1 },
		},
		.evidence = "unpin_folio_updates_per_round",
	},
	{
		.id = "mr_reg_4k",
		.shrinks = true,
		.title = "register + deregister 1 GiB, 4 KiB pages",
		.cfg = {
			[CFG_BEFORE] = { "mr_reg", "4k", "before" },
			[CFG_V1] = { "mr_reg", "4k-batch", "after" },
			[CFG_AFTER] = { "mr_reg", "4k", "after" },
			[CFG_HOST] = { "host_mr_reg", "4k" },
		},
		.views = {
			{ "mr_reg 4k release v2", "(no seed figure: nothing to batch)",
			  METRIC_RELEASE_USEC },
			{ "mr_reg 4k round v2", "(no seed figure)", METRIC_ROUND_USEC },
		},
	},
	{
		.id = "mr_reg_hugetlb",
		.shrinks = true,
		.title = "register + deregister 1 GiB, hugetlb (the seed's backing)",
		.cfg = {
			[CFG_BEFORE] = { "mr_reg", "hugetlb", "before" },
			[CFG_V1] = { "mr_reg", "hugetlb-batch", "after" },
			[CFG_AFTER] = { "mr_reg", "hugetlb", "after" },
			[CFG_HOST] = { "host_mr_reg", "hugetlb" },
		},
		.views = {
			{ "mr_reg hugetlb round v2", "hugetlbfs 10748 -> 3652 us/round (2.9x)",
			  METRIC_ROUND_USEC },
			{ "mr_reg hugetlb round v1", "hugetlbfs 10748 -> 4664 us/round (2.3x)",
			  METRIC_ROUND_USEC, 0, false, CFG_V1 },
			{ "mr_reg hugetlb release v2", "per-page -> range unpin",
			  METRIC_RELEASE_USEC },
		},
		.evidence = "unpin_folio_updates_per_round",
	},
	{
		.id = "shmem_fault",
		.title = "shmem faults, disjoint slices of one object (2010)",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "shmem_fault", "disjoint", "before" },
			[CFG_AFTER] = { "shmem_fault", "disjoint", "after" },
			[CFG_HOST] = { "host_shmem_fault", "disjoint" },
		},
		.views = { { "shmem_fault disjoint", "~20 s -> ~12 s, 64 CPUs (1.67x)",
			     METRIC_AREA_SEC, 1.0 } },
		.evidence = "shmem_locks_per_alloc",
	},
	{
		.id = "shmem_fault_whole",
		.title = "shmem faults, every task touches every page (the reviewer's variant)",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "shmem_fault", "whole", "before" },
			[CFG_AFTER] = { "shmem_fault", "whole", "after" },
			[CFG_HOST] = { "host_shmem_fault", "whole" },
		},
		.views = { { "shmem_fault whole", "1 GiB: ~78 s -> 14.6..76 s (unstable)",
			     METRIC_AREA_SEC } },
	},
	{
		.id = "fault_churn",
		.title = "anonymous faults beside an mmap/munmap writer of the same mm (6.4)",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "fault_churn", NULL, "before" },
			[CFG_AFTER] = { "fault_churn", NULL, "after" },
		},
		.views = { { "fault_churn", "per-VMA locks: faults skip mmap_lock", METRIC_OPS,
			     1.0 } },
		.evidence = "vma_lock_share,churn_pairs",
	},
	{
		.id = "longterm_frag",
		.title = "long-term pins scattered over the movable zone, then compaction (5.13)",
		.cfg = {
			[CFG_BEFORE] = { "longterm_frag", NULL, "before" },
			[CFG_AFTER] = { "longterm_frag", NULL, "after" },
		},
		.views = { { "longterm_frag", "FOLL_LONGTERM pins leave ZONE_MOVABLE first",
			     METRIC_FREE_BLOCKS } },
		.evidence = "free_block_pct_d1,free_block_pct_d4,free_block_pct_d16,"
			    "free_block_pct_d64",
	},
	{
		.id = "migrate_gup",
		.title = "GUP-fast pins of a range another thread migrates (no stale frame)",
		.scale = true,
		.cfg = {
			[CFG_AFTER] = { "migrate_gup" },
			[CFG_RANGE] = { "migrate_gup", NULL, NULL, NULL, "range" },
		},
		.views = { { "migrate_gup", "(pins checked against the mapping)", METRIC_OPS } },
		.evidence = "migrations_per_sec,folios_moved_per_sec,refused_pinned_per_sec,"
			    "gup_fast_fallbacks_per_sec",
	},
	{
		.id = "pin_hot_same",
		.title = "pins of one page of one shared THP from every thread",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "pin_hot", "same", "before", NULL, "range" },
			[CFG_AFTER] = { "pin_hot", "same", NULL, NULL, "range" },
		},
		.views = { { "pin_hot same", "hot folio: each CPU counts its pins in its own line",
			     METRIC_OPS } },
	},
	{
		.id = "pin_hot_spread",
		.title = "pins of a page each of one shared THP from every thread",
		.scale = true,
		.cfg = {
			[CFG_BEFORE] = { "pin_hot", "spread", "before", NULL, "range" },
			[CFG_AFTER] = { "pin_hot", "spread", NULL, NULL, "range" },
		},
		.views = { { "pin_hot spread", "hot folio: each CPU counts its pins in its own line",
			     METRIC_OPS } },
	},
	FAULT_CLASSIC(page_fault1, "will-it-scale page_fault1: anonymous faults"),
	FAULT_CLASSIC(page_fault2, "will-it-scale page_fault2: private file faults (COW)"),
	FAULT_CLASSIC(page_fault3, "will-it-scale page_fault3: shared file faults"),
	CLASSIC(mmap1, "will-it-scale mmap1: anonymous mmap/munmap"),
	CLASSIC(mmap2, "will-it-scale mmap2: file mmap/munmap"),
};

_Static_assert(sizeof(report_experiments) / sizeof(report_experiments[0]) ==
	       REPORT_NR_EXPERIMENTS, "REPORT_NR_EXPERIMENTS counts report_experiments[]");
