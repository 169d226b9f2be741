// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the base memory management extensions for kernel consumers (IBA
 * 10.6.3.6 and 11.4.1.3 as the RDMA core's verbs present them): fast-
 * register MRs from ib_alloc_mr(), their page lists from ib_map_mr_sg(),
 * IB_WR_REG_MR executed in order on a send queue, and invalidation by
 * LOCAL_INV or a peer's SEND_WITH_INV (bzc_key_invalidate()).
 *
 * The pages: bzc has no DMA device (ib_uses_virt_dma()), so the "DMA
 * addresses" ib_map_mr_sg() hands to set_page are kernel virtual
 * addresses, resolved to their pages here, once, as bzc_kmem.c does for
 * the DMA MR. An address with no page behind it ends the mapping.
 *
 * Two page arrays: map_mr_sg fills `staged`, which the data path never
 * reads, so a consumer may map the next registration while the current
 * one is still valid and its LOCAL_INV is queued with the REG_MR (iSER
 * does). REG_MR makes the staged pages the MR's own, and only once the
 * MR is invalid and every access that resolved it before the
 * invalidation has finished: the data path never sees its pages change.
 *
 * The key: REG_MR sets it from the work request (its consumer byte; the
 * index must be the MR's). An MR answers to it only while valid
 * (bzc_mr_key_ok()); every lookup, local or remote, goes through the same
 * key table and checks (docs/transport.md, section 2).
 */
#include <linux/wait_bit.h>
#include <rdma/ib_verbs.h>

#include "bzc_xport.h"

/* Rights a registration may grant. */
#define BZC_FR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |	\
		       IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC | \
		       IB_ACCESS_MW_BIND)

void bzc_fr_free(struct bzc_fr *fr)
{
	if (!fr)
		return;
	kvfree(fr->staged);
	kfree(fr);
}

/* ib_alloc_mr(): an MR with no pages and no valid key yet. */
struct ib_mr *bzc_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			   u32 max_num_sg)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	struct bzc_mr *mr;
	struct bzc_fr *fr;
	int err;

	/* No SG_GAPS (not advertised) and no integrity MRs. */
	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > BZC_MAX_FR_PAGES)
		return ERR_PTR(-EINVAL);
	err = bzc_obj_get(bdev, &bdev->num_mr, bdev->attr.max_mr, "MR");
	if (err)
		return ERR_PTR(err);

	err = -ENOMEM;
	mr = bzc_mr_alloc(GFP_KERNEL);
	fr = kzalloc(sizeof(*fr), GFP_KERNEL);
	if (!mr || !fr)
		goto err_free;
	mr->pages = kvcalloc(max_num_sg, sizeof(*mr->pages), GFP_KERNEL);
	fr->staged = kvcalloc(max_num_sg, sizeof(*fr->staged), GFP_KERNEL);
	if (!mr->pages || !fr->staged)
		goto err_free;
	fr->max_pages = max_num_sg;
	mr->fr = fr;
	mr->ibmr.page_size = PAGE_SIZE;

	err = bzc_key_reserve(bdev, &fr->key);
	if (err)
		goto err_free;
	mr->ibmr.lkey = fr->key;
	mr->ibmr.rkey = fr->key;
	/* Invalid: the key resolves to nothing until a REG_MR. */
	bzc_key_publish(bdev, fr->key, mr);
	return &mr->ibmr;

err_free:
	if (mr)
		kvfree(mr->pages);
	kfree(mr);
	bzc_fr_free(fr);
	bzc_obj_put(&bdev->num_mr);
	return ERR_PTR(err);
}

static int bzc_fr_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct bzc_fr *fr = to_bmr(ibmr)->fr;
	struct page *page;

	if (fr->staged_npages == fr->max_pages)
		return -ENOMEM;
	page = bzc_kva_page(addr);
	if (!page) {
		ibdev_info_ratelimited(ibmr->device,
				       "MR %#x: mapped address %#llx is not kernel memory\n",
				       ibmr->lkey, addr);
		return -EFAULT;
	}
	fr->staged[fr->staged_npages++] = page;
	return 0;
}

/*
 * ib_map_mr_sg(): the pages of the next registration, at most max_num_sg
 * of them (ib_sg_to_pages() maps the prefix that fits). The core has set
 * ibmr->iova and ->length to the mapped range; REG_MR takes them.
 */
int bzc_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		  unsigned int *sg_offset)
{
	struct bzc_fr *fr = to_bmr(ibmr)->fr;
	int n;

	/* The page list holds CPU pages; the core's own default size. */
	if (ibmr->page_size != PAGE_SIZE) {
		ibdev_info_ratelimited(ibmr->device,
				       "MR %#x: page size %u is not supported\n",
				       ibmr->lkey, ibmr->page_size);
		return -EINVAL;
	}
	fr->staged_npages = 0;
	n = ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, bzc_fr_set_page);
	/* Before the consumer may change iova (a zero-based registration). */
	fr->staged_off = offset_in_page(ibmr->iova);
	return n;
}

