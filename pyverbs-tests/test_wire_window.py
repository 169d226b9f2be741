# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The RC send window on the wire (docs/transport.md, section 10): state
changes while messages are in flight. Two machines (marker two_hosts,
tools/bzc-machines); the far side is a plain pyverbs RC QP on the peer
(bulk_wire_peer.py, rxe1 by default, bzc0 with --peer bzc)."""

import ctypes
import time

import pytest

import bzc_helpers as h
import bzcdv as dv
from test_bulk_wire import BZC_IPV4, MIB, MTU_4096, Far, sha

pytestmark = pytest.mark.two_hosts


@pytest.fixture
def far_qp(peer):
    """(ctx, qp, far): an RC QP of bzc0 connected to the peer script's,
    whose MR has 8 MiB."""
    f = Far(peer, 8 * MIB)
    c = dv.Ctx(h.DEV)
    try:
        qp = c.rc_qp(c.gid_index(dv.ipv4_gid(BZC_IPV4)), path_mtu=MTU_4096,
                     depth=16,
                     remote={'qpn': f.info['qpn'],
                             'gid': bytes.fromhex(
                                 f.info['gid'].replace(':', '')),
                             'psn': f.info['psn']})
        f.connect(qp)
        yield c, qp, f
    finally:
        c.close()
        f.close()


def test_sqd_drained_after_window(far_qp):
    """RTS -> SQD with 1 MiB RDMA WRITEs on the wire: IBV_EVENT_SQ_DRAINED
    comes once every message that had started is acknowledged (IBA 10.3.1),
    so their completions are in the CQ when it comes and no completion
    follows it while the QP stays in SQD; the WQEs not yet started wait,
    and back in RTS they complete. All arrive intact, each completed once."""
    c, qp, f = far_qp
    n, size = 8, MIB
    src = c.buf(n * size)
    dv.fill(src.addr, n * size, dv.pattern(31))
    mr = c.mr(src.addr, n * size)
    sent = h.hw_counters()['tx_packets']
    for i in range(n):
        assert qp.post_rdma(i, dv.WR_RDMA_WRITE, src.addr + i * size, size,
                            mr.lkey, f.info['addr'] + i * size,
                            f.info['rkey']) == 0
    # The first message is on the wire (not yet acknowledged: 256 packets).
    assert h.wait_until(lambda: h.hw_counters()['tx_packets'] > sent, 10), \
        'the first WRITE never went out'
    qp.to_state(dv.QPS_SQD)
    ev = c.async_event(timeout=60)
    at_event = qp.cq.poll(n)
    assert ev == (dv.EVENT_SQ_DRAINED,
                  ctypes.addressof(qp.p.contents)), ev
    assert at_event, 'SQ_DRAINED came with the started WRITE not complete'
    time.sleep(2)
    late = qp.cq.poll(n)
    assert not late, (f'{len(late)} completions came after SQ_DRAINED '
                      f'({len(at_event)} before it)')
    assert qp.state() == dv.QPS_SQD
    qp.to_state(dv.QPS_RTS)
    rest = qp.cq.wait(n - len(at_event), timeout=120)
    wcs = at_event + rest
    assert [w.wr_id for w in wcs] == list(range(n))
    assert all(w.status == dv.WC_SUCCESS for w in wcs), \
        [dv.wc_str(w) for w in wcs]
    assert f.ask('sha', off=0, len=n * size)['sha'] == \
        sha(src.addr, n * size)
    assert not qp.cq.poll(n), 'a WRITE completed twice'


def test_local_error_completes_after_window(far_qp):
    """A WRITE that fails in the requester (an lkey that names no MR)
    posted behind 1 MiB WRITEs still on the wire: the WRITEs before it
    complete first, successfully and intact, then it, with
    IBV_WC_LOC_PROT_ERR; the QP goes to ERR and the WQE after it is
    flushed. CQEs in WQE order (IBA 10.8.6), each WQE's exactly once."""
    c, qp, f = far_qp
    n, size = 4, MIB
    src = c.buf(n * size)
    dv.fill(src.addr, n * size, dv.pattern(37))
    mr = c.mr(src.addr, n * size)
    for i in range(n):
        assert qp.post_rdma(i, dv.WR_RDMA_WRITE, src.addr + i * size, size,
                            mr.lkey, f.info['addr'] + i * size,
                            f.info['rkey']) == 0
    bad_lkey = mr.lkey ^ 0x00ffff00
    assert qp.post_rdma(n, dv.WR_RDMA_WRITE, src.addr, 64, bad_lkey,
                        f.info['addr'], f.info['rkey']) == 0
    assert qp.post_rdma(n + 1, dv.WR_RDMA_WRITE, src.addr, 64, mr.lkey,
                        f.info['addr'], f.info['rkey']) == 0
    wcs = qp.cq.wait(n + 2, timeout=120)
    got = [(w.wr_id, w.status) for w in wcs]
    assert got == [(i, dv.WC_SUCCESS) for i in range(n)] + \
        [(n, dv.WC_LOC_PROT_ERR), (n + 1, dv.WC_WR_FLUSH_ERR)], \
        [dv.wc_str(w) for w in wcs]
    assert f.ask('sha', off=0, len=n * size)['sha'] == \
        sha(src.addr, n * size)
    assert qp.state() == dv.QPS_ERR
    assert not qp.cq.poll(n + 2), 'a WQE completed twice'
