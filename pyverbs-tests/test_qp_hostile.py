# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Hostile userspace against the QP rings, and a process killed in the
middle of traffic.

The SQ and RQ rings of a QP are mapped into the process (bzc-abi.h); the
kernel must treat everything in them as hostile.  These tests scribble
over the mapped rings of their own QP - producer indices far beyond the
ring or behind it, WQEs with 255 SGEs, opcode 99, a huge inline length,
SGEs that wrap the address space, random bytes - and ring the doorbell
themselves (the POST_SEND write with wr_count 0, which is all the
provider's doorbell is).  The process must get error completions or a QP
in ERR with IBV_EVENT_QP_FATAL; the kernel must not warn or oops (the
kernel log check of conftest.py) and everything must still be destroyable.

The QP is built with ctypes on libibverbs (the raw doorbell needs the
QP's kernel handle, which pyverbs does not expose); its rings are found
as the two new mappings of /dev/infiniband/uverbs* in /proc/self/maps
after ibv_create_qp (a C helper would do the same, but compiling one
takes most of a minute in the TCG guest).
"""

import ctypes
import fcntl
import os
import random
import select
import signal
import struct
import time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QPCap
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h
from verbs_ctypes import RawContext

pytestmark = pytest.mark.keeps_netdev

# --------------------------------------------------------------------------
# libibverbs through ctypes (rdma-core 44, x86-64 layouts, sizes checked)
# --------------------------------------------------------------------------

C = ctypes
lib = C.CDLL('libibverbs.so.1', use_errno=True)


class QpCap(C.Structure):
    _fields_ = [(n, C.c_uint32) for n in (
        'max_send_wr', 'max_recv_wr', 'max_send_sge', 'max_recv_sge',
        'max_inline_data')]


class QpInitAttr(C.Structure):
    _fields_ = [('qp_context', C.c_void_p), ('send_cq', C.c_void_p),
                ('recv_cq', C.c_void_p), ('srq', C.c_void_p),
                ('cap', QpCap), ('qp_type', C.c_int), ('sq_sig_all', C.c_int)]


class Qp(C.Structure):
    _fields_ = [('context', C.c_void_p), ('qp_context', C.c_void_p),
                ('pd', C.c_void_p), ('send_cq', C.c_void_p),
                ('recv_cq', C.c_void_p), ('srq', C.c_void_p),
                ('handle', C.c_uint32), ('qp_num', C.c_uint32),
                ('state', C.c_int), ('qp_type', C.c_int)]


class GlobalRoute(C.Structure):
    # union ibv_gid: 16 bytes, 8-byte aligned
    _fields_ = [('dgid', C.c_uint64 * 2), ('flow_label', C.c_uint32),
                ('sgid_index', C.c_uint8), ('hop_limit', C.c_uint8),
                ('traffic_class', C.c_uint8)]


class AhAttr(C.Structure):
    _fields_ = [('grh', GlobalRoute), ('dlid', C.c_uint16),
                ('sl', C.c_uint8), ('src_path_bits', C.c_uint8),
                ('static_rate', C.c_uint8), ('is_global', C.c_uint8),
                ('port_num', C.c_uint8)]


class QpAttr(C.Structure):
    _fields_ = [('qp_state', C.c_int), ('cur_qp_state', C.c_int),
                ('path_mtu', C.c_int), ('path_mig_state', C.c_int),
                ('qkey', C.c_uint32), ('rq_psn', C.c_uint32),
                ('sq_psn', C.c_uint32), ('dest_qp_num', C.c_uint32),
                ('qp_access_flags', C.c_uint), ('cap', QpCap),
                ('ah_attr', AhAttr), ('alt_ah_attr', AhAttr),
                ('pkey_index', C.c_uint16), ('alt_pkey_index', C.c_uint16),
                ('en_sqd_async_notify', C.c_uint8),
                ('sq_draining', C.c_uint8), ('max_rd_atomic', C.c_uint8),
                ('max_dest_rd_atomic', C.c_uint8),
                ('min_rnr_timer', C.c_uint8), ('port_num', C.c_uint8),
                ('timeout', C.c_uint8), ('retry_cnt', C.c_uint8),
                ('rnr_retry', C.c_uint8), ('alt_port_num', C.c_uint8),
                ('alt_timeout', C.c_uint8), ('rate_limit', C.c_uint32)]


class Wc(C.Structure):
    _fields_ = [('wr_id', C.c_uint64), ('status', C.c_int),
                ('opcode', C.c_int), ('vendor_err', C.c_uint32),
                ('byte_len', C.c_uint32), ('imm_data', C.c_uint32),
                ('qp_num', C.c_uint32), ('src_qp', C.c_uint32),
                ('wc_flags', C.c_uint), ('pkey_index', C.c_uint16),
                ('slid', C.c_uint16), ('sl', C.c_uint8),
                ('dlid_path_bits', C.c_uint8)]


class Sge(C.Structure):
    _fields_ = [('addr', C.c_uint64), ('length', C.c_uint32),
                ('lkey', C.c_uint32)]


class RecvWr(C.Structure):
    pass


RecvWr._fields_ = [('wr_id', C.c_uint64), ('next', C.POINTER(RecvWr)),
                   ('sg_list', C.POINTER(Sge)), ('num_sge', C.c_int)]


class Mr(C.Structure):
    _fields_ = [('context', C.c_void_p), ('pd', C.c_void_p),
                ('addr', C.c_void_p), ('length', C.c_size_t),
                ('handle', C.c_uint32), ('lkey', C.c_uint32),
                ('rkey', C.c_uint32)]


class AsyncEvent(C.Structure):
    _fields_ = [('element', C.c_void_p), ('event_type', C.c_int)]


# sizes of rdma-core 44's structs on x86-64
assert C.sizeof(QpAttr) == 144 and QpAttr.ah_attr.offset == 56 and \
    QpAttr.pkey_index.offset == 120 and QpAttr.rate_limit.offset == 136
assert C.sizeof(QpInitAttr) == 64 and C.sizeof(Wc) == 48
assert Qp.handle.offset == 48 and C.sizeof(AsyncEvent) == 16

lib.ibv_create_cq.restype = C.c_void_p
lib.ibv_create_cq.argtypes = [C.c_void_p, C.c_int, C.c_void_p, C.c_void_p,
                              C.c_int]
lib.ibv_destroy_cq.argtypes = [C.c_void_p]
lib.ibv_create_qp.restype = C.POINTER(Qp)
lib.ibv_create_qp.argtypes = [C.c_void_p, C.POINTER(QpInitAttr)]
lib.ibv_modify_qp.argtypes = [C.POINTER(Qp), C.POINTER(QpAttr), C.c_int]
lib.ibv_query_qp.argtypes = [C.POINTER(Qp), C.POINTER(QpAttr), C.c_int,
                             C.POINTER(QpInitAttr)]
lib.ibv_destroy_qp.argtypes = [C.POINTER(Qp)]
lib.ibv_reg_mr.restype = C.POINTER(Mr)
lib.ibv_reg_mr.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int]
lib.ibv_dereg_mr.argtypes = [C.POINTER(Mr)]
lib.ibv_query_gid.argtypes = [C.c_void_p, C.c_uint8, C.c_int, C.c_void_p]
lib.ibv_get_async_event.argtypes = [C.c_void_p, C.POINTER(AsyncEvent)]
lib.ibv_ack_async_event.argtypes = [C.POINTER(AsyncEvent)]

# struct ibv_context_ops slots (verbs.h): poll_cq 11, post_send 25, post_recv 26
POLL_CQ = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int, C.POINTER(Wc))
POST_RECV = C.CFUNCTYPE(C.c_int, C.POINTER(Qp), C.POINTER(RecvWr),
                        C.POINTER(C.POINTER(RecvWr)))

IBV_EVENT_QP_FATAL = 1
IB_USER_VERBS_CMD_POST_SEND = 28
IB_USER_VERBS_CMD_POST_RECV = 29
UVERBS_SEND_WR_SIZE = 56            # sizeof(struct ib_uverbs_send_wr)
UVERBS_RECV_WR_SIZE = 16            # sizeof(struct ib_uverbs_recv_wr)
# RDMA_VERBS_IOCTL: _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr of 24 bytes)
RDMA_VERBS_IOCTL = (3 << 30) | (24 << 16) | (0x1b << 8) | 1
UVERBS_OBJECT_QP = 4
BZC_RDMA_DRIVER_ID = 0x627a         # bzc_user_ioctl_verbs.h
BZC_METHOD_QP_DOORBELL = 1 << 12    # bzc_user_ioctl_cmds.h (UVERBS_ID_NS)
BZC_ATTR_QP_DOORBELL_HANDLE = 1 << 12

# bzc-abi.h
WQ_HDR = 128                # BZC_WQ_RING_WQE_OFFSET
WQ_CONS = 64                # offsetof(struct bzc_wq_ring_hdr, cons)
SEND_DATA = 64              # BZC_SEND_WQE_DATA_OFFSET
WQE_SIGNALED, WQE_INLINE = 1, 8


def send_wqe(wr_id, opcode, flags=WQE_SIGNALED, num_sge=0, inline_len=0,
             sges=()):
    """struct bzc_send_wqe (64 bytes) followed by struct bzc_sge's."""
    b = struct.pack('<QBBBBI32sI12x', wr_id, opcode, flags, num_sge, 0, 0,
                    b'', inline_len)
    assert len(b) == 64
    for addr, length, lkey in sges:
        b += struct.pack('<QII', addr, length, lkey)
    return b


def rq_slot_size():
    """The RQ slot size of Rig's QPs (2 receive SGEs): a power of two
    holding the 16-byte RQE header and the SGEs."""
    return 1 << (16 + 2 * 16 - 1).bit_length()


def sq_slot_size(rig):
    """The SQ slot size the kernel chose for rig.x: a power of two holding
    the WQE header and max(SGEs, inline data) (rig.max_inline is that)."""
    return 1 << (SEND_DATA + rig.max_inline - 1).bit_length()


def u32_at(addr):
    return C.c_uint32.from_address(addr)


class Rig:
    """Two RC QPs connected to each other, x (whose rings we abuse) and
    y (a well-behaved peer), with one CQ each, and an MR."""

    def __init__(self, sq_entries=8):
        self.raw = RawContext(h.DEV)
        self.ctx = C.cast(self.raw.ctx, C.c_void_p).value
        self.ops = self.raw.ctx.contents.ops
        self.poll = POLL_CQ(self.ops[11])
        self.post_recv = POST_RECV(self.ops[26])
        self.pd = self.raw.alloc_pd()
        self.pdp = C.cast(self.pd, C.c_void_p).value
        self.cq_x = lib.ibv_create_cq(self.ctx, 256, None, None, 0)
        self.cq_y = lib.ibv_create_cq(self.ctx, 256, None, None, 0)
        assert self.cq_x and self.cq_y, f'create_cq: errno {C.get_errno()}'
        self.buf = C.create_string_buffer(1 << 16)
        self.mr = lib.ibv_reg_mr(self.pdp, C.addressof(self.buf), 1 << 16,
                                 e.IBV_ACCESS_LOCAL_WRITE |
                                 e.IBV_ACCESS_REMOTE_WRITE)
        assert self.mr, f'reg_mr: errno {C.get_errno()}'
        before = h.uverbs_maps()
        self.x = self.create_qp(self.cq_x, sq_entries)
        new = {a: n for a, n in h.uverbs_maps().items() if a not in before}
        assert len(new) == 2, f'expected 2 new uverbs mappings (SQ, RQ) ' \
            f'after create_qp, found {new}'
        self.y = self.create_qp(self.cq_y, 8)
        self.gid_index = self.find_gid()
        for me, peer in ((self.x, self.y), (self.y, self.x)):
            self.to_rts(me, peer.contents.qp_num)
        # the RQ is the mapping whose prod moves when we post a receive
        self.recv(self.x, 500, C.addressof(self.buf), 64)
        prods = {a: u32_at(a).value for a in new}
        rq = [a for a, p in prods.items() if p == 1]
        assert len(rq) == 1, f'cannot tell SQ from RQ: prod values {prods}'
        self.rq = rq[0]
        self.sq = [a for a in new if a != self.rq][0]
        self.sq_len = new[self.sq]
        self.rq_len = new[self.rq]
        assert u32_at(self.sq).value == 0 and u32_at(self.sq + WQ_CONS).value == 0
        a, ia = QpAttr(), QpInitAttr()
        assert lib.ibv_query_qp(self.x, C.byref(a), e.IBV_QP_CAP,
                                C.byref(ia)) == 0
        self.max_inline = ia.cap.max_inline_data
        self.sq_entries = ia.cap.max_send_wr

    def create_qp(self, cq, sq_entries):
        ia = QpInitAttr(send_cq=cq, recv_cq=cq, qp_type=e.IBV_QPT_RC,
                        sq_sig_all=0)
        ia.cap = QpCap(sq_entries, 8, 2, 2, 64)
        qp = lib.ibv_create_qp(self.pdp, C.byref(ia))
        assert qp, f'create_qp: errno {C.get_errno()}'
        return qp

    def find_gid(self):
        want = h.ipv4_mapped(h.IPV4).packed
        raw = (C.c_uint8 * 16)()
        for i in range(128):
            if lib.ibv_query_gid(self.ctx, 1, i, raw) == 0 and \
                    bytes(raw) == want:
                return i
        raise AssertionError(f'no GID {want.hex()}')

    def modify(self, qp, attr, mask):
        rc = lib.ibv_modify_qp(qp, C.byref(attr), mask)
        assert rc == 0, f'modify_qp mask {mask:#x}: {os.strerror(rc)}'

    def to_rts(self, qp, dest):
        a = QpAttr(qp_state=e.IBV_QPS_RESET)
        self.modify(qp, a, e.IBV_QP_STATE)
        a = QpAttr(qp_state=e.IBV_QPS_INIT, port_num=1, pkey_index=0,
                   qp_access_flags=e.IBV_ACCESS_LOCAL_WRITE |
                   e.IBV_ACCESS_REMOTE_WRITE)
        self.modify(qp, a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                    e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        a = QpAttr(qp_state=e.IBV_QPS_RTR, path_mtu=e.IBV_MTU_1024,
                   dest_qp_num=dest, rq_psn=0, max_dest_rd_atomic=1,
                   min_rnr_timer=1)
        a.ah_attr.is_global = 1
        a.ah_attr.port_num = 1
        a.ah_attr.grh.sgid_index = self.gid_index
        a.ah_attr.grh.hop_limit = 64
        C.memmove(a.ah_attr.grh.dgid, h.ipv4_mapped(h.IPV4).packed, 16)
        self.modify(qp, a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                    e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
                    e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        a = QpAttr(qp_state=e.IBV_QPS_RTS, sq_psn=0, timeout=14, retry_cnt=7,
                   rnr_retry=0, max_rd_atomic=1)
        self.modify(qp, a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN |
                    e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                    e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)

    def state(self, qp):
        a, ia = QpAttr(), QpInitAttr()
        rc = lib.ibv_query_qp(qp, C.byref(a), e.IBV_QP_STATE, C.byref(ia))
        assert rc == 0, f'query_qp: {os.strerror(rc)}'
        return a.qp_state

    def recv(self, qp, wr_id, addr, length):
        sge = Sge(addr, length, self.mr.contents.lkey)
        wr = RecvWr(wr_id=wr_id, sg_list=C.pointer(sge), num_sge=1)
        bad = C.POINTER(RecvWr)()
        rc = self.post_recv(qp, C.byref(wr), C.byref(bad))
        assert rc == 0, f'post_recv: {os.strerror(rc)}'

    def doorbell(self, qp, rq=False):
        """The SQ doorbell (IB_USER_VERBS_CMD_POST_SEND with wr_count 0 on
        the command fd), or with rq the RQ's (POST_RECV, same layout);
        0 or the errno."""
        resp = C.c_uint32(0)
        cmd = struct.pack('=IHHQIIII',
                          IB_USER_VERBS_CMD_POST_RECV if rq else
                          IB_USER_VERBS_CMD_POST_SEND, 8, 1,
                          C.addressof(resp), qp.contents.handle, 0, 0,
                          UVERBS_RECV_WR_SIZE if rq else UVERBS_SEND_WR_SIZE)
        try:
            n = os.write(self.raw.cmd_fd, cmd)
        except OSError as ex:
            return ex.errno
        assert n == len(cmd)
        return 0

    def doorbell_method(self, qp):
        """The SQ doorbell as the driver method BZC_METHOD_QP_DOORBELL
        (what the provider rings); 0 or the errno."""
        hdr = struct.pack('=HHHHQII', 24 + 16, UVERBS_OBJECT_QP,
                          BZC_METHOD_QP_DOORBELL, 1, 0, BZC_RDMA_DRIVER_ID,
                          0)
        attr = struct.pack('=HHHHQ', BZC_ATTR_QP_DOORBELL_HANDLE, 0, 0, 0,
                           qp.contents.handle)
        try:
            fcntl.ioctl(self.raw.cmd_fd, RDMA_VERBS_IOCTL,
                        bytearray(hdr + attr))
        except OSError as ex:
            return ex.errno
        return 0

    def wcs(self, cq, n=None, timeout=10.0):
        """Completions of cq: n of them (or whatever came within timeout
        when n is None)."""
        out = []
        wc = Wc()
        deadline = time.monotonic() + timeout
        while n is None or len(out) < n:
            if self.poll(cq, 1, C.byref(wc)) == 1:
                out.append((wc.wr_id, wc.status))
                continue
            if time.monotonic() >= deadline:
                break
            time.sleep(0.002)
        return out

    def async_events(self, timeout):
        """[(event_type, element pointer)] that arrive within timeout."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            p = select.poll()
            p.register(self.raw.async_fd, select.POLLIN)
            if left <= 0 or not p.poll(int(left * 1000)):
                return out
            ev = AsyncEvent()
            assert lib.ibv_get_async_event(self.ctx, C.byref(ev)) == 0
            out.append((ev.event_type, ev.element))
            lib.ibv_ack_async_event(C.byref(ev))

    def close(self):
        errs = []
        for qp in (self.x, self.y):
            rc = lib.ibv_destroy_qp(qp)
            if rc:
                errs.append(f'destroy_qp: {os.strerror(rc)}')
        rc = lib.ibv_dereg_mr(self.mr)
        if rc:
            errs.append(f'dereg_mr: {os.strerror(rc)}')
        for cq in (self.cq_x, self.cq_y):
            rc = lib.ibv_destroy_cq(cq)
            if rc:
                errs.append(f'destroy_cq: {os.strerror(rc)}')
        rc = self.raw.dealloc_pd(self.pd)
        if rc:
            errs.append(f'dealloc_pd: {os.strerror(rc)}')
        self.raw.close()
        assert not errs, '; '.join(errs)


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


def qp_ptr(qp):
    return C.cast(qp, C.c_void_p).value


def fatal_or_error(rig, what, wr_id=None):
    """x must be in ERR, told by IBV_EVENT_QP_FATAL or by an error
    completion (of wr_id, when given)."""
    deadline = time.monotonic() + 10
    while rig.state(rig.x) != e.IBV_QPS_ERR and time.monotonic() < deadline:
        time.sleep(0.01)
    state = rig.state(rig.x)
    events = rig.async_events(0.2)
    wcs = rig.wcs(rig.cq_x, timeout=0.2)
    fatal = (IBV_EVENT_QP_FATAL, qp_ptr(rig.x)) in events
    errored = [w for w in wcs if w[1] not in (e.IBV_WC_SUCCESS,
                                              e.IBV_WC_WR_FLUSH_ERR) and
               (wr_id is None or w[0] == wr_id)]
    assert state == e.IBV_QPS_ERR, \
        f'{what}: QP state {state}, not ERR; events {events}, wcs {wcs}'
    assert fatal or errored, f'{what}: QP in ERR but neither ' \
        f'IBV_EVENT_QP_FATAL nor an error completion; events {events}, ' \
        f'completions {wcs}'
    return events, wcs


# --------------------------------------------------------------------------
# The send queue
# --------------------------------------------------------------------------

@pytest.mark.parametrize('prod', [0x100000, 0xffffffff, 0x80000001],
                         ids=['far-beyond', 'behind', 'half-way-round'])
def test_sq_producer_index_beyond_ring(rig, prod):
    """prod that the ring cannot hold, then the doorbell: the QP goes to
    ERR with IBV_EVENT_QP_FATAL."""
    u32_at(rig.sq).value = prod
    assert rig.doorbell(rig.x) == 0
    events, _ = fatal_or_error(rig, f'SQ prod {prod:#x}')
    assert (IBV_EVENT_QP_FATAL, qp_ptr(rig.x)) in events, \
        f'no IBV_EVENT_QP_FATAL: {events}'


def _wqe_cases(rig):
    buf, lkey = C.addressof(rig.buf), rig.mr.contents.lkey
    return {
        'num-sge-255': send_wqe(7, e.IBV_WR_SEND, num_sge=255),
        'opcode-99': send_wqe(7, 99, num_sge=1, sges=[(buf, 8, lkey)]),
        'inline-len-huge': send_wqe(7, e.IBV_WR_SEND,
                                    WQE_SIGNALED | WQE_INLINE,
                                    inline_len=0xffffffff),
        'inline-len-max-plus-1': send_wqe(7, e.IBV_WR_SEND,
                                          WQE_SIGNALED | WQE_INLINE,
                                          inline_len=rig.max_inline + 1),
        'inline-rdma-read': send_wqe(7, e.IBV_WR_RDMA_READ,
                                     WQE_SIGNALED | WQE_INLINE, inline_len=8),
        'sge-length-4g': send_wqe(7, e.IBV_WR_SEND, num_sge=1,
                                  sges=[(buf, 0xffffffff, lkey)]),
        'sge-wraps-address-space': send_wqe(
            7, e.IBV_WR_SEND, num_sge=1,
            sges=[(0xfffffffffffff000, 0x2000, lkey)]),
        'sge-bogus-lkey': send_wqe(7, e.IBV_WR_SEND, num_sge=1,
                                   sges=[(buf, 8, lkey ^ 0xffff00)]),
        'unsignaled-garbage-sges': send_wqe(
            7, e.IBV_WR_RDMA_WRITE, 0, num_sge=2,
            sges=[(buf, 8, lkey), (0x1000, 0x7fffffff, 0xdeadbeef)]),
    }


WQE_CASES = ['num-sge-255', 'opcode-99', 'inline-len-huge',
             'inline-len-max-plus-1', 'inline-rdma-read', 'sge-length-4g',
             'sge-wraps-address-space', 'sge-bogus-lkey',
             'unsignaled-garbage-sges']


@pytest.mark.parametrize('case', WQE_CASES)
def test_sq_bad_wqe(rig, case):
    """A malformed WQE in slot 0, prod 1, doorbell: an error completion
    for it (even unsignaled) or IBV_EVENT_QP_FATAL, and the QP in ERR;
    a WQE after it is flushed."""
    wqe = _wqe_cases(rig)[case]
    C.memmove(rig.sq + WQ_HDR, wqe, len(wqe))
    u32_at(rig.sq).value = 1
    assert rig.doorbell(rig.x) == 0
    fatal_or_error(rig, case, wr_id=7)
    assert u32_at(rig.sq + WQ_CONS).value in (0, 1), 'SQ cons moved past prod'


def test_sq_doorbell_without_wqes(rig):
    """The doorbell with nothing posted (and a wrong QP handle) is
    harmless: no completion, the QP stays in RTS."""
    assert rig.doorbell(rig.x) == 0
    assert rig.wcs(rig.cq_x, timeout=0.2) == []
    assert rig.state(rig.x) == e.IBV_QPS_RTS
    # another context's or a freed handle: refused, nothing happens
    fake = C.pointer(Qp(handle=0x7fffffff))
    assert rig.doorbell(fake) != 0
    assert rig.state(rig.x) == e.IBV_QPS_RTS


def test_sq_ring_fuzz(rig):
    """Random bytes over the whole SQ mapping (header included) and a
    doorbell, 20 times, the QP reset to RTS each time: never anything
    but completions, events and an ERR state."""
    rng = random.Random(1234)
    y_qpn = rig.y.contents.qp_num
    for i in range(20):
        cons = u32_at(rig.sq + WQ_CONS).value
        junk = rng.randbytes(rig.sq_len)
        if i % 2:
            # a prod the ring can hold, so that garbage WQEs get executed
            prod = (cons + rng.randrange(1, rig.sq_entries + 1)) & 0xffffffff
            junk = struct.pack('<I', prod) + junk[4:]
        C.memmove(rig.sq, junk, len(junk))
        rig.doorbell(rig.x)
        rig.wcs(rig.cq_x, timeout=0.05)
        rig.async_events(0)
        rig.to_rts(rig.x, y_qpn)
        rig.wcs(rig.cq_x, timeout=0)
    rig.wcs(rig.cq_y, timeout=0)


# --------------------------------------------------------------------------
# The receive queue
# --------------------------------------------------------------------------

def _peer_send(rig, wr_id=9):
    """y sends 16 bytes to x through a WQE of its own SQ (via libibverbs)."""
    post_send = C.CFUNCTYPE(C.c_int, C.POINTER(Qp), C.c_void_p,
                            C.c_void_p)(rig.ops[25])
    # struct ibv_send_wr: wr_id, next, sg_list, num_sge, opcode,
    # send_flags, imm_data, then the wr union (32 bytes) and more
    sge = Sge(C.addressof(rig.buf) + 8192, 16, rig.mr.contents.lkey)
    wr = C.create_string_buffer(128)
    struct.pack_into('<QQQiiII', wr, 0, wr_id, 0, C.addressof(sge), 1,
                     e.IBV_WR_SEND, e.IBV_SEND_SIGNALED, 0)
    bad = C.c_void_p()
    rc = post_send(rig.y, C.addressof(wr), C.addressof(bad))
    assert rc == 0, f'post_send: {os.strerror(rc)}'


@pytest.mark.parametrize('case', ['prod-far-beyond', 'prod-behind',
                                  'rqe-num-sge-255', 'rqe-bogus-lkey'])
def test_rq_hostile(rig, case):
    """The receiver's RQ ring is corrupted before a SEND reaches it: the
    receiver goes to ERR (IBV_EVENT_QP_FATAL for a corrupt ring, an error
    completion for a bad key), the sender gets an error completion."""
    if case == 'prod-far-beyond':
        u32_at(rig.rq).value = 1 + 0x100000
    elif case == 'prod-behind':
        u32_at(rig.rq).value = 0xfffffff0
    elif case == 'rqe-num-sge-255':
        C.c_uint8.from_address(rig.rq + WQ_HDR + 8).value = 255
    else:
        lk = C.c_uint32.from_address(rig.rq + WQ_HDR + 16 + 12)
        lk.value ^= 0xffff00
    _peer_send(rig)
    sender = rig.wcs(rig.cq_y, 1)
    assert len(sender) == 1 and sender[0][0] == 9 and \
        sender[0][1] != e.IBV_WC_SUCCESS, \
        f'{case}: sender completion {sender}'
    events, wcs = fatal_or_error(rig, case)
    if case != 'rqe-bogus-lkey':
        assert (IBV_EVENT_QP_FATAL, qp_ptr(rig.x)) in events, \
            f'{case}: no IBV_EVENT_QP_FATAL: {events}'


# --------------------------------------------------------------------------
# SIGKILL in the middle of 8 MiB RDMA WRITEs
# --------------------------------------------------------------------------

KINDS = ('qp', 'cq', 'mr', 'pd')


def _writer_child(ready_fd):
    """Loop 8 MiB RDMA WRITEs between two QPs of this process, four in
    flight; write one byte to ready_fd after the first completes."""
    ctx = d.Context(name=h.DEV)
    pd = PD(ctx)
    gidx = h.find_ipv4_gid_index(ctx)
    size = 8 << 20
    src = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)
    dst = MR(pd, size, h.access_all())
    src.write(os.urandom(4096) * (size // 4096), size)
    a = h.QPEnd(ctx, pd, e.IBV_QPT_RC, QPCap(max_send_wr=8, max_recv_wr=8),
                cq_depth=16)
    b = h.QPEnd(ctx, pd, e.IBV_QPT_RC, QPCap(max_send_wr=8, max_recv_wr=8),
                cq_depth=16)
    h.connect_qps(a, b, gidx)
    told = False
    n = 0
    while True:
        wr = SendWR(wr_id=n, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(src.buf, size, src.lkey)])
        wr.set_wr_rdma(dst.rkey, dst.buf)
        a.qp.post_send(wr)
        n += 1
        if n >= 4:
            wc = h.poll_cq(a.scq, 1)[0]
            if wc.status != e.IBV_WC_SUCCESS:
                os._exit(3)
            if not told:
                os.write(ready_fd, b'R')
                told = True


def test_sigkill_during_traffic():
    """A child doing 8 MiB RDMA WRITEs (kernel worker path) is killed
    with SIGKILL: all its QPs, CQs, MRs and PDs disappear from the
    resource tracking (`rdma resource show`), the counts return to what
    they were, and the device still carries traffic."""
    base = h.nl_res_summary()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            os.close(rfd)
            _writer_child(wfd)
        finally:
            os._exit(code)
    os.close(wfd)
    killed = False
    try:
        r, _, _ = select.select([rfd], [], [], 120)
        assert r and os.read(rfd, 1) == b'R', \
            'the child did not complete an 8 MiB write within 120 s'
        mine = {k: [x for x in h.nl_res_list(k) if x['pid'] == pid]
                for k in KINDS}
        assert all(mine.values()), f'child resources not all tracked: {mine}'
        time.sleep(0.05)        # let the worker be in the middle of a copy
        os.kill(pid, signal.SIGKILL)
        killed = True
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and \
            os.WTERMSIG(status) == signal.SIGKILL, f'child status {status:#x}'
    finally:
        os.close(rfd)
        if not killed:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)

    def leftovers():
        return {k: [x for x in h.nl_res_list(k) if x['pid'] == pid]
                for k in KINDS}
    h.wait_until(lambda: not any(leftovers().values()), 20)
    left = leftovers()
    assert not any(left.values()), f'left behind by the killed process: {left}'
    # the same through the rdma tool
    out = h.run(['sh', '-c', 'for k in qp cq mr pd; do rdma -j resource '
                 'show $k; done']).stdout
    assert f'"pid":{pid},' not in out.replace(' ', ''), \
        f'rdma resource show still lists pid {pid}:\n{out}'
    now = h.nl_res_summary()
    assert {k: now.get(k) for k in KINDS + ('ctx',)} == \
        {k: base.get(k) for k in KINDS + ('ctx',)}, \
        f'resource counts {now}, before the child {base}'
    # the device still works
    ctx = d.Context(name=h.DEV)
    try:
        pd = PD(ctx)
        gidx = h.find_ipv4_gid_index(ctx)
        mr = MR(pd, 4096, h.access_all())
        a = h.QPEnd(ctx, pd, e.IBV_QPT_RC, cq_depth=8)
        b = h.QPEnd(ctx, pd, e.IBV_QPT_RC, cq_depth=8)
        h.connect_qps(a, b, gidx)
        mr.write(b'alive', 5, 0)
        b.qp.post_recv(RecvWR(wr_id=2, num_sge=1,
                              sg=[SGE(mr.buf + 2048, 64, mr.lkey)]))
        a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(mr.buf, 5, mr.lkey)]))
        for cq in (a.scq, b.rcq):
            wc = h.poll_cq(cq, 1)[0]
            assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
        assert mr.read(5, 2048) == b'alive'
    finally:
        ctx.close()