/* Why REG_MR cannot register `mr` from `qp` now, or NULL. mr_xa locked. */
static const char *bzc_fr_refuse(struct bzc_mr *mr, struct bzc_qp *qp,
				 u64 length, int access)
{
	struct bzc_fr *fr = mr->fr;

	if (mr->ibmr.pd != qp->ibqp.pd)
		return "its PD is not the QP's";
	if (fr->valid)
		return "it is still valid";
	if (fr->registering)
		return "another REG_MR of it is running";
	if (access & ~BZC_FR_ACCESS)
		return "unsupported access flags";
	/* As for any MR: remote writes and atomics need local write. */
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return "remote write without local write";
	if (length > ((u64)fr->staged_npages << PAGE_SHIFT) - fr->staged_off)
		return "the length exceeds its mapped pages";
	return NULL;
}

/**
 * bzc_fr_register() - execute a REG_MR WQE of a kernel QP
 * @qp: the QP, its sq_mutex held, in a context that may sleep
 * @wqe: the WQE (bzc_kqp.c): bind.mw_rkey the new key, bind.addr and
 *	 bind.length the MR's iova and length at post time, bind.access
 *
 * The MR must be a fast-register MR of the QP's PD and invalid; the key's
 * index must be the MR's. It waits for accesses that resolved the MR
 * before its invalidation, then makes the staged pages its own, sets
 * iova, length, access and key, and makes it valid.
 *
 * Return: IB_WC_SUCCESS, or IB_WC_MW_BIND_ERR (a kernel log line says why).
 */
enum ib_wc_status bzc_fr_register(struct bzc_qp *qp,
				  const struct bzc_send_wqe *wqe)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	u32 key = le32_to_cpu(wqe->bind.mw_rkey);
	u64 iova = le64_to_cpu(wqe->bind.addr);
	u64 length = le64_to_cpu(wqe->bind.length);
	int access = le32_to_cpu(wqe->bind.access);
	const char *why = "the key names no fast-register MR";
	struct bzc_mr *mr;
	struct bzc_fr *fr;
	void *entry;

	xa_lock(&bdev->mr_xa);
	entry = xa_load(&bdev->mr_xa, key >> 8);
	mr = entry && !xa_pointer_tag(entry) ? entry : NULL;
	/* Not a fast-register MR, or being deregistered. */
	if (mr && (!mr->fr || !refcount_inc_not_zero(&mr->refcnt)))
		mr = NULL;
	if (mr)
		why = bzc_fr_refuse(mr, qp, length, access);
	if (!why)
		mr->fr->registering = true;
	xa_unlock(&bdev->mr_xa);
	if (why)
		goto refuse;

	/*
	 * Invalid, so no lookup takes a reference any more: wait for those
	 * taken before the invalidation (copies in flight), so that none
	 * of them sees the pages change. Ours and the MR's own remain; no
	 * other REG_MR holds one (`registering`).
	 */
	wait_var_event(&mr->refcnt, refcount_read(&mr->refcnt) <= 2);

	fr = mr->fr;
	xa_lock(&bdev->mr_xa);
	fr->registering = false;
	/* map_mr_sg may have run meanwhile (a consumer's bug): check again. */
	why = bzc_fr_refuse(mr, qp, length, access);
	if (!why) {
		swap(mr->pages, fr->staged);
		mr->npages = fr->staged_npages;
		mr->page_off = fr->staged_off;
		mr->iova = iova;
		mr->length = length;
		WRITE_ONCE(mr->access, access);
		fr->key = key;
		mr->ibmr.lkey = key;
		mr->ibmr.rkey = key;
		fr->valid = true;
	}
	xa_unlock(&bdev->mr_xa);
	bzc_mr_put(mr);
	if (!why)
		return IB_WC_SUCCESS;
	mr = NULL;
refuse:
	if (mr)
		bzc_mr_put(mr);
	ibdev_info_ratelimited(qp->ibqp.device,
			       "QP %u: REG_MR of key %#x refused: %s\n",
			       qp->ibqp.qp_num, key, why);
	return IB_WC_MW_BIND_ERR;
}

/**
 * bzc_fr_invalidate() - LOCAL_INV or SEND_WITH_INV of a fast-register MR
 * @mr: the MR the key's index names; called with mr_xa locked
 * @rkey: the key to invalidate: the one REG_MR gave it
 * @qp: the QP the invalidation runs on or arrives at; its PD must be the
 *	MR's
 *
 * Invalidating an invalid MR with its last key succeeds (nothing to do).
 * Windows bound to the MR forbid it (IBA).
 *
 * Return: 0, or -EINVAL when the MR may not be invalidated with @rkey.
 */
int bzc_fr_invalidate(struct bzc_mr *mr, u32 rkey, struct bzc_qp *qp)
{
	struct bzc_fr *fr = mr->fr;

	if (!fr || fr->key != rkey || mr->ibmr.pd != qp->ibqp.pd ||
	    atomic_read(&mr->num_mw))
		return -EINVAL;
	fr->valid = false;
	return 0;
}
