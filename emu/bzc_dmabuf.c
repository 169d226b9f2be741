// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: MRs over dma-bufs (ibv_reg_dmabuf_mr).
 *
 * The core's helper, ib_umem_dmabuf_get(), attaches with the ib_device's
 * DMA device, which a software device does not have (it WARNs and fails).
 * bzc attaches with a struct device of its own instead: a root device
 * with a 64-bit DMA mask and no IOMMU or DMA ops, so the exporter's
 * mapping goes through dma-direct and its DMA addresses are the physical
 * addresses of the buffer's pages. Those pages are what the device copies
 * to and from, page by page like any MR's; an address that is not
 * memory with a struct page (device memory behind a BAR: peer-to-peer is
 * not offered to the exporter) refuses the registration.
 *
 * The attachment is dynamic, and pinned while the MR exists, as the core's
 * ib_umem_dmabuf_get_pinned() does for devices that cannot take page
 * faults: the exporter keeps the buffer where it is. Should it move it
 * anyway (move_notify), the MR's key stops resolving at once, so the
 * device refuses every later access through it.
 */
#include <linux/device.h>
#include <linux/dma-buf.h>
#include <linux/dma-direct.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "bzc.h"
#include "bzc_compat.h"

MODULE_IMPORT_NS(DMA_BUF);

struct bzc_dmabuf {
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	struct bzc_dev *bdev;
	struct bzc_mr *mr;
};

/* What bzc attaches to dma-bufs with: a DMA device of its own. */
static struct device *bzc_dma_dev;

/**
 * bzc_dmabuf_init() - create the device bzc attaches to dma-bufs with
 *
 * Return: 0 or a negative errno.
 */
int bzc_dmabuf_init(void)
{
	struct device *dev;
	int err;

	dev = root_device_register("bzc_dmabuf");
	if (IS_ERR(dev))
		return PTR_ERR(dev);
	dev->dma_mask = &dev->coherent_dma_mask;
	err = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (err) {
		root_device_unregister(dev);
		return err;
	}
	bzc_dma_dev = dev;
	return 0;
}

/**
 * bzc_dmabuf_exit() - remove what bzc_dmabuf_init() created
 */
void bzc_dmabuf_exit(void)
{
	root_device_unregister(bzc_dma_dev);
}

static void bzc_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct bzc_dmabuf *bd = attach->importer_priv;
	struct bzc_mr *mr = bd->mr;

	/* Only the MR itself: the index may name another MR by now. */
	xa_cmpxchg(&bd->bdev->mr_xa, mr->ibmr.lkey >> 8, mr, NULL, 0);
	ibdev_warn_ratelimited(&bd->bdev->ibdev,
			       "dma-buf MR %#x: the exporter moved its pinned buffer; the MR no longer resolves\n",
			       mr->ibmr.lkey);
}

static const struct dma_buf_attach_ops bzc_dmabuf_attach_ops = {
	.allow_peer2peer = false,
	.move_notify = bzc_dmabuf_move_notify,
};

/*
 * The pages behind [offset, offset + length) of the mapped buffer, from
 * the DMA addresses of its segments: physical addresses (dma-direct).
 */
static int bzc_dmabuf_collect_pages(struct bzc_dmabuf *bd, struct bzc_mr *mr,
				    u64 offset, u64 length)
{
	u64 first = offset >> PAGE_SHIFT, idx = 0, got = 0;
	struct scatterlist *sg;
	unsigned int i;

	mr->npages = (PAGE_ALIGN(offset + length) >> PAGE_SHIFT) - first;
	mr->pages = bzc_page_array_alloc(mr->npages);
	if (!mr->pages)
		return -ENOMEM;

	for_each_sgtable_dma_sg(bd->sgt, sg, i) {
		dma_addr_t addr = sg_dma_address(sg);
		unsigned int len = sg_dma_len(sg), off;

		if (!PAGE_ALIGNED(addr) || !PAGE_ALIGNED(len)) {
			ibdev_info_ratelimited(&bd->bdev->ibdev,
					       "dma-buf MR: the exporter mapped a segment that is not whole pages\n");
			return -EINVAL;
		}
		for (off = 0; off < len && got < mr->npages;
		     off += PAGE_SIZE, idx++) {
			unsigned long pfn;

			if (idx < first)
				continue;
			pfn = PHYS_PFN(dma_to_phys(bzc_dma_dev, addr + off));
			if (!pfn_valid(pfn)) {
				ibdev_info_ratelimited(&bd->bdev->ibdev,
						       "dma-buf MR: buffer is not memory the CPU copies (pfn %#lx)\n",
						       pfn);
				return -EOPNOTSUPP;
			}
			mr->pages[got++] = pfn_to_page(pfn);
		}
	}
	return got == mr->npages ? 0 : -EINVAL;
}

