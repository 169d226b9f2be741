// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: kernel memory shared with a process (rings), mapped through the
 * uverbs file with rdma_user_mmap_entry keys, and the rings built on it.
 *
 * The entry owns the memory: an object that shares a ring removes its entry
 * when it is destroyed, and every mapping of the ring holds a reference on
 * the entry, so the memory is freed by bzc_mmap_free() only once the process
 * has unmapped it too, and the entry's mmap offset is not handed out again
 * before that.
 *
 * Mappings are revocable: on disassociate (hot unplug, `rdma link delete`
 * with the device open) the core zaps every VMA it tracks and drops the
 * VMAs' references, so the rings are freed while the process still has the
 * VMAs; a later access gets the core's zero-filled disassociate page.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "bzc.h"
#include "bzc_compat.h"

/**
 * bzc_mmap_insert() - offer kernel memory to a process for mmap
 * @ibuc: the process's context
 * @kaddr: the memory (vmalloc'ed, page aligned)
 * @size: its length in bytes
 * @dm: NULL for a ring, which the entry then owns and frees; else the
 *	device memory @kaddr belongs to, whose reference the entry takes
 * @key: the mmap offset the process maps it at
 *
 * Return: the entry, or an ERR_PTR.
 */
struct bzc_mmap_entry *bzc_mmap_insert(struct ib_ucontext *ibuc, void *kaddr,
				       size_t size, struct bzc_dm *dm,
				       u64 *key)
{
	struct bzc_mmap_entry *entry;
	int err;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL_ACCOUNT);
	if (!entry)
		return ERR_PTR(-ENOMEM);

	entry->kaddr = kaddr;
	entry->dm = dm;
	err = rdma_user_mmap_entry_insert(ibuc, &entry->rdma_entry,
					  PAGE_ALIGN(size));
	if (err) {
		kfree(entry);
		return ERR_PTR(err);
	}

	*key = rdma_user_mmap_get_offset(&entry->rdma_entry);
	return entry;
}

/*
 * Map the ring's vmalloc pages into @vma, page by page, as PFNs. The core
 * revokes a mapping with zap_vma_ptes(), which only acts on VM_PFNMAP areas:
 * pages inserted with vm_insert_page() (VM_MIXEDMAP) would stay mapped.
 * PFN mappings hold no page references; the VMA's reference on the entry
 * keeps the pages allocated instead. remap_pfn_range() also marks the VMA
 * VM_IO (no get_user_pages() on rings, no MADV_DOFORK) and VM_DONTEXPAND.
 */
static int bzc_mmap_pages(struct vm_area_struct *vma, void *kaddr)
{
	unsigned long off;
	int err;

	for (off = 0; off < vma->vm_end - vma->vm_start; off += PAGE_SIZE) {
		err = remap_pfn_range(vma, vma->vm_start + off,
				      vmalloc_to_pfn(kaddr + off), PAGE_SIZE,
				      vma->vm_page_prot);
		if (err)
			return err;
	}
	return 0;
}

int bzc_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct rdma_umap_priv *priv;
	int err;

	/* Checks the key, VM_SHARED and that the length matches the entry. */
	rdma_entry = rdma_user_mmap_entry_get(ibuc, vma);
	if (!rdma_entry) {
		ibdev_warn_ratelimited(ibuc->device,
				       "mmap: no ring of %lu bytes at offset %#lx (or not MAP_SHARED)\n",
				       vma->vm_end - vma->vm_start,
				       vma->vm_pgoff << PAGE_SHIFT);
		return -EINVAL;
	}

	priv = kzalloc(sizeof(*priv), GFP_KERNEL);
	if (!priv) {
		err = -ENOMEM;
		goto out;
	}

	/* A forked child gets no ring: the ring belongs to the context. */
	bzc_vm_flags_set(vma, VM_DONTCOPY);
	err = bzc_mmap_pages(vma, to_bmmap(rdma_entry)->kaddr);
	if (err) {
		/* mmap_region() zaps what was mapped; the VMA never existed. */
		kfree(priv);
		goto out;
	}

	/* Only now: a tracked VMA must be a complete one. */
	rdma_umap_priv_init(priv, vma, rdma_entry);
out:
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

void bzc_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	struct bzc_mmap_entry *entry = to_bmmap(rdma_entry);

	if (entry->dm)
		bzc_dm_put(entry->dm);
	else
		vfree(entry->kaddr);
	kfree(entry);
}

/*
 * Zeroed pages for a process's ring, charged to its memory cgroup: a full
 * cgroup fails the allocation (-ENOMEM) rather than invoking its OOM
 * killer. Mapped like vmalloc_user() memory (VM_USERMAP, which
 * remap_vmalloc_range() wants); vfree() frees the pages and the array.
 */
static void *bzc_ring_vmalloc_user(size_t len)
{
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_ZERO |
			  __GFP_RETRY_MAYFAIL | __GFP_NOWARN;
	unsigned int i, n = len >> PAGE_SHIFT;
	struct page **pages;
	void *kaddr;

	pages = kvcalloc(n, sizeof(*pages),
			 GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL);
	if (!pages)
		return NULL;
	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(gfp);
		if (!pages[i])
			goto err_free;
	}
	kaddr = vmap(pages, n, VM_MAP | VM_USERMAP | VM_MAP_PUT_PAGES,
		     PAGE_KERNEL);
	if (kaddr)
		return kaddr;
err_free:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
	return NULL;
}

/*
 * Allocate a zeroed ring of `entries` slots after a header of `hdr_bytes`.
 * With udata (a user object) the ring is also offered for mmap and
 * ring->mmap_key/mmap_len say where; a kernel consumer's ring is private.
 */
int bzc_ring_alloc(struct bzc_ring *ring, struct ib_udata *udata,
		   size_t hdr_bytes, size_t slot_bytes, u32 entries)
{
	struct bzc_ucontext *uctx;
	size_t len;

	len = PAGE_ALIGN(hdr_bytes + (size_t)entries * slot_bytes);
	if (len > U32_MAX)
		return -EINVAL;

	/* A process's ring counts against its memory cgroup. */
	ring->kaddr = udata ? bzc_ring_vmalloc_user(len) : vmalloc_user(len);
	if (!ring->kaddr)
		return -ENOMEM;
	ring->entries = entries;
	ring->mmap_len = len;
	ring->mmap = NULL;

	if (!udata)
		return 0;

	uctx = rdma_udata_to_drv_context(udata, struct bzc_ucontext, ibuc);
	ring->mmap = bzc_mmap_insert(&uctx->ibuc, ring->kaddr, len, NULL,
				     &ring->mmap_key);
	if (IS_ERR(ring->mmap)) {
		int err = PTR_ERR(ring->mmap);

		vfree(ring->kaddr);
		ring->mmap = NULL;
		return err;
	}
	return 0;
}

/*
 * The kernel must not touch the ring after this. A mapped ring's memory
 * lives on until the process unmaps it (bzc_mmap_free()).
 */
void bzc_ring_free(struct bzc_ring *ring)
{
	if (ring->mmap)
		rdma_user_mmap_entry_remove(&ring->mmap->rdma_entry);
	else
		vfree(ring->kaddr);
	ring->kaddr = NULL;
	ring->mmap = NULL;
}
