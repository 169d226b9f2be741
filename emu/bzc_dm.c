// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: device memory (ibv_alloc_dm), kernel memory standing for the
 * memory on a NIC.
 *
 * An allocation is whole zeroed pages, charged to the process's memory
 * cgroup and counted against the device's max_dm_size (all processes
 * together, ENOMEM beyond it, as a NIC whose memory is taken). The
 * process maps it from the uverbs fd at the offset UVERBS_METHOD_DM_ALLOC
 * returns (BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET), as hardware providers map
 * on-NIC memory through a BAR, so ibv_memcpy_to_dm() and
 * ibv_memcpy_from_dm() are plain copies. A device memory MR
 * (ibv_reg_dm_mr(), always zero-based) resolves to the same pages, so
 * the data path and bulk channels move data into and out of it like any
 * other MR.
 *
 * BZC_METHOD_DM_QUERY tells another context on the same ucontext (one
 * from ibv_import_device(), in this process or one the fd was passed to)
 * the DM's length and mmap offset, for ibv_import_dm(): it maps the same
 * entry and reaches the same pages.
 *
 * BZC_METHOD_DM_EXPORT_DMABUF exports the memory as a dma-buf, for another
 * process or driver to import (bzc's own ibv_reg_dmabuf_mr among them):
 * the exporter hands out the pages as an sg_table mapped for the
 * importer's DMA device, maps them into a process (mmap) or the kernel
 * (vmap), and never moves them.
 *
 * The memory lives as long as the DM object, its MRs, its mappings and
 * its dma-bufs: each holds a reference. The count against max_dm_size
 * ends when the DM is freed, as the NIC's memory would be, even if a
 * mapping or a dma-buf still holds the pages for a while.
 */
#define UVERBS_MODULE_NAME bzc
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/iosys-map.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/uverbs_named_ioctl.h>
#include <rdma/uverbs_std_types.h>
#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

struct bzc_dm {
	struct ib_dm ibdm;
	struct kref ref;		/* the DM, its MRs, its mappings */
	void *kaddr;			/* the pages, mapped in the kernel */
	struct page **pages;
	u64 npages;
	u64 length;			/* bytes asked of DM_ALLOC */
	struct bzc_mmap_entry *mmap;
};

static inline struct bzc_dm *to_bdm(struct ib_dm *ibdm)
{
	return container_of(ibdm, struct bzc_dm, ibdm);
}

static void bzc_dm_release(struct kref *ref)
{
	struct bzc_dm *dm = container_of(ref, struct bzc_dm, ref);
	u64 i;

	if (dm->kaddr)
		vunmap(dm->kaddr);
	for (i = 0; dm->pages && i < dm->npages && dm->pages[i]; i++)
		__free_page(dm->pages[i]);
	kvfree(dm->pages);
	kfree(dm);
}

/**
 * bzc_dm_put() - drop a reference on device memory
 * @dm: the device memory; freed with the last reference
 */
void bzc_dm_put(struct bzc_dm *dm)
{
	kref_put(&dm->ref, bzc_dm_release);
}

/* Count @bytes more device memory on @bdev, or -ENOMEM: it is full. */
static int bzc_dm_charge(struct bzc_dev *bdev, u64 bytes)
{
	u64 max = bdev->attr.max_dm_size;

	if (bytes <= max &&
	    atomic64_add_return(bytes, &bdev->dm_bytes) <= max)
		return 0;
	if (bytes <= max)
		atomic64_sub(bytes, &bdev->dm_bytes);
	ibdev_info_ratelimited(&bdev->ibdev,
			       "device memory limit of %llu bytes reached (%llu more asked)\n",
			       max, bytes);
	return -ENOMEM;
}

/*
 * Zeroed pages charged to the process's memory cgroup (a full cgroup fails
 * the allocation rather than invoking its OOM killer), mapped in the
 * kernel like vmalloc_user() memory (VM_USERMAP) for the process's mmap.
 */
static int bzc_dm_alloc_pages(struct bzc_dm *dm)
{
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_ZERO |
			  __GFP_RETRY_MAYFAIL | __GFP_NOWARN;
	u64 i;

	dm->pages = kvcalloc(dm->npages, sizeof(*dm->pages),
			     GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!dm->pages)
		return -ENOMEM;
	for (i = 0; i < dm->npages; i++) {
		dm->pages[i] = alloc_page(gfp);
		if (!dm->pages[i])
			return -ENOMEM;
	}
	dm->kaddr = vmap(dm->pages, dm->npages, VM_MAP | VM_USERMAP,
			 PAGE_KERNEL);
	return dm->kaddr ? 0 : -ENOMEM;
}

struct ib_dm *bzc_alloc_dm(struct ib_device *ibdev,
			   struct ib_ucontext *ibuc,
			   struct ib_dm_alloc_attr *attr,
			   struct uverbs_attr_bundle *attrs)
{
	struct bzc_dev *bdev = to_bdev(ibdev);
	struct bzc_dm *dm;
	u64 len, key;
	int err;

	/* Pages are the device's granule: any alignment up to a page. */
	if (!attr->length || attr->alignment > PAGE_SHIFT || attr->flags) {
		ibdev_dbg(ibdev,
			  "alloc_dm: length %llu, log alignment %u, flags %#x not supported\n",
			  attr->length, attr->alignment, attr->flags);
		return ERR_PTR(-EINVAL);
	}
	/* Before rounding up: a length near 2^64 must not wrap. */
	if (attr->length > bdev->attr.max_dm_size)
		len = attr->length;
	else
		len = PAGE_ALIGN(attr->length);
	err = bzc_dm_charge(bdev, len);
	if (err)
		return ERR_PTR(err);

	dm = kzalloc(sizeof(*dm), GFP_KERNEL_ACCOUNT);
	if (!dm) {
		err = -ENOMEM;
		goto err_uncharge;
	}
	kref_init(&dm->ref);
	dm->npages = len >> PAGE_SHIFT;
	dm->length = attr->length;
	err = bzc_dm_alloc_pages(dm);
	if (err)
		goto err_put;

	kref_get(&dm->ref);
	dm->mmap = bzc_mmap_insert(ibuc, dm->kaddr, len, dm, &key);
	if (IS_ERR(dm->mmap)) {
		err = PTR_ERR(dm->mmap);
		bzc_dm_put(dm);
		goto err_put;
	}
	err = uverbs_copy_to(attrs, BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET, &key,
			     sizeof(key));
	if (err)
		goto err_remove;
	return &dm->ibdm;

err_remove:
	/* Nothing maps it yet, but a guessed offset might: the entry decides. */
	rdma_user_mmap_entry_remove(&dm->mmap->rdma_entry);
err_put:
	bzc_dm_put(dm);
err_uncharge:
	atomic64_sub(len, &bdev->dm_bytes);
	return ERR_PTR(err);
}

int bzc_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs)
{
	struct bzc_dev *bdev = to_bdev(ibdm->device);
	struct bzc_dm *dm = to_bdm(ibdm);

	/* The core refuses (EBUSY) while MRs of the DM exist. */
	atomic64_sub(dm->npages << PAGE_SHIFT, &bdev->dm_bytes);
	rdma_user_mmap_entry_remove(&dm->mmap->rdma_entry);
	bzc_dm_put(dm);
	return 0;
}

