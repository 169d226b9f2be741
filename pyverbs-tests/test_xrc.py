# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""XRC on bzc0: XRC domains, XRC SRQs, XRC INI (send) and TGT (receive)
QPs.

An INI QP connected to a TGT QP names, in each work request, the number
of an XRC SRQ at the target (wr.qp_type.xrc.remote_srqn or
ibv_wr_set_xrc_srqn); the message lands in a receive of that SRQ, which
completes on the SRQ's CQ with the TGT QP's number, and its rkeys are
checked in the SRQ's PD. Under test: data arrives intact in the SRQ the
number names (two SRQs behind one TGT QP); SEND with immediate, RDMA
WRITE, READ and atomics through XRC, and a key of another PD refused
(IBV_WC_REM_ACCESS_ERR); a number that names no SRQ, or an SRQ of another
XRC domain, is IBA's invalid request (IBV_WC_REM_INV_REQ_ERR, the TGT QP
to ERR, the SRQ untouched); an XRC domain opened through one file by two
processes, one's TGT QP delivering into the other's SRQ; a TGT QP another
process opened (ibv_open_qp) living on after its creator destroyed it,
and gone (IBV_WC_RETRY_EXC_ERR) once the last handle is closed; the
refusals of the verbs (receives on XRC QPs, sends on a TGT QP, SRQ
numbers of basic SRQs or beyond 24 bits, an XRC SRQ without a CQ).
"""

import errno
import os
import socket
import tempfile

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttrEx
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr, SrqInitAttrEx
from pyverbs.wr import SGE, RecvWR, SendWR
from pyverbs.xrcd import XRCD, XRCDInitAttr
import pytest

import bzc_helpers as h
import xrc_peer

pytestmark = pytest.mark.keeps_netdev

SLOT = 256              # bytes per receive buffer
NRECV = 8               # receives posted to each SRQ


def rdma_errno(fn):
    """The errno of the PyverbsRDMAError fn() raises."""
    with pytest.raises(PyverbsRDMAError) as ex:
        fn()
    return ex.value.error_code


def open_xrcd(ctx, fd):
    """The XRC domain of file `fd` (created if new), or a new unshared one
    for fd -1."""
    return XRCD(ctx, XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD |
                                  e.IBV_XRCD_INIT_ATTR_OFLAGS,
                                  os.O_CREAT, fd))


def tgt_qp(ctx, xrcd):
    return QP(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV,
                                comp_mask=e.IBV_QP_INIT_ATTR_XRCD,
                                xrcd=xrcd))


def ini_qp(ctx, pd, cq, send_ops=None):
    mask = e.IBV_QP_INIT_ATTR_PD
    kw = {}
    if send_ops is not None:
        mask |= e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
        kw['send_ops_flags'] = send_ops
    return QP(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_SEND, pd=pd, scq=cq,
                                comp_mask=mask, sq_sig_all=1,
                                cap=QPCap(max_send_wr=16, max_send_sge=2,
                                          max_recv_wr=0, max_recv_sge=0),
                                **kw))


def connect(ini, tgt, gid, gid_index, retry_cnt=7):
    """INI and TGT QPs to RTS and RTR, each naming the other as its peer."""
    for qp, access in ((ini, 0), (tgt, h.access_all())):
        a = QPAttr()
        a.qp_state = e.IBV_QPS_INIT
        a.pkey_index = 0
        a.port_num = h.PORT
        a.qp_access_flags = access
        qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                  e.IBV_QP_ACCESS_FLAGS)
    for qp, peer in ((ini, tgt), (tgt, ini)):
        a = QPAttr()
        a.qp_state = e.IBV_QPS_RTR
        a.ah_attr = h.ah_attr_for(gid, gid_index)
        a.path_mtu = e.IBV_MTU_1024
        a.dest_qp_num = peer.qp_num
        a.rq_psn = 0
        mask = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN)
        if qp is tgt:
            a.max_dest_rd_atomic = 4
            a.min_rnr_timer = 1
            mask |= e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER
        qp.modify(a, mask)
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTS
    a.sq_psn = 0
    a.timeout = 14
    a.retry_cnt = retry_cnt
    a.rnr_retry = 7
    a.max_rd_atomic = 4
    ini.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT |
               e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
               e.IBV_QP_MAX_QP_RD_ATOMIC)


def qp_state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


class Rig:
    """One process's XRC setup on bzc0: an XRC domain (of a file, so other
    processes can open it), SRQs `srqs` in it each with a PD, CQ and MR of
    its own, one TGT QP of the domain, one INI QP (with its own PD and
    send buffer) connected to it."""

    def __init__(self, srqs=1, send_ops=None):
        self.ctx, self.async_fd = h.open_pyverbs_context()
        self.gid_index = h.find_ipv4_gid_index(self.ctx)
        self.gid = self.ctx.query_gid(h.PORT, self.gid_index)
        self.file = tempfile.NamedTemporaryFile(prefix='bzc-xrcd-')
        self.fd = os.open(self.file.name, os.O_RDONLY)
        self.xrcd = open_xrcd(self.ctx, self.fd)
        self.srqs = []
        for _ in range(srqs):
            self.add_srq()
        self.tgt = tgt_qp(self.ctx, self.xrcd)
        self.spd = PD(self.ctx)
        self.scq = CQ(self.ctx, 64, None, None, 0)
        self.smr = MR(self.spd, 4 * SLOT, h.access_all())
        self.ini = ini_qp(self.ctx, self.spd, self.scq, send_ops)
        connect(self.ini, self.tgt, self.gid, self.gid_index)

    def add_srq(self, xrcd=None):
        s = type('XrcSrq', (), {})()
        s.pd = PD(self.ctx)
        s.cq = CQ(self.ctx, 64, None, None, 0)
        s.mr = MR(s.pd, NRECV * SLOT, h.access_all())
        s.srq = xrc_peer.xrc_srq(self.ctx, s.pd, xrcd or self.xrcd, s.cq,
                                 NRECV)
        s.srqn = s.srq.get_srq_num()
        for i in range(NRECV):
            s.srq.post_recv(RecvWR(wr_id=i, num_sge=1,
                                   sg=[SGE(s.mr.buf + i * SLOT, SLOT,
                                           s.mr.lkey)]))
        self.srqs.append(s)
        return s

    def send(self, srqn, payload, opcode=e.IBV_WR_SEND, imm=0, wr_id=7,
             rdma=None, atomic=None, length=None):
        """One signaled WR from the INI QP naming XRC SRQ srqn; returns
        its completion."""
        self.smr.write(payload, len(payload), 0)
        n = len(payload) if length is None else length
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                    sg=[SGE(self.smr.buf, n, self.smr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if opcode in (e.IBV_WR_SEND_WITH_IMM, e.IBV_WR_RDMA_WRITE_WITH_IMM):
            wr.imm_data = imm
        if rdma:
            wr.set_wr_rdma(*rdma)
        if atomic:
            wr.set_wr_atomic(*atomic)
        wr.set_qp_type_xrc(srqn)
        self.ini.post_send(wr)
        return h.poll_cq(self.scq, 1)[0]

    def close(self):
        for obj in [self.ini, self.smr, self.scq, self.spd, self.tgt]:
            obj.close()
        for s in self.srqs:
            for obj in (s.srq, s.mr, s.cq, s.pd):
                obj.close()
        self.xrcd.close()
        os.close(self.fd)
        self.file.close()
        self.ctx.close()


@pytest.fixture
def rig():
    r = Rig(srqs=2)
    yield r
    r.close()


def test_send_lands_in_the_named_srq(rig):
    """Messages through one TGT QP go to the SRQ each names: data intact,
    the receive on that SRQ's CQ with the TGT QP's number and the INI QP
    as source; the other SRQ sees nothing."""
    a, b = rig.srqs
    for i, (dst, other) in enumerate(((a, b), (b, a), (a, b))):
        payload = bytes((i * 37 + k) & 0xff for k in range(100 + i))
        wc = rig.send(dst.srqn, payload, wr_id=i)
        assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
        assert wc.opcode == e.IBV_WC_SEND and wc.wr_id == i
        rwc = h.poll_cq(dst.cq, 1)[0]
        assert rwc.status == e.IBV_WC_SUCCESS, h.wc_str(rwc)
        assert rwc.opcode == e.IBV_WC_RECV
        assert rwc.byte_len == len(payload)
        assert rwc.qp_num == rig.tgt.qp_num
        assert rwc.src_qp == rig.ini.qp_num
        assert dst.mr.read(len(payload), rwc.wr_id * SLOT) == payload
        assert not h.drain_cq(other.cq)
    assert a.srqn != b.srqn


def test_send_with_imm_and_rdma_in_the_srq_pd(rig):
    """SEND with immediate, RDMA WRITE (with immediate), READ and an atomic
    through XRC, under rkeys of the named SRQ's PD."""
    s = rig.srqs[0]
    wc = rig.send(s.srqn, b'imm', opcode=e.IBV_WR_SEND_WITH_IMM,
                  imm=0x12345678)
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    rwc = h.poll_cq(s.cq, 1)[0]
    assert rwc.status == e.IBV_WC_SUCCESS and rwc.imm_data == 0x12345678
    assert rwc.wc_flags & e.IBV_WC_WITH_IMM

    # Write into the last receive slot (it stays posted: a plain WRITE
    # takes no receive).
    dst = s.mr.buf + (NRECV - 1) * SLOT
    payload = bytes(range(200))
    wc = rig.send(s.srqn, payload, opcode=e.IBV_WR_RDMA_WRITE,
                  rdma=(s.mr.rkey, dst))
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    assert s.mr.read(200, (NRECV - 1) * SLOT) == payload

    wc = rig.send(s.srqn, b'\0' * 64, opcode=e.IBV_WR_RDMA_READ,
                  rdma=(s.mr.rkey, dst), length=64)
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    assert rig.smr.read(64, 0) == payload[:64]

    s.mr.write((5).to_bytes(8, 'little'), 8, (NRECV - 1) * SLOT)
    wc = rig.send(s.srqn, b'\0' * 8, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD,
                  atomic=(s.mr.rkey, dst, 3, 0))
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    assert int.from_bytes(rig.smr.read(8, 0), 'little') == 5
    assert int.from_bytes(s.mr.read(8, (NRECV - 1) * SLOT), 'little') == 8

    wc = rig.send(s.srqn, b'wimm', opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM,
                  imm=0x55, rdma=(s.mr.rkey, dst))
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    rwc = h.poll_cq(s.cq, 1)[0]
    assert rwc.status == e.IBV_WC_SUCCESS, h.wc_str(rwc)
    assert rwc.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM
    assert rwc.imm_data == 0x55 and rwc.qp_num == rig.tgt.qp_num
    assert s.mr.read(4, (NRECV - 1) * SLOT) == b'wimm'


