# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The port's hardware counters: what `rdma statistic show link` reports
for bzc0 moves exactly with the traffic a test makes, and
/sys/class/infiniband/DEV/ports/1/hw_counters/ agrees."""

import time

import pytest

import bzc_helpers as h

COUNTERS = ['doorbells', 'sent_wqes', 'sent_bytes', 'send_errors',
            'rcvd_msgs', 'rnr_naks', 'cq_overflows', 'bulk_wqes',
            'bulk_bytes',
            # The wire's: loopback traffic must leave them at 0.
            'tx_packets', 'tx_bytes', 'rx_packets', 'rx_bytes', 'rx_drops',
            'rx_icrc_errors', 'rx_duplicates', 'rx_out_of_sequence',
            'retransmits', 'naks_sent', 'naks_received', 'tx_errors',
            # On-demand paging's (test_odp.py checks them).
            'odp_faults', 'odp_fault_pages', 'odp_invalidations']
SZ = 64 * 1024


def sysfs_counters():
    base = f'/sys/class/infiniband/{h.DEV}/ports/{h.PORT}/hw_counters'
    out = {}
    for name in COUNTERS:
        with open(f'{base}/{name}') as f:
            out[name] = int(f.read())
    return out


def counters():
    c = h.hw_counters()
    assert sorted(c) == sorted(COUNTERS), c
    return c


def delta(before, after):
    return {k: after[k] - before[k] for k in COUNTERS}


@pytest.fixture(scope='module')
def env():
    with h.VerbsEnv(second_pd=False) as en:
        en.src = en.reg(SZ, h.access_all())
        en.dst = en.reg(SZ, h.access_all())
        yield en


@pytest.fixture
def pair(env):
    p = h.QPPair(env)
    yield p
    p.close()


def test_all_counters_listed():
    """Both interfaces name every counter, with the same values while
    nothing runs (past sysfs's cache lifespan, 10 ms by default)."""
    time.sleep(0.1)
    s = sysfs_counters()
    assert counters() == s


def test_rdma_writes_counted(env, pair):
    """N signaled RDMA WRITEs of L bytes, each its own ibv_post_send: N
    doorbells, N sent WQEs, N * L bytes; nothing received, no errors."""
    a, b = pair
    e = h._verbs()
    n, length = 5, 4000
    before = counters()
    for i in range(n):
        a.qp.post_send(h.rdma_wr(i, e.IBV_WR_RDMA_WRITE,
                                 [h.sge(env.src, 0, length)],
                                 env.dst.rkey, env.dst.buf))
    h.expect_wcs(a.scq, [(i, e.IBV_WC_SUCCESS) for i in range(n)], 'writes')
    d = delta(before, counters())
    assert d == dict.fromkeys(COUNTERS, 0) | {
        'doorbells': n, 'sent_wqes': n, 'sent_bytes': n * length}, d


def test_sends_and_errors_counted(env, pair):
    """Two SENDs to posted receives count as sent and received; a WRITE
    with a bad rkey counts as a send error and is not sent."""
    a, b = pair
    e = h._verbs()
    for i in range(2):
        b.qp.post_recv(h.recv_wr(100 + i, [h.sge(env.dst, 0, SZ)]))
    before = counters()
    a.qp.post_send(h.send_wr(1, e.IBV_WR_SEND, [h.sge(env.src, 0, 100)]))
    a.qp.post_send(h.send_wr(2, e.IBV_WR_SEND, [h.sge(env.src, 0, 200)]))
    h.expect_wcs(a.scq, [(1, e.IBV_WC_SUCCESS), (2, e.IBV_WC_SUCCESS)],
                 'sends')
    h.expect_wcs(b.rcq, [(100, e.IBV_WC_SUCCESS), (101, e.IBV_WC_SUCCESS)],
                 'receives')
    a.qp.post_send(h.rdma_wr(3, e.IBV_WR_RDMA_WRITE,
                             [h.sge(env.src, 0, 64)],
                             env.dst.rkey ^ 0x80, env.dst.buf))
    h.expect_wcs(a.scq, [(3, e.IBV_WC_REM_ACCESS_ERR)], 'bad rkey')
    d = delta(before, counters())
    assert d == dict.fromkeys(COUNTERS, 0) | {
        'doorbells': 3, 'sent_wqes': 2, 'sent_bytes': 300, 'rcvd_msgs': 2,
        'send_errors': 1}, d