struct ib_mr *bzc_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm,
			    struct ib_dm_mr_attr *attr,
			    struct uverbs_attr_bundle *attrs)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	struct bzc_dm *dm = to_bdm(ibdm);
	struct bzc_mr *mr;
	int err;

	/* The core checked IB_ZERO_BASED and that the range lies in the DM. */
	if (!bzc_mr_access_ok(attr->access_flags))
		return ERR_PTR(-EOPNOTSUPP);
	err = bzc_obj_get(bdev, &bdev->num_mr, bdev->attr.max_mr, "MR");
	if (err)
		return ERR_PTR(err);

	mr = bzc_mr_alloc(GFP_KERNEL_ACCOUNT);
	if (!mr) {
		bzc_obj_put(&bdev->num_mr);
		return ERR_PTR(-ENOMEM);
	}
	kref_get(&dm->ref);
	mr->dm = dm;
	mr->pages = dm->pages + (attr->offset >> PAGE_SHIFT);
	mr->page_off = offset_in_page(attr->offset);
	mr->npages = PAGE_ALIGN(mr->page_off + attr->length) >> PAGE_SHIFT;
	bzc_mr_set_range(mr, 0, attr->length, attr->access_flags);
	err = bzc_mr_assign_key(bdev, mr);
	if (err) {
		bzc_dm_put(dm);
		kfree(mr);
		bzc_obj_put(&bdev->num_mr);
		return ERR_PTR(err);
	}
	return &mr->ibmr;
}

static int bzc_dm_dmabuf_attach(struct dma_buf *dmabuf,
				struct dma_buf_attachment *attach)
{
	/* Mapping for a device that cannot DMA would WARN in the DMA API. */
	return attach->dev->dma_mask ? 0 : -EOPNOTSUPP;
}

static struct sg_table *bzc_dm_map_dma_buf(struct dma_buf_attachment *attach,
					   enum dma_data_direction dir)
{
	struct bzc_dm *dm = attach->dmabuf->priv;
	struct sg_table *sgt;
	int err;

	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	err = sg_alloc_table_from_pages(sgt, dm->pages, dm->npages, 0,
					dm->npages << PAGE_SHIFT, GFP_KERNEL);
	if (err)
		goto err_free;
	err = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (err)
		goto err_table;
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(err);
}

static void bzc_dm_unmap_dma_buf(struct dma_buf_attachment *attach,
				 struct sg_table *sgt,
				 enum dma_data_direction dir)
{
	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
}