def test_rkey_of_another_pd(rig):
    """The TGT QP has no PD: keys are checked in the named SRQ's. The
    other SRQ's MR (another PD) is a remote access error."""
    a, b = rig.srqs
    before = b.mr.read(16, 0)
    wc = rig.send(a.srqn, b'x' * 16, opcode=e.IBV_WR_RDMA_WRITE,
                  rdma=(b.mr.rkey, b.mr.buf))
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, h.wc_str(wc)
    assert b.mr.read(16, 0) == before
    assert qp_state(rig.ini) == e.IBV_QPS_ERR


@pytest.mark.parametrize('how', ['no_such_srq', 'other_xrcd'])
def test_bad_srq_number_is_invalid_request(how):
    """A number naming no SRQ, or an SRQ of another XRC domain: the sender
    gets IBV_WC_REM_INV_REQ_ERR, the TGT QP goes to ERR, and no SRQ loses
    a receive."""
    r = Rig(srqs=1)
    try:
        if how == 'no_such_srq':
            srqn = (r.srqs[0].srqn + 1000) & 0xffffff
            other = None
        else:
            other_xrcd = open_xrcd(r.ctx, -1)
            other = r.add_srq(xrcd=other_xrcd)
            srqn = other.srqn
        wc = r.send(srqn, b'not for you')
        assert wc.status == e.IBV_WC_REM_INV_REQ_ERR, h.wc_str(wc)
        assert qp_state(r.tgt) == e.IBV_QPS_ERR
        for s in r.srqs:
            assert not h.drain_cq(s.cq, wait=0.2)
        if other is not None:
            # Still all its receives: one arrives over a good connection
            # of its own domain.
            r.srqs.remove(other)
            tgt = tgt_qp(r.ctx, other_xrcd)
            ini = ini_qp(r.ctx, r.spd, r.scq)
            connect(ini, tgt, r.gid, r.gid_index)
            r.smr.write(b'hello', 5, 0)
            wr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(r.smr.buf, 5, r.smr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_qp_type_xrc(other.srqn)
            ini.post_send(wr)
            assert h.poll_cq(r.scq, 1)[0].status == e.IBV_WC_SUCCESS
            rwcs = h.poll_cq(other.cq, 1)
            assert rwcs[0].wr_id == 0 and other.mr.read(5, 0) == b'hello'
            for obj in (ini, tgt, other.srq, other.mr, other.cq, other.pd,
                        other_xrcd):
                obj.close()
    finally:
        r.close()


class Peer(h.LineChild):
    """xrc_peer.py in a process of its own."""

    def __init__(self, *args):
        super().__init__('xrc_peer.py', *args, exit_key='op', timeout=60)


def test_xrcd_shared_by_two_processes():
    """Another process opens the XRC domain through the same file and
    creates an SRQ in it: this process's TGT QP delivers into it."""
    r = Rig(srqs=0)
    peer = Peer('srq', r.file.name, 4)
    try:
        srqn = peer.read()['srqn']
        payloads = [bytes([0x40 + i]) * (64 + i) for i in range(3)]
        for p in payloads:
            wc = r.send(srqn, p)
            assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
        wcs = peer.ask(op='poll', n=3)['wcs']
        assert len(wcs) == 3, wcs
        for w, p in zip(wcs, payloads):
            assert w['status'] == e.IBV_WC_SUCCESS, w
            assert w['qp_num'] == r.tgt.qp_num and w['src_qp'] == r.ini.qp_num
            assert bytes.fromhex(w['data']) == p
    finally:
        peer.close()
        r.close()


def test_opened_tgt_qp_outlives_its_creator_handle():
    """A TGT QP another process opened (ibv_open_qp) is the same QP: it
    stays when its creator destroys its handle, and goes with the last
    one; a message to it then finds nobody (IBV_WC_RETRY_EXC_ERR)."""
    r = Rig(srqs=1)
    s = r.srqs[0]
    peer = Peer('open', r.file.name, r.tgt.qp_num)
    try:
        got = peer.read()
        assert got['query'] == 0, got
        assert got['qp_num'] == r.tgt.qp_num
        assert got['qp_type'] == e.IBV_QPT_XRC_RECV
        assert got['state'] == e.IBV_QPS_RTR
        r.tgt.close()           # the peer's handle keeps the QP
        wc = r.send(s.srqn, b'still there')
        assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
        assert h.poll_cq(s.cq, 1)[0].byte_len == 11
        assert peer.ask(op='close')['closed'] == 0
        wc = r.send(s.srqn, b'gone')
        assert wc.status == e.IBV_WC_RETRY_EXC_ERR, h.wc_str(wc)
        assert not h.drain_cq(s.cq, wait=0.2)
    finally:
        peer.close()
        r.close()


def test_destroyed_tgt_qp():
    """A TGT QP destroyed by its only user is gone: the INI QP's message
    is not answered (IBV_WC_RETRY_EXC_ERR, the INI QP to ERR, later WRs
    flushed) and the SRQ keeps its receives."""
    r = Rig(srqs=1)
    try:
        s = r.srqs[0]
        assert r.send(s.srqn, b'first').status == e.IBV_WC_SUCCESS
        assert h.poll_cq(s.cq, 1)[0].status == e.IBV_WC_SUCCESS
        r.tgt.close()
        wc = r.send(s.srqn, b'second')
        assert wc.status == e.IBV_WC_RETRY_EXC_ERR, h.wc_str(wc)
        assert qp_state(r.ini) == e.IBV_QPS_ERR
        wc = r.send(s.srqn, b'third')
        assert wc.status == e.IBV_WC_WR_FLUSH_ERR, h.wc_str(wc)
        assert not h.drain_cq(s.cq, wait=0.2)
    finally:
        r.close()


def test_send_ops_api_names_the_srq():
    """ibv_wr_set_xrc_srqn: the ibv_wr_* API on an INI QP."""
    from pyverbs.qp import QPEx
    r = Rig(srqs=2)
    try:
        ops = e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM
        qpx = QPEx(r.ctx, QPInitAttrEx(
            qp_type=e.IBV_QPT_XRC_SEND, pd=r.spd, scq=r.scq,
            comp_mask=e.IBV_QP_INIT_ATTR_PD |
            e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, send_ops_flags=ops,
            sq_sig_all=1, cap=QPCap(max_send_wr=8, max_recv_wr=0,
                                    max_recv_sge=0)))
        tgt = tgt_qp(r.ctx, r.xrcd)
        connect(qpx, tgt, r.gid, r.gid_index)
        r.smr.write(b'via wr api', 10, 0)
        for s in reversed(r.srqs):
            qpx.wr_start()
            qpx.wr_id = s.srqn
            qpx.wr_flags = e.IBV_SEND_SIGNALED
            qpx.wr_send_imm(s.srqn)
            qpx.wr_set_sge(SGE(r.smr.buf, 10, r.smr.lkey))
            qpx.wr_set_xrc_srqn(s.srqn)
            qpx.wr_complete()
            assert h.poll_cq(r.scq, 1)[0].status == e.IBV_WC_SUCCESS
            rwc = h.poll_cq(s.cq, 1)[0]
            assert rwc.status == e.IBV_WC_SUCCESS and rwc.qp_num == tgt.qp_num
            # ibv_wr_send_imm() takes host order; the WC has wire order.
            assert rwc.imm_data == socket.htonl(s.srqn)
            assert s.mr.read(10, rwc.wr_id * SLOT) == b'via wr api'
        qpx.close()
        tgt.close()
    finally:
        r.close()


def test_refusals(rig):
    """What the verbs refuse: receives on XRC QPs (XRC SRQs take them),
    sends on a TGT QP, an SRQ number beyond 24 bits, the number of a
    basic SRQ, an XRC SRQ without a CQ."""
    wr = RecvWR(wr_id=1, num_sge=1,
                sg=[SGE(rig.smr.buf, 16, rig.smr.lkey)])
    assert rdma_errno(lambda: rig.ini.post_recv(wr)) == errno.EINVAL
    assert rdma_errno(lambda: rig.tgt.post_recv(wr)) == errno.EINVAL
    swr = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1,
                 sg=[SGE(rig.smr.buf, 16, rig.smr.lkey)])
    swr.set_qp_type_xrc(rig.srqs[0].srqn)
    assert rdma_errno(lambda: rig.tgt.post_send(swr)) == errno.EINVAL
    swr.set_qp_type_xrc(1 << 24)
    assert rdma_errno(lambda: rig.ini.post_send(swr)) == errno.EINVAL
    assert not h.drain_cq(rig.scq, wait=0.1)

    basic = SRQ(rig.srqs[0].pd, SrqInitAttr(SrqAttr(max_wr=4)))
    with pytest.raises(PyverbsError):
        basic.get_srq_num()
    basic.close()

    attr = SrqInitAttrEx(max_wr=4)
    attr.srq_type = e.IBV_SRQT_XRC
    attr.pd = rig.srqs[0].pd
    attr.xrcd = rig.xrcd
    attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                      e.IBV_SRQ_INIT_ATTR_XRCD)
    assert rdma_errno(lambda: SRQ(rig.ctx, attr)) == errno.EINVAL
