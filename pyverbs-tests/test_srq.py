# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Shared receive queues on bzc0.

Several QPs created on one SRQ take their receives from it (RC, UC and
UD); the srq_limit event fires when the number of posted receives drops
below the armed limit, once per arm; query/modify, the limits of a post
(ENOMEM past max_wr, EINVAL past max_sge) and of create/modify (EINVAL);
destroying an SRQ a QP still uses fails with EBUSY; a QP on an SRQ that
enters ERR raises IBV_EVENT_QP_LAST_WQE_REACHED and leaves the SRQ's
receives to the other QPs; a producer index or SGE count in the mapped
ring that the SRQ cannot hold is an error (completion, IBV_EVENT_SRQ_ERR),
never a kernel warning; ibv_srq_pingpong runs in loopback.
"""

import ctypes as C
import errno
import subprocess
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr, SrqInitAttrEx
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h
from verbs_ctypes import RawContext

pytestmark = pytest.mark.keeps_netdev

QUIET = 0.5             # how long "no event" is waited for
MSG = 256               # bytes per message (+ 40 for a UD GRH)
WQ_HDR = 128            # BZC_WQ_RING_WQE_OFFSET (bzc-abi.h)
WQ_ERROR = 4            # offsetof(struct bzc_wq_ring_hdr, error)
WQ_CONS = 64            # offsetof(struct bzc_wq_ring_hdr, cons)


def rdma_errno(fn):
    """The errno of a PyverbsRDMAError fn() raises (AssertionError if it
    does not raise)."""
    with pytest.raises(PyverbsRDMAError) as ex:
        fn()
    return ex.value.error_code


class Rig:
    """One SRQ, `pairs` client QPs each connected to a server QP on the
    SRQ; the server QPs share one receive CQ.  Buffers: receive slot i at
    mr.buf + i * SLOT, client send buffers after the receive slots."""

    SLOT = 512

    def __init__(self, qp_type=e.IBV_QPT_RC, pairs=3, srq_wr=64,
                 srq_sge=1):
        self.ctx, self.async_fd = h.open_pyverbs_context()
        self.qp_type = qp_type
        self.pd = PD(self.ctx)
        self.gid_index = h.find_ipv4_gid_index(self.ctx)
        self.gid = self.ctx.query_gid(h.PORT, self.gid_index)
        before = h.uverbs_maps()
        self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=srq_wr,
                                                    max_sge=srq_sge)))
        new = {a: n for a, n in h.uverbs_maps().items() if a not in before}
        assert len(new) == 1, f'expected one new mapping (the SRQ ring), ' \
            f'found {new}'
        self.ring = next(iter(new))
        self.rcq = CQ(self.ctx, 1024, None, None, 0)
        self.scq = CQ(self.ctx, 1024, None, None, 0)
        self.nslots = 128
        self.mr = MR(self.pd, self.SLOT * self.nslots * 2, h.access_all())
        self.servers, self.clients = [], []
        for _ in range(pairs):
            self.add_pair()

    def add_pair(self):
        srv = QP(self.pd, QPInitAttr(qp_type=self.qp_type, scq=self.scq,
                                     rcq=self.rcq, srq=self.srq,
                                     cap=QPCap(max_send_wr=16,
                                               max_recv_wr=0,
                                               max_recv_sge=0)))
        cli = h.QPEnd(self.ctx, self.pd, self.qp_type,
                      QPCap(max_send_wr=64, max_recv_wr=4), cq_depth=256)
        for me, peer in ((srv, cli.qp), (cli.qp, srv)):
            h.bring_up_qp(me, self.qp_type, self.gid, self.gid_index,
                          peer.qp_num)
        self.servers.append(srv)
        self.clients.append(cli)

    def recv_addr(self, slot):
        return self.mr.buf + slot * self.SLOT

    def post_recv(self, slots, wr_base=0):
        for s in slots:
            self.srq.post_recv(RecvWR(wr_id=wr_base + s, num_sge=1,
                                      sg=[SGE(self.recv_addr(s), self.SLOT,
                                              self.mr.lkey)]))

    def send(self, i, payload, wr_id=0):
        """Client i sends payload (at most SLOT bytes) to its server."""
        src = self.mr.buf + (self.nslots + i) * self.SLOT
        self.mr.write(payload, len(payload), src - self.mr.buf)
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(src, len(payload), self.mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if self.qp_type == e.IBV_QPT_UD:
            from pyverbs.addr import AH
            if not hasattr(self, 'ah'):
                self.ah = AH(self.pd, attr=h.ah_attr_for(self.gid,
                                                         self.gid_index))
            wr.set_wr_ud(self.ah, self.servers[i].qp_num, h.UD_QKEY)
        self.clients[i].qp.post_send(wr)
        wc = h.poll_cq(self.clients[i].scq, 1)[0]
        return wc

    def event(self, timeout):
        return h.pyverbs_async_event(self.ctx, self.async_fd, timeout)

    def events(self, timeout):
        out = []
        while True:
            ev = self.event(timeout)
            if ev is None:
                return out
            out.append(ev)

    def srq_count(self):
        """Receives posted and not yet taken, from the ring header."""
        prod = C.c_uint32.from_address(self.ring).value
        cons = C.c_uint32.from_address(self.ring + WQ_CONS).value
        return (prod - cons) & 0xffffffff

    def close(self):
        for c in self.clients:
            c.close()
        for s in self.servers:
            s.close()
        if hasattr(self, 'ah'):
            self.ah.close()
        self.srq.close()
        self.mr.close()
        self.rcq.close()
        self.scq.close()
        self.pd.close()
        self.ctx.close()


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


# --------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------

def test_device_advertises_srq(ctx):
    a = ctx.query_device()
    assert a.max_srq > 0 and a.max_srq_wr > 0 and a.max_srq_sge > 0, \
        f'max_srq {a.max_srq} max_srq_wr {a.max_srq_wr} ' \
        f'max_srq_sge {a.max_srq_sge}'


@pytest.mark.parametrize('max_wr,max_sge', [(1, 0), (10, 2), (100, 5),
                                            (1000, 32)])
def test_create_query(ctx, max_wr, max_sge):
    pd = PD(ctx)
    try:
        init = SrqInitAttr(SrqAttr(max_wr=max_wr, max_sge=max_sge,
                                   srq_limit=5))
        srq = SRQ(pd, init)
        # what ibv_create_srq reports is what query says, at least the ask
        assert init.max_wr >= max_wr and init.max_sge >= max_sge
        q = srq.query()
        assert (q.max_wr, q.max_sge) == (init.max_wr, init.max_sge)
        assert q.srq_limit == 0, 'srq_limit of create is not an arm'
        srq.close()
    finally:
        pd.close()


def test_create_bad_attrs_einval(ctx):
    a = ctx.query_device()
    pd = PD(ctx)
    try:
        for wr, sge in ((0, 1), (a.max_srq_wr + 1, 1),
                        (16, a.max_srq_sge + 1)):
            err = rdma_errno(lambda: SRQ(pd, SrqInitAttr(
                SrqAttr(max_wr=wr, max_sge=sge))))
            assert err == errno.EINVAL, f'max_wr {wr} max_sge {sge}: {err}'
        # the largest legal one is fine
        SRQ(pd, SrqInitAttr(SrqAttr(max_wr=a.max_srq_wr,
                                    max_sge=a.max_srq_sge))).close()
    finally:
        pd.close()


def test_create_srq_ex(ctx):
    pd = PD(ctx)
    try:
        attr = SrqInitAttrEx(max_wr=8, max_sge=1)
        attr.comp_mask = e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD
        attr.srq_type = e.IBV_SRQT_BASIC
        attr.pd = pd
        srq = SRQ(ctx, attr)
        assert srq.query().max_wr >= 8
        srq.close()
        # An XRC SRQ needs an XRC domain and a CQ (test_xrc.py has the
        # rest); a tag-matching one is not supported: a clean EOPNOTSUPP
        attr = SrqInitAttrEx(max_wr=8, max_sge=1)
        attr.comp_mask = e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD
        attr.srq_type = e.IBV_SRQT_XRC
        attr.pd = pd
        assert rdma_errno(lambda: SRQ(ctx, attr)) == errno.EINVAL
        cq = CQ(ctx, 8, None, None, 0)
        attr = SrqInitAttrEx(max_wr=8, max_sge=1)
        attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                          e.IBV_SRQ_INIT_ATTR_CQ)
        attr.srq_type = e.IBV_SRQT_TM
        attr.pd = pd
        attr.cq = cq
        assert rdma_errno(lambda: SRQ(ctx, attr)) == errno.EOPNOTSUPP
        cq.close()
    finally:
        pd.close()


def test_modify_limit_and_bad_modify(ctx):
    pd = PD(ctx)
    try:
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
        max_wr = srq.query().max_wr
        srq.modify(SrqAttr(srq_limit=3), e.IBV_SRQ_LIMIT)
        assert srq.query().srq_limit == 3
        srq.modify(SrqAttr(srq_limit=0), e.IBV_SRQ_LIMIT)     # disarm
        assert srq.query().srq_limit == 0
        # a limit the SRQ cannot reach, an unknown attribute bit
        assert rdma_errno(lambda: srq.modify(
            SrqAttr(srq_limit=max_wr + 1), e.IBV_SRQ_LIMIT)) == errno.EINVAL
        assert rdma_errno(lambda: srq.modify(
            SrqAttr(srq_limit=1), 1 << 5)) == errno.EINVAL
        # sizes the device does not take: 0, beyond max_srq_wr
        for wr in (0, ctx.query_device().max_srq_wr + 1):
            assert rdma_errno(lambda: srq.modify(
                SrqAttr(max_wr=wr), e.IBV_SRQ_MAX_WR)) == errno.EINVAL, wr
        q = srq.query()
        assert (q.max_wr, q.srq_limit) == (max_wr, 0)
        srq.close()
    finally:
        pd.close()


# --------------------------------------------------------------------------
# Resize (IBV_SRQ_MAX_WR)
# --------------------------------------------------------------------------

def srq_ring_of(rig):
    """Re-find the SRQ ring's mapping after a resize moved it: the one
    uverbs mapping that is new since the last call."""
    maps = h.uverbs_maps()
    new = [a for a in maps if a not in rig.known_maps]
    rig.known_maps = set(maps)
    assert len(new) == 1, f'expected the new SRQ ring mapped once: {new}'
    assert rig.ring not in maps, 'the old SRQ ring is still mapped'
    rig.ring = new[0]
    return maps[new[0]]


def resize(rig, max_wr):
    rig.known_maps = set(h.uverbs_maps())
    rig.srq.modify(SrqAttr(max_wr=max_wr), e.IBV_SRQ_MAX_WR)
    return srq_ring_of(rig)


def receive_in_order(rig, wr_ids, tag):
    """Send one message per expected receive from client 0 and check
    each lands in the next posted WQE, in posting order, intact."""
    for n, wr_id in enumerate(wr_ids):
        payload = bytes([(tag + n) & 0xff]) * (MSG - n % 7)
        wc = rig.send(0, payload, wr_id=n)
        assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
        rwc = h.poll_cq(rig.rcq, 1)[0]
        assert rwc.status == e.IBV_WC_SUCCESS, h.wc_str(rwc)
        assert rwc.wr_id == wr_id, f'receive {n}: got WQE {rwc.wr_id}, ' \
            f'want {wr_id} (posting order lost)'
        assert rwc.byte_len == len(payload)
        slot = wr_id % rig.nslots
        got = rig.mr.read(len(payload), rig.recv_addr(slot) - rig.mr.buf)
        assert got == payload, f'receive {n}: data differs'


def test_device_advertises_srq_resize(ctx):
    assert ctx.query_device().device_cap_flags & e.IBV_DEVICE_SRQ_RESIZE


def test_resize_grow_keeps_posted_wqes(ctx):
    """Grow an SRQ holding posted receives, twice, with traffic between:
    every WQE posted before is taken after, in posting order, with its
    buffers; the new room can be filled; the old ring is unmapped."""
    r = Rig(pairs=1, srq_wr=16)
    try:
        assert r.srq.query().max_wr == 16
        r.post_recv(range(10))
        receive_in_order(r, range(3), 0x10)     # cons 3 prod 10
        length = resize(r, 40)
        q = r.srq.query()
        assert q.max_wr >= 40 and length >= 128 + q.max_wr * 32, (q.max_wr,
                                                                 length)
        assert r.srq_count() == 7, 'posted WQEs lost in the resize'
        # fill the new room: 7 + 33 = 40 posted, slots 10..42
        r.post_recv(range(10, 43))
        assert r.srq_count() == 40
        receive_in_order(r, range(3, 20), 0x40)
        resize(r, 100)
        assert r.srq.query().max_wr >= 100
        assert r.srq_count() == 23
        r.post_recv(range(43, 100))
        receive_in_order(r, range(20, 100), 0x80)
        assert r.srq_count() == 0
        assert h.drain_cq(r.rcq, 0.1) == []
    finally:
        r.close()


def test_resize_shrink(ctx):
    """Shrinking to fewer slots than receives are posted is EINVAL and
    changes nothing; shrinking to what they fit in keeps them."""
    r = Rig(pairs=1, srq_wr=64)
    try:
        r.post_recv(range(20))
        receive_in_order(r, range(2), 0x20)     # 18 posted
        r.known_maps = set(h.uverbs_maps())
        assert rdma_errno(lambda: r.srq.modify(
            SrqAttr(max_wr=17), e.IBV_SRQ_MAX_WR)) == errno.EINVAL
        assert r.srq.query().max_wr == 64
        assert set(h.uverbs_maps()) == r.known_maps, 'a failed resize ' \
            'changed the mappings'
        assert r.srq_count() == 18
        resize(r, 18)
        q = r.srq.query()
        assert 18 <= q.max_wr < 64, q.max_wr
        assert r.srq_count() == 18
        # full at max_wr: one more is ENOMEM until one is taken
        r.post_recv(range(20, 20 + q.max_wr - 18))
        assert rdma_errno(lambda: r.post_recv([99])) == errno.ENOMEM
        receive_in_order(r, range(2, 20 + q.max_wr - 18), 0x30)
    finally:
        r.close()


def test_resize_keeps_srq_limit(ctx):
    """An armed srq_limit stays armed through a resize and fires once
    below it; a size below the armed limit is EINVAL."""
    r = Rig(pairs=1, srq_wr=32)
    try:
        # nothing posted yet: only the limit stands in the way
        r.srq.modify(SrqAttr(srq_limit=10), e.IBV_SRQ_LIMIT)
        assert rdma_errno(lambda: r.srq.modify(
            SrqAttr(max_wr=9), e.IBV_SRQ_MAX_WR)) == errno.EINVAL
        assert r.srq.query().max_wr == 32
        r.post_recv(range(12))
        resize(r, 64)
        q = r.srq.query()
        assert q.srq_limit == 10 and q.max_wr >= 64, (q.srq_limit, q.max_wr)
        receive_in_order(r, range(2), 0x50)     # 10 left: not below
        assert e.IBV_EVENT_SRQ_LIMIT_REACHED not in r.events(QUIET)
        receive_in_order(r, range(2, 3), 0x60)  # 9 left
        evs = r.events(QUIET)
        assert evs.count(e.IBV_EVENT_SRQ_LIMIT_REACHED) == 1, evs
        assert r.srq.query().srq_limit == 0
    finally:
        r.close()


def test_resize_with_several_qps_and_limit_and_size_together(ctx):
    """IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT in one call; three QPs keep taking
    receives from the resized SRQ."""
    r = Rig(pairs=3, srq_wr=8)
    try:
        r.post_recv(range(8))
        r.known_maps = set(h.uverbs_maps())
        r.srq.modify(SrqAttr(max_wr=24, srq_limit=2),
                     e.IBV_SRQ_MAX_WR | e.IBV_SRQ_LIMIT)
        srq_ring_of(r)
        q = r.srq.query()
        assert q.max_wr >= 24 and q.srq_limit == 2
        r.post_recv(range(8, 24))
        got = []
        for n in range(24):
            wc = r.send(n % 3, bytes([n]) * 64, wr_id=n)
            assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
            got.append(h.poll_cq(r.rcq, 1)[0].wr_id)
        assert got == list(range(24))
    finally:
        r.close()


@pytest.mark.parametrize('case', ['prod_beyond_ring', 'prod_behind_cons'])
def test_resize_hostile_ring(rig, case):
    """A producer index the ring cannot hold is refused by a resize
    (EINVAL, a kernel log line), never copied from or trusted."""
    max_wr = rig.srq.query().max_wr
    bad = max_wr + 5 if case == 'prod_beyond_ring' else 0xfffffff0
    C.c_uint32.from_address(rig.ring).value = bad
    kmsg = h.KmsgReader()
    try:
        assert rdma_errno(lambda: rig.srq.modify(
            SrqAttr(max_wr=2 * max_wr), e.IBV_SRQ_MAX_WR)) == errno.EINVAL
        lines = kmsg.read_new()
    finally:
        kmsg.close()
    assert any('SRQ' in line and 'resize' in line for line in lines), lines
    assert rig.srq.query().max_wr == max_wr


# --------------------------------------------------------------------------
# Posting
# --------------------------------------------------------------------------

def test_post_more_than_max_wr_enomem(rig):
    max_wr = rig.srq.query().max_wr
    assert max_wr <= rig.nslots
    rig.post_recv(range(max_wr))
    assert rig.srq_count() == max_wr
    assert rdma_errno(lambda: rig.post_recv([0])) == errno.ENOMEM
    assert rig.srq_count() == max_wr
    # one consumed frees one slot
    wc = rig.send(0, b'x' * 16)
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    assert h.poll_cq(rig.rcq, 1)[0].status == e.IBV_WC_SUCCESS
    rig.post_recv([0])
    assert rdma_errno(lambda: rig.post_recv([1])) == errno.ENOMEM


def test_post_too_many_sge_einval(rig):
    max_sge = rig.srq.query().max_sge
    sg = [SGE(rig.recv_addr(0), 8, rig.mr.lkey)] * (max_sge + 1)
    err = rdma_errno(lambda: rig.srq.post_recv(
        RecvWR(wr_id=1, num_sge=len(sg), sg=sg)))
    assert err == errno.EINVAL
    assert rig.srq_count() == 0


def test_post_recv_on_qp_with_srq_einval(rig):
    wr = RecvWR(wr_id=1, num_sge=1, sg=[SGE(rig.recv_addr(0), 8,
                                             rig.mr.lkey)])
    assert rdma_errno(lambda: rig.servers[0].post_recv(wr)) == errno.EINVAL


# --------------------------------------------------------------------------
# Traffic
# --------------------------------------------------------------------------

@pytest.mark.parametrize('qp_type', [e.IBV_QPT_RC, e.IBV_QPT_UC,
                                     e.IBV_QPT_UD], ids=['rc', 'uc', 'ud'])
def test_traffic_from_several_qps(qp_type):
    r = Rig(qp_type=qp_type, pairs=3)
    try:
        per = 5
        n = per * len(r.clients)
        r.post_recv(range(n), wr_base=1000)
        sent = {}
        for j in range(per):
            for i in range(len(r.clients)):
                payload = bytes([i * 16 + j]) * (MSG - j)
                wc = r.send(i, payload, wr_id=i * 100 + j)
                assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
                sent[payload] = r.servers[i].qp_num
        wcs = h.poll_cq(r.rcq, n)
        grh = h.GRH_BYTES if qp_type == e.IBV_QPT_UD else 0
        got = {}
        for wc in wcs:
            assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
            assert wc.opcode == e.IBV_WC_RECV, h.wc_str(wc)
            slot = wc.wr_id - 1000
            assert 0 <= slot < n, h.wc_str(wc)
            data = r.mr.read(wc.byte_len - grh, r.SLOT * slot + grh)
            assert data in sent, f'slot {slot}: unexpected data {data[:8]!r}'
            assert wc.qp_num == sent[data], \
                f'{h.wc_str(wc)}: delivered to the wrong QP'
            assert data not in got, 'a message arrived twice'
            got[data] = slot
        assert len(got) == n
        assert r.srq_count() == 0
        assert h.drain_cq(r.rcq, 0.1) == []
    finally:
        r.close()


def test_rnr_until_srq_has_a_receive(rig):
    """RC: no receive in the SRQ is an RNR NAK, retried (rnr_retry 7)
    until one is posted."""
    cli = rig.clients[1]
    src = rig.mr.buf + rig.nslots * rig.SLOT
    rig.mr.write(b'r' * 64, 64, src - rig.mr.buf)
    cli.qp.post_send(SendWR(wr_id=7, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(src, 64, rig.mr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
    time.sleep(0.3)
    assert h.drain_cq(cli.scq) == [], 'completed without a receive'
    rig.post_recv([3])
    wc = h.poll_cq(cli.scq, 1)[0]
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    wc = h.poll_cq(rig.rcq, 1)[0]
    assert (wc.status, wc.wr_id, wc.byte_len, wc.qp_num) == \
        (e.IBV_WC_SUCCESS, 3, 64, rig.servers[1].qp_num), h.wc_str(wc)
    assert rig.mr.read(64, 3 * rig.SLOT) == b'r' * 64


# --------------------------------------------------------------------------
# The limit event
# --------------------------------------------------------------------------

def test_limit_event_once_per_arm(rig):
    limit = 4
    rig.post_recv(range(8))
    rig.srq.modify(SrqAttr(srq_limit=limit), e.IBV_SRQ_LIMIT)
    # 8 -> 4 posted: never below the limit, no event, still armed
    for k in range(4):
        assert rig.send(k % 3, b'a' * 32).status == e.IBV_WC_SUCCESS
    assert rig.srq_count() == limit
    assert rig.events(QUIET) == [], 'event before dropping below the limit'
    assert rig.srq.query().srq_limit == limit
    # 4 -> 3: below the limit, exactly one event, then disarmed
    assert rig.send(0, b'b' * 32).status == e.IBV_WC_SUCCESS
    assert rig.events(QUIET) == [e.IBV_EVENT_SRQ_LIMIT_REACHED]
    assert rig.srq.query().srq_limit == 0
    for k in range(3):
        assert rig.send(k, b'c' * 32).status == e.IBV_WC_SUCCESS
    assert rig.srq_count() == 0
    assert rig.events(QUIET) == [], 'more than one event per arm'
    h.poll_cq(rig.rcq, 8)
    # armed again: one more event
    rig.post_recv(range(10, 20))
    rig.srq.modify(SrqAttr(srq_limit=6), e.IBV_SRQ_LIMIT)
    for k in range(4):
        assert rig.send(k % 3, b'd' * 32).status == e.IBV_WC_SUCCESS
    assert rig.srq_count() == 6
    assert rig.events(QUIET) == []
    for k in range(3):
        assert rig.send(k % 3, b'e' * 32).status == e.IBV_WC_SUCCESS
    assert rig.events(QUIET) == [e.IBV_EVENT_SRQ_LIMIT_REACHED]
    h.poll_cq(rig.rcq, 7)


# --------------------------------------------------------------------------
# QPs on the SRQ: ERR, destroy
# --------------------------------------------------------------------------

def test_qp_err_last_wqe_reached_srq_not_flushed(rig):
    rig.post_recv(range(6))
    h.qp_to_err(rig.servers[0])
    assert rig.events(QUIET) == [e.IBV_EVENT_QP_LAST_WQE_REACHED]
    # the SRQ's receives are not the QP's: nothing flushed
    assert h.drain_cq(rig.rcq, 0.2) == [], 'SRQ receives were flushed'
    assert rig.srq_count() == 6
    # and the other QPs still get them
    for k in range(6):
        wc = rig.send(1 + k % 2, bytes([k]) * 48)
        assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    wcs = h.poll_cq(rig.rcq, 6)
    assert all(w.status == e.IBV_WC_SUCCESS for w in wcs)
    assert {w.qp_num for w in wcs} == {rig.servers[1].qp_num,
                                       rig.servers[2].qp_num}
    # the client of the QP in ERR gets no receive: retries, then an error
    src = rig.mr.buf + rig.nslots * rig.SLOT
    cli = rig.clients[0]
    cli.qp.post_send(SendWR(wr_id=9, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(src, 8, rig.mr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
    rig.post_recv([40])
    wc = h.poll_cq(cli.scq, 1)[0]
    assert wc.status != e.IBV_WC_SUCCESS, 'delivered to a QP in ERR'
    assert rig.srq_count() == 1


def test_destroy_srq_with_qp_ebusy():
    """ibv_destroy_srq() while a QP uses the SRQ fails with EBUSY and
    leaves it usable (ctypes: pyverbs destroys the QPs first)."""
    lib = C.CDLL('libibverbs.so.1', use_errno=True)
    lib.ibv_create_cq.restype = C.c_void_p
    lib.ibv_create_cq.argtypes = [C.c_void_p, C.c_int, C.c_void_p,
                                  C.c_void_p, C.c_int]
    lib.ibv_destroy_cq.argtypes = [C.c_void_p]
    lib.ibv_create_srq.restype = C.c_void_p
    lib.ibv_create_srq.argtypes = [C.c_void_p, C.c_void_p]
    lib.ibv_destroy_srq.argtypes = [C.c_void_p]
    lib.ibv_query_srq.argtypes = [C.c_void_p, C.c_void_p]
    lib.ibv_create_qp.restype = C.c_void_p
    lib.ibv_create_qp.argtypes = [C.c_void_p, C.c_void_p]
    lib.ibv_destroy_qp.argtypes = [C.c_void_p]

    class SrqAttr_(C.Structure):    # struct ibv_srq_attr
        _fields_ = [('max_wr', C.c_uint32), ('max_sge', C.c_uint32),
                    ('srq_limit', C.c_uint32)]

    class SrqInit(C.Structure):     # struct ibv_srq_init_attr
        _fields_ = [('srq_context', C.c_void_p), ('attr', SrqAttr_)]

    class QpInit(C.Structure):      # struct ibv_qp_init_attr
        _fields_ = [('qp_context', C.c_void_p), ('send_cq', C.c_void_p),
                    ('recv_cq', C.c_void_p), ('srq', C.c_void_p),
                    ('cap', C.c_uint32 * 5), ('qp_type', C.c_int),
                    ('sq_sig_all', C.c_int)]

    with RawContext(h.DEV) as raw:
        ctx = C.cast(raw.ctx, C.c_void_p).value
        pd = raw.alloc_pd()
        pdp = C.cast(pd, C.c_void_p).value
        cq = lib.ibv_create_cq(ctx, 16, None, None, 0)
        assert cq, f'create_cq: errno {C.get_errno()}'
        srq = lib.ibv_create_srq(pdp, C.byref(SrqInit(None, SrqAttr_(8, 1, 0))))
        assert srq, f'create_srq: errno {C.get_errno()}'
        qps = []
        for _ in range(2):
            ia = QpInit(send_cq=cq, recv_cq=cq, srq=srq, qp_type=e.IBV_QPT_RC)
            ia.cap[:] = [8, 0, 1, 0, 0]
            qp = lib.ibv_create_qp(pdp, C.byref(ia))
            assert qp, f'create_qp: errno {C.get_errno()}'
            qps.append(qp)
        attr = SrqAttr_()
        for qp in qps:
            assert lib.ibv_destroy_srq(srq) == errno.EBUSY
            assert lib.ibv_query_srq(srq, C.byref(attr)) == 0
            assert attr.max_wr >= 8
            assert lib.ibv_destroy_qp(qp) == 0
        assert lib.ibv_destroy_srq(srq) == 0
        assert lib.ibv_destroy_cq(cq) == 0
        raw.dealloc_pd(pd)


# --------------------------------------------------------------------------
# A hostile process scribbling over its SRQ ring
# --------------------------------------------------------------------------

@pytest.mark.parametrize('case', ['prod_beyond_ring', 'prod_behind_cons',
                                  'num_sge_255'])
def test_hostile_srq_ring(rig, case):
    max_wr = rig.srq.query().max_wr
    if case == 'num_sge_255':
        rig.post_recv([0])
        # the slot of WQE 0: num_sge is the byte after wr_id
        C.c_uint8.from_address(rig.ring + WQ_HDR + 8).value = 255
    elif case == 'prod_beyond_ring':
        C.c_uint32.from_address(rig.ring).value = max_wr + 5
    else:
        C.c_uint32.from_address(rig.ring).value = 0xfffffff0
    wc = rig.send(0, b'h' * 32)
    # RC: the responder's failure is the requester's error
    assert wc.status == e.IBV_WC_REM_OP_ERR, h.wc_str(wc)
    evs = rig.events(QUIET)
    assert e.IBV_EVENT_SRQ_ERR in evs, f'no IBV_EVENT_SRQ_ERR: {evs}'
    assert evs.count(e.IBV_EVENT_SRQ_ERR) == 1, evs
    assert e.IBV_EVENT_QP_FATAL in evs, evs
    # the ring says so too
    assert C.c_uint32.from_address(rig.ring + WQ_ERROR).value != 0
    # a broken SRQ stays broken: another QP's sender fails as well
    wc = rig.send(1, b'i' * 32)
    assert wc.status == e.IBV_WC_REM_OP_ERR, h.wc_str(wc)
    assert e.IBV_EVENT_SRQ_ERR not in rig.events(QUIET)
    # no receive completed from a corrupt ring
    assert h.drain_cq(rig.rcq, 0.1) == []
    # everything is still destroyable (the fixture closes it)


# --------------------------------------------------------------------------
# ibv_srq_pingpong in loopback
# --------------------------------------------------------------------------

@pytest.mark.parametrize('args', [['-q', '4', '-n', '200', '-s', '4096',
                                   '-c'],
                                  ['-q', '16', '-n', '50', '-s', '64',
                                   '-e']],
                         ids=['4qp-chk', '16qp-events'])
def test_ibv_srq_pingpong(ctx, args):
    gid_index = str(h.find_ipv4_gid_index(ctx))
    port = 18600 + int(args[1])         # one port per case
    base = ['ibv_srq_pingpong', '-d', h.DEV, '-g', gid_index, '-p',
            str(port)] + args
    srv = subprocess.Popen(base, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        # Probing the port would be taken for the client: wait until it
        # is listening instead.
        assert h.wait_until(lambda: _listening(port) or
                            srv.poll() is not None, 30), 'server not up'
        cli = h.run(base + [h.IPV4], check=False, timeout=240)
        out, _ = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    assert cli.returncode == 0, f'client exit {cli.returncode}\n' \
        f'{cli.stdout}\n{cli.stderr}\nserver:\n{out}'
    assert srv.returncode == 0, f'server exit {srv.returncode}\n{out}'
    assert 'iters in' in cli.stdout and 'iters in' in out


def _listening(port):
    """Is something listening on TCP port (any family)?  /proc/net/tcp*
    lines: sl local rem st ...; st 0A is LISTEN."""
    for path in ('/proc/net/tcp', '/proc/net/tcp6'):
        with open(path) as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[1].endswith(f':{port:04X}') and parts[3] == '0A':
                    return True
    return False
