// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: kernel consumers' memory. bzc is a software device without a DMA
 * device (ib_uses_virt_dma()), so a kernel ULP's "DMA address" is a kernel
 * virtual address, and its SGEs name it with the PD's local_dma_lkey: the
 * lkey of the PD's DMA MR made here. The data path turns such an address
 * into pages: the linear map (kmalloc, the page allocator) or vmalloc
 * space; any other address is a protection error, never a fault.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/highmem.h>

#include "bzc.h"

/*
 * The DMA MR of a kernel PD: all of kernel memory, local access only.
 * Remote access (IB_PD_UNSAFE_GLOBAL_RKEY) would let any peer that guesses
 * the rkey write kernel memory: refused.
 */
struct ib_mr *bzc_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	struct bzc_mr *mr;
	int err;

	if (access & ~IB_ACCESS_LOCAL_WRITE)
		return ERR_PTR(-EOPNOTSUPP);

	mr = bzc_mr_alloc(GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);

	/* No umem and no page array: bzc_mr_is_kernel() */
	bzc_mr_set_range(mr, 0, U64_MAX, access);
	err = bzc_mr_assign_key(bdev, mr);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	return &mr->ibmr;
}

/**
 * bzc_kva_page() - the page behind a kernel virtual address
 * @addr: an address in the linear map or in vmalloc space
 *
 * Return: the page, or NULL for any other address.
 */
struct page *bzc_kva_page(unsigned long addr)
{
	if (virt_addr_valid((void *)addr))
		return virt_to_page((void *)addr);
	if (is_vmalloc_addr((void *)addr))
		return vmalloc_to_page((void *)addr);
	return NULL;
}

/* Is every page of [addr, addr + len) backed? (len > 0, no wrap: checked.) */
bool bzc_kva_range_ok(u64 addr, u64 len)
{
	u64 page = addr & PAGE_MASK;
	u64 last = (addr + len - 1) & PAGE_MASK;

	for (;;) {
		if (!bzc_kva_page(page))
			return false;
		if (page == last)
			return true;
		page += PAGE_SIZE;
	}
}

/* Map kernel address `addr`; *len gets the bytes up to `max` in its page. */
void *bzc_kva_map(u64 addr, u64 max, size_t *len)
{
	*len = min_t(u64, PAGE_SIZE - offset_in_page(addr), max);
	return kmap_local_page(bzc_kva_page(addr)) + offset_in_page(addr);
}
