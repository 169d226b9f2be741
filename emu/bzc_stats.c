// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the port's hardware counters, for `rdma statistic show link` and
 * /sys/class/infiniband/DEV/ports/1/hw_counters/.
 *
 * Per-CPU, so that counting costs the data path one unlocked add and no
 * shared cache line; summed only when someone reads them.
 */
#include <linux/percpu.h>

#include "bzc.h"

static const struct rdma_stat_desc bzc_counter_descs[] = {
	[BZC_CNT_DOORBELLS].name = "doorbells",
	[BZC_CNT_SENT_WQES].name = "sent_wqes",
	[BZC_CNT_SENT_BYTES].name = "sent_bytes",
	[BZC_CNT_SEND_ERRORS].name = "send_errors",
	[BZC_CNT_RCVD_MSGS].name = "rcvd_msgs",
	[BZC_CNT_RNR_NAKS].name = "rnr_naks",
	[BZC_CNT_CQ_OVERFLOWS].name = "cq_overflows",
	[BZC_CNT_BULK_WQES].name = "bulk_wqes",
	[BZC_CNT_BULK_BYTES].name = "bulk_bytes",
	[BZC_CNT_TX_PKTS].name = "tx_packets",
	[BZC_CNT_TX_BYTES].name = "tx_bytes",
	[BZC_CNT_RX_PKTS].name = "rx_packets",
	[BZC_CNT_RX_BYTES].name = "rx_bytes",
	[BZC_CNT_RX_DROPS].name = "rx_drops",
	[BZC_CNT_ICRC_ERRORS].name = "rx_icrc_errors",
	[BZC_CNT_RX_DUPLICATES].name = "rx_duplicates",
	[BZC_CNT_RX_OUT_OF_SEQ].name = "rx_out_of_sequence",
	[BZC_CNT_RETRANSMITS].name = "retransmits",
	[BZC_CNT_NAKS_SENT].name = "naks_sent",
	[BZC_CNT_NAKS_RCVD].name = "naks_received",
	[BZC_CNT_TX_ERRORS].name = "tx_errors",
	[BZC_CNT_ODP_FAULTS].name = "odp_faults",
	[BZC_CNT_ODP_FAULT_PAGES].name = "odp_fault_pages",
	[BZC_CNT_ODP_INVALIDATIONS].name = "odp_invalidations",
};

static_assert(ARRAY_SIZE(bzc_counter_descs) == BZC_NUM_COUNTERS);

int bzc_stats_init(struct bzc_dev *bdev)
{
	bdev->stats = alloc_percpu(struct bzc_stats);
	return bdev->stats ? 0 : -ENOMEM;
}

void bzc_stats_free(struct bzc_dev *bdev)
{
	free_percpu(bdev->stats);
	bdev->stats = NULL;
}

struct rdma_hw_stats *bzc_alloc_hw_port_stats(struct ib_device *ibdev,
					      u32 port_num)
{
	return rdma_alloc_hw_stats_struct(bzc_counter_descs, BZC_NUM_COUNTERS,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

int bzc_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
		     u32 port, int index)
{
	struct bzc_dev *bdev = to_bdev(ibdev);
	int cpu, i;

	for (i = 0; i < BZC_NUM_COUNTERS; i++)
		stats->value[i] = 0;
	for_each_possible_cpu(cpu) {
		const struct bzc_stats *s = per_cpu_ptr(bdev->stats, cpu);

		for (i = 0; i < BZC_NUM_COUNTERS; i++)
			stats->value[i] += READ_ONCE(s->v[i]);
	}
	return BZC_NUM_COUNTERS;
}