static void bzc_dmabuf_detach(struct bzc_dmabuf *bd)
{
	struct dma_buf *dmabuf = bd->attach->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
	if (bd->sgt)
		dma_buf_unmap_attachment(bd->attach, bd->sgt,
					 DMA_BIDIRECTIONAL);
	dma_buf_unpin(bd->attach);
	dma_resv_unlock(dmabuf->resv);
	dma_buf_detach(dmabuf, bd->attach);
	dma_buf_put(dmabuf);
	kfree(bd);
}

/*
 * Attach @mr to the dma-buf @fd, pinned and mapped, and collect the
 * pages of [offset, offset + length).
 */
static int bzc_dmabuf_attach(struct bzc_dev *bdev, struct bzc_mr *mr, int fd,
			     u64 offset, u64 length)
{
	struct dma_buf *dmabuf;
	struct bzc_dmabuf *bd;
	struct sg_table *sgt;
	int err;

	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	if (offset > dmabuf->size || length > dmabuf->size - offset) {
		ibdev_dbg(&bdev->ibdev,
			  "dma-buf MR: %llu bytes at %llu do not fit a %zu byte buffer\n",
			  length, offset, dmabuf->size);
		dma_buf_put(dmabuf);
		return -EINVAL;
	}
	bd = kzalloc(sizeof(*bd), GFP_KERNEL_ACCOUNT);
	if (!bd) {
		dma_buf_put(dmabuf);
		return -ENOMEM;
	}
	bd->bdev = bdev;
	bd->mr = mr;
	bd->attach = dma_buf_dynamic_attach(dmabuf, bzc_dma_dev,
					    &bzc_dmabuf_attach_ops, bd);
	if (IS_ERR(bd->attach)) {
		err = PTR_ERR(bd->attach);
		kfree(bd);
		dma_buf_put(dmabuf);
		return err;
	}

	dma_resv_lock(dmabuf->resv, NULL);
	err = dma_buf_pin(bd->attach);
	if (!err) {
		sgt = dma_buf_map_attachment(bd->attach, DMA_BIDIRECTIONAL);
		if (IS_ERR(sgt)) {
			err = PTR_ERR(sgt);
			dma_buf_unpin(bd->attach);
		} else {
			bd->sgt = sgt;
		}
	}
	dma_resv_unlock(dmabuf->resv);
	if (err) {
		dma_buf_detach(dmabuf, bd->attach);
		kfree(bd);
		dma_buf_put(dmabuf);
		return err;
	}

	mr->dmabuf = bd;
	err = bzc_dmabuf_collect_pages(bd, mr, offset, length);
	if (err) {
		kvfree(mr->pages);
		mr->pages = NULL;
		mr->dmabuf = NULL;
		bzc_dmabuf_detach(bd);
	}
	return err;
}

/**
 * bzc_dmabuf_mr_release() - let go of a dma-buf MR's buffer
 * @mr: the MR, which nothing uses any more
 */
void bzc_dmabuf_mr_release(struct bzc_mr *mr)
{
	bzc_dmabuf_detach(mr->dmabuf);
	mr->dmabuf = NULL;
}

struct ib_mr *bzc_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
				     u64 length, u64 iova, int fd, int access,
				     struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	struct bzc_mr *mr;
	int err;

	if (!bzc_mr_access_ok(access))
		return ERR_PTR(-EOPNOTSUPP);
	if (!length || length > bdev->attr.max_mr_size)
		return ERR_PTR(-EINVAL);
	/* No driver request is defined; a newer one must be all zero. */
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EOPNOTSUPP);
	err = bzc_obj_get(bdev, &bdev->num_mr, bdev->attr.max_mr, "MR");
	if (err)
		return ERR_PTR(err);

	mr = bzc_mr_alloc(GFP_KERNEL_ACCOUNT);
	if (!mr) {
		err = -ENOMEM;
		goto err_count;
	}
	err = bzc_dmabuf_attach(bdev, mr, fd, offset, length);
	if (err)
		goto err_free;

	/* The core checked that iova and offset agree within a page. */
	mr->page_off = offset_in_page(offset);
	bzc_mr_set_range(mr, iova, length, access);
	err = bzc_mr_assign_key(bdev, mr);
	if (err)
		goto err_release;
	return &mr->ibmr;

err_release:
	kvfree(mr->pages);
	bzc_dmabuf_mr_release(mr);
err_free:
	kfree(mr);
err_count:
	bzc_obj_put(&bdev->num_mr);
	return ERR_PTR(err);
}