static int bzc_dm_dmabuf_mmap(struct dma_buf *dmabuf,
			      struct vm_area_struct *vma)
{
	struct bzc_dm *dm = dmabuf->priv;

	/* The core checked that the range lies in the buffer. */
	return remap_vmalloc_range(vma, dm->kaddr, vma->vm_pgoff);
}

static int bzc_dm_dmabuf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct bzc_dm *dm = dmabuf->priv;

	iosys_map_set_vaddr(map, dm->kaddr);
	return 0;
}

static void bzc_dm_dmabuf_release(struct dma_buf *dmabuf)
{
	bzc_dm_put(dmabuf->priv);
}

static const struct dma_buf_ops bzc_dm_dmabuf_ops = {
	.cache_sgt_mapping = true,
	.attach = bzc_dm_dmabuf_attach,
	.map_dma_buf = bzc_dm_map_dma_buf,
	.unmap_dma_buf = bzc_dm_unmap_dma_buf,
	.release = bzc_dm_dmabuf_release,
	.mmap = bzc_dm_dmabuf_mmap,
	.vmap = bzc_dm_dmabuf_vmap,
};

static int UVERBS_HANDLER(BZC_METHOD_DM_EXPORT_DMABUF)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_dm *ibdm =
		uverbs_attr_get_obj(attrs, BZC_ATTR_DM_EXPORT_DMABUF_HANDLE);
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct bzc_dm *dm = to_bdm(ibdm);
	struct dma_buf *dmabuf;
	int fd, err;

	exp.ops = &bzc_dm_dmabuf_ops;
	exp.size = dm->npages << PAGE_SHIFT;
	exp.flags = O_RDWR | O_CLOEXEC;
	exp.priv = dm;

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0)
		return fd;
	kref_get(&dm->ref);
	dmabuf = dma_buf_export(&exp);
	if (IS_ERR(dmabuf)) {
		bzc_dm_put(dm);
		put_unused_fd(fd);
		return PTR_ERR(dmabuf);
	}
	err = uverbs_copy_to(attrs, BZC_ATTR_DM_EXPORT_DMABUF_RESP_FD, &fd,
			     sizeof(fd));
	if (err) {
		put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return err;
	}
	/* Only now, when nothing can fail: the fd is the process's. */
	fd_install(fd, dmabuf->file);
	return 0;
}

/*
 * The DM's length and mmap offset, for a context of the same ucontext that
 * did not allocate it. The core looked the handle up (ENOENT: no object,
 * EINVAL: not a DM) and holds it for reading, so it cannot be freed, nor
 * its mmap entry removed, meanwhile.
 */
static int UVERBS_HANDLER(BZC_METHOD_DM_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ib_dm *ibdm =
		uverbs_attr_get_obj(attrs, BZC_ATTR_DM_QUERY_HANDLE);
	struct bzc_dm *dm = to_bdm(ibdm);
	struct bzc_dm_query_resp resp = {
		.length = dm->length,
		.mmap_offset =
			rdma_user_mmap_get_offset(&dm->mmap->rdma_entry),
	};

	return uverbs_copy_to_struct_or_zero(attrs, BZC_ATTR_DM_QUERY_RESP,
					     &resp, sizeof(resp));
}

DECLARE_UVERBS_NAMED_METHOD(BZC_METHOD_DM_QUERY,
			    UVERBS_ATTR_IDR(BZC_ATTR_DM_QUERY_HANDLE,
					    UVERBS_OBJECT_DM,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(BZC_ATTR_DM_QUERY_RESP,
						UVERBS_ATTR_STRUCT(struct bzc_dm_query_resp,
								   mmap_offset),
						UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(BZC_METHOD_DM_EXPORT_DMABUF,
			    UVERBS_ATTR_IDR(BZC_ATTR_DM_EXPORT_DMABUF_HANDLE,
					    UVERBS_OBJECT_DM,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(BZC_ATTR_DM_EXPORT_DMABUF_RESP_FD,
						UVERBS_ATTR_TYPE(s32),
						UA_MANDATORY));

ADD_UVERBS_METHODS(bzc_dm_methods, UVERBS_OBJECT_DM,
		   &UVERBS_METHOD(BZC_METHOD_DM_EXPORT_DMABUF),
		   &UVERBS_METHOD(BZC_METHOD_DM_QUERY));

ADD_UVERBS_ATTRIBUTES_SIMPLE(bzc_dm_alloc_attrs, UVERBS_OBJECT_DM,
			     UVERBS_METHOD_DM_ALLOC,
			     UVERBS_ATTR_PTR_OUT(BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET,
						 UVERBS_ATTR_TYPE(u64),
						 UA_MANDATORY));

const struct uapi_definition bzc_dm_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &bzc_dm_alloc_attrs),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &bzc_dm_methods),
	{}
};
