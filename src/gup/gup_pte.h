/* SPDX-License-Identifier: MIT */
/*
 * gup/gup_pte.h - slow GUP's lockless PTE step (the range design: fault/anon.c's top comment),
 * which takes its reference the way GUP-fast does (gup_fast.c).
 */
#ifndef PM_GUP_GUP_PTE_H
#define PM_GUP_GUP_PTE_H

/*
 * A speculative reference of kind @flags (FOLL_GET or FOLL_PIN, uncounted) on @page, which
 * @pte - read from *@ptep in the table *@pmdp = @pmd points to - maps; then both entries are
 * read again after a full barrier. Return: true with the reference held and both entries
 * unchanged, or false with nothing held (the caller decides under the PTL).
 */
__hidden bool pm__gup_pte_grab(pm_entry_t *pmdp, pmd_t pmd, pm_entry_t *ptep, pte_t pte,
			       struct pm_page *page, unsigned flags);
/* Give back what pm__gup_pte_grab() took. */
__hidden void pm__gup_pte_ungrab(struct pm_page *page, unsigned flags);

#endif /* PM_GUP_GUP_PTE_H */
