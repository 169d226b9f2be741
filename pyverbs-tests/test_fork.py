# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Rings and fork(): a child process does not inherit the rings of its
parent's QPs, CQs and bulk channels (the provider maps each with
MADV_DONTFORK), so it cannot poll, post to or otherwise touch them; the
parent's queues keep working with their completions intact.

Without that, parent and child share the ring memory while each keeps
its own producer and consumer copies: a child that polls consumes the
parent's CQEs, and one that posts writes WQEs the kernel runs as the
parent's (and the parent's next WQE lands in the same slot, unseen).
"""

import ctypes as C
import errno
import faulthandler
import os
import signal

import pyverbs.enums as e
import pytest

import bzc_helpers as h
import bzcdv as dv
import test_qp_hostile as hostile

pytestmark = pytest.mark.keeps_netdev

UVERBS_MAP = '/dev/infiniband/uverbs'


def ring_mappings():
    """The mappings of uverbs devices in this process (the provider maps
    only rings from there)."""
    with open('/proc/self/maps') as f:
        return [ln.rstrip('\n') for ln in f if UVERBS_MAP in ln]


def in_child(fn):
    """Run fn() in a forked child; returns (exit code or None, signal or
    None, bytes the child wrote).  fn returns bytes for the parent."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.close(rd)
            # a fault here is the expected outcome: no traceback dump
            faulthandler.disable()
            os.write(wr, fn() or b'')
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    data = b''
    while True:
        chunk = os.read(rd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(rd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status), data
    return os.WEXITSTATUS(status), None, data


def assert_faulted(res, what):
    code, sig, data = res
    assert sig == signal.SIGSEGV, \
        (f'{what}: the child was not stopped by SIGSEGV (exit {code}, '
         f'signal {sig}, said {data!r}): it reached the parent\'s ring')


class Rig:
    """An RC QP pair a -> b on one context, one MR: slot i of 64 bytes at
    offset 64 * i; a writes slots [0, 32) into slots [32, 64)."""

    def __init__(self):
        self.env = h.VerbsEnv(second_pd=False)
        self.mr = self.env.reg(64 * 64, h.access_all())
        self.mr.write(bytes(64 * 64), 64 * 64)
        self.a = h.QPEnd(self.env.ctx, self.env.pd, e.IBV_QPT_RC,
                         cq_depth=16)
        self.b = h.QPEnd(self.env.ctx, self.env.pd, e.IBV_QPT_RC,
                         cq_depth=16)
        h.connect_qps(self.a, self.b, self.env.gid_index)

    def write_wr(self, wr_id, i, data):
        self.mr.write(data, len(data), 64 * i)
        return h.rdma_wr(wr_id, e.IBV_WR_RDMA_WRITE,
                         [h.sge(self.mr, 64 * i, len(data))],
                         self.mr.rkey, self.mr.buf + 64 * (32 + i))

    def landed(self, i, data):
        return self.mr.read(len(data), 64 * (32 + i)) == data

    def close(self):
        self.a.close()
        self.b.close()
        self.env.close()


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


def payload(i):
    return bytes([0x40 + i]) * 48


def test_child_has_no_ring_mapped(rig):
    """Every ring the parent has mapped (SQs, RQs, CQs) is absent from a
    forked child's address space."""
    mine = ring_mappings()
    assert len(mine) >= 6, f'expected 2 QPs x 2 rings + 4 CQ rings: {mine}'
    res = in_child(lambda: '\n'.join(ring_mappings()).encode())
    assert res[:2] == (0, None), f'child failed: {res}'
    assert res[2] == b'', \
        'the child inherited rings:\n' + res[2].decode()


def test_child_poll_faults_parent_completions_intact(rig):
    """A child that polls the parent's send CQ faults on the unmapped
    ring instead of consuming the parent's CQEs; the parent then polls
    every completion, and the ring goes on working."""
    for i in range(4):
        rig.a.qp.post_send(rig.write_wr(i, i, payload(i)))
    assert h.wait_until(lambda: all(rig.landed(i, payload(i))
                                    for i in range(4)))

    def child():
        n, wcs = rig.a.scq.poll(16)
        return ' '.join(str(w.wr_id) for w in wcs).encode()
    assert_faulted(in_child(child), 'ibv_poll_cq in the child')

    h.expect_wcs(rig.a.scq, [(i, e.IBV_WC_SUCCESS) for i in range(4)],
                 'the parent after the child polled')
    for i in range(4, 20):                  # wraps the 16-entry CQ ring
        rig.a.qp.post_send(rig.write_wr(i, i, payload(i)))
        h.expect_wcs(rig.a.scq, [(i, e.IBV_WC_SUCCESS)], f'write {i}')
        assert rig.landed(i, payload(i))


def test_child_post_faults_parent_sq_intact(rig):
    """A child that posts to the parent's QP faults on the unmapped SQ
    ring: nothing of it runs, and the parent's next WRs run and complete
    as its own."""
    evil = b'\xee' * 48

    def child():
        rig.a.qp.post_send(rig.write_wr(0xc41d, 30, evil))
        return b'posted'
    assert_faulted(in_child(child), 'ibv_post_send in the child')

    for i in range(3):
        rig.a.qp.post_send(rig.write_wr(i, i, payload(i)))
    h.expect_wcs(rig.a.scq, [(i, e.IBV_WC_SUCCESS) for i in range(3)],
                 'the parent after the child posted')
    assert all(rig.landed(i, payload(i)) for i in range(3))
    assert rig.mr.read(48, 64 * (32 + 30)) == bytes(48), \
        "the child's WR ran on the parent's QP"


def test_child_post_recv_faults_parent_rq_intact(rig):
    """A child that posts a receive to the parent's QP faults on the
    unmapped RQ ring; the parent's receives take the parent's SENDs."""
    def child():
        rig.b.qp.post_recv(h.recv_wr(0xc41d, [h.sge(rig.mr, 64 * 40, 64)]))
        return b'posted'
    assert_faulted(in_child(child), 'ibv_post_recv in the child')

    rig.b.qp.post_recv(h.recv_wr(7, [h.sge(rig.mr, 64 * 33, 64)]))
    rig.mr.write(payload(1), 48, 64)
    rig.a.qp.post_send(h.send_wr(1, e.IBV_WR_SEND,
                                 [h.sge(rig.mr, 64, 48)]))
    h.expect_wcs(rig.a.scq, [(1, e.IBV_WC_SUCCESS)], 'send')
    h.expect_wcs(rig.b.rcq, [(7, e.IBV_WC_SUCCESS)], 'the parent receive')
    assert rig.landed(1, payload(1))


def test_child_bulk_post_faults_parent_channel_intact():
    """A child that posts to the parent's bulk channel faults on the
    unmapped ring: its COPY never runs (not even at the parent's next
    doorbell), and the parent's own WRs complete, alone."""
    reason = dv.bulk_available(h.DEV)
    if reason:
        pytest.skip(reason)
    with dv.Ctx(h.DEV) as c:
        n = 4096
        src, dst = c.buf(n), c.buf(n)
        dv.zero(src.addr, n, 0x5a)
        smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n)
        ch = c.chan(depth=4)
        assert len(ring_mappings()) >= 2
        copy = {'op': dv.BULK_COPY, 'sges': [(src.addr, n, smr.lkey)],
                'raddr': dst.addr, 'rkey': dmr.lkey}

        def child():
            return str(ch.post([dict(copy, wr_id=0xc41d)])).encode()
        assert_faulted(in_child(child), 'bzcdv_post_bulk in the child')
        assert dv.read(dst.addr, 16) == bytes(16)

        half = dict(copy, sges=[(src.addr, n // 2, smr.lkey)], wr_id=1)
        wcs = ch.run([half])
        assert [(w.wr_id, w.status, w.byte_len) for w in wcs] == \
            [(1, dv.WC_SUCCESS, n // 2)], [dv.wc_str(w) for w in wcs]
        ch.cq.assert_empty(0.2)
        assert dv.read(dst.addr, n // 2) == b'\x5a' * (n // 2)
        assert dv.read(dst.addr + n // 2, n // 2) == bytes(n // 2), \
            "the child's COPY ran"


# --------------------------------------------------------------------------
# A child's doorbells on the parent's QP
# --------------------------------------------------------------------------
# The child inherits the uverbs fd and with it the QP's handle, though not
# the rings. The kernel reads the rings through its own mapping, so a
# doorbell from the child would run what the parent published in them
# (whenever the child likes, in the child's context). A QP belongs to the
# process that created it: the driver method refuses everyone else's
# doorbell with EPERM, as the bulk doorbell and cached MRs do; the write()
# commands (POST_SEND, POST_RECV) fail in the core already, with EACCES,
# because the child's credentials are not the ones the fd was opened with.

@pytest.fixture
def hostile_rig():
    r = hostile.Rig()
    yield r
    r.close()


def test_child_sq_doorbell_refused(hostile_rig):
    """The parent publishes an RDMA WRITE in its SQ ring without ringing;
    the child's SQ doorbells fail (the POST_SEND command with EACCES, the
    driver method with EPERM) and run nothing; the parent's doorbell then
    runs it."""
    r = hostile_rig
    mr = r.mr.contents
    src = C.addressof(r.buf)
    dst = src + 4096
    data = b'\x5c' * 64
    C.memmove(src, data, len(data))
    wqe = bytearray(hostile.send_wqe(0x5eed, e.IBV_WR_RDMA_WRITE, num_sge=1,
                                     sges=[(src, len(data), mr.lkey)]))
    wqe[16:24] = dst.to_bytes(8, 'little')
    wqe[24:28] = mr.rkey.to_bytes(4, 'little')
    assert len(wqe) <= hostile.sq_slot_size(r)
    C.memmove(r.sq + hostile.WQ_HDR, bytes(wqe), len(wqe))
    hostile.u32_at(r.sq).value = 1          # published, not rung

    res = in_child(lambda: f'{r.doorbell(r.x)} '
                           f'{r.doorbell_method(r.x)}'.encode())
    assert res[:2] == (0, None), f'child failed: {res}'
    assert res[2] == f'{errno.EACCES} {errno.EPERM}'.encode(), \
        f"the child's SQ doorbells (command, method) returned " \
        f"{res[2].decode()}, not EACCES, EPERM"
    assert r.wcs(r.cq_x, timeout=0.5) == [], \
        "the child's doorbell ran the parent's WQE"
    assert C.string_at(dst, len(data)) == bytes(len(data)), \
        "the child's doorbell ran the parent's RDMA WRITE"
    assert hostile.u32_at(r.sq + hostile.WQ_CONS).value == 0

    assert r.doorbell_method(r.x) == 0
    assert r.wcs(r.cq_x, 1) == [(0x5eed, e.IBV_WC_SUCCESS)]
    assert C.string_at(dst, len(data)) == data


def test_child_rq_doorbell_refused(hostile_rig):
    """With the QP in ERR, the parent publishes a receive without ringing;
    the child's RQ doorbell (the POST_RECV command, the only one) fails
    with EACCES and flushes nothing; the parent's doorbell then flushes
    it."""
    r = hostile_rig
    r.modify(r.x, hostile.QpAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    # the receive the rig posted (wr_id 500, slot 0) is flushed by now
    assert r.wcs(r.cq_x, 1) == [(500, e.IBV_WC_WR_FLUSH_ERR)]
    slot = hostile.rq_slot_size()
    first = hostile.WQ_HDR
    C.memmove(r.rq + first + slot, r.rq + first, slot)
    C.c_uint64.from_address(r.rq + first + slot).value = 0x5eed
    hostile.u32_at(r.rq).value = 2          # published, not rung

    res = in_child(lambda: str(r.doorbell(r.x, rq=True)).encode())
    assert res[:2] == (0, None), f'child failed: {res}'
    assert res[2] == str(errno.EACCES).encode(), \
        f"the child's RQ doorbell returned {res[2].decode()}, not EACCES"
    assert r.wcs(r.cq_x, timeout=0.5) == [], \
        "the child's doorbell flushed the parent's receive"

    assert r.doorbell(r.x, rq=True) == 0
    assert r.wcs(r.cq_x, 1) == [(0x5eed, e.IBV_WC_WR_FLUSH_ERR)]
