# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Completion queues on bzc0: create/destroy, ibv_poll_cq and
ibv_req_notify_cq on the mapped ring with no system call, ibv_resize_cq
with completions pending, ibv_create_cq_ex and its polling API, and
overflow.

Completion channels, req_notify_cq(any) and solicited-only arming are in
test_qp_events.py.

What bzc promises on overflow (emu/bzc_cq.c, bzc-abi.h): a CQE that finds
the ring full is dropped and the CQ goes to error for good -
IBV_EVENT_CQ_ERR on the context, "CQ overflow" in the kernel log, nothing
is written to the ring any more.  The CQEs already in the ring stay there
intact and can all be polled.  A QP whose completion was dropped goes to
ERR with IBV_EVENT_QP_FATAL (IBA's local work queue catastrophic error),
so no work runs on unseen.
"""

import ctypes
import errno
import os
import socket
import struct
import time

import pyverbs.enums as e
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h
from test_qp_events import Channel

pytestmark = pytest.mark.keeps_netdev

QUIET = 0.3             # how long "nothing more arrives" is waited for
SLOT = 256              # bytes per message slot in the MRs


class End:
    """An RC QP on CQs the test chose (bzc_helpers.QPEnd makes its own)."""

    def __init__(self, ctx, pd, scq, rcq, cap):
        self.ctx, self.qp_type = ctx, e.IBV_QPT_RC
        self.scq, self.rcq = scq, rcq
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq,
                                    cap=cap))

    @property
    def qpn(self):
        return self.qp.qp_num

    def state(self):
        return self.qp.query(e.IBV_QP_STATE)[0].qp_state


class Rig:
    """Requester a and responder b on one context (its async fd known),
    one MR: a sends from slots [0, 64), b receives into / is written at
    slots [64, 128)."""

    def __init__(self, a_scq=64, b_rcq=64, channel=False, cqex=False,
                 rnr_retry=7, wc_flags=e.IBV_WC_STANDARD_FLAGS):
        self.ctx, self.async_fd = h.open_pyverbs_context()
        self.objs = []
        self.pd = PD(self.ctx)
        self.gid_index = h.find_ipv4_gid_index(self.ctx)
        self.ch = Channel(self.ctx) if channel else None
        self.mr = MR(self.pd, 128 * SLOT, h.access_all())
        self.mr.write(bytes(128 * SLOT), 128 * SLOT)

        def cq(depth):
            if cqex:
                c = CQEX(self.ctx, CqInitAttrEx(cqe=depth,
                                                wc_flags=wc_flags))
            else:
                c = CQ(self.ctx, depth, None,
                       self.ch.ch if self.ch else None, 0)
            self.objs.append(c)
            return c
        cap = QPCap(max_send_wr=32, max_recv_wr=32)
        self.a = End(self.ctx, self.pd, cq(a_scq), cq(64), cap)
        self.b = End(self.ctx, self.pd, cq(64), cq(b_rcq), cap)
        h.connect_qps(self.a, self.b, self.gid_index, rnr_retry=rnr_retry)

    def src(self, i):
        return self.mr.buf + i * SLOT

    def dst(self, i):
        return self.mr.buf + (64 + i) * SLOT

    @staticmethod
    def payload(i, n=SLOT):
        return bytes((i * 7 + k) & 0xff for k in range(n))

    def recv(self, wr_id, i):
        self.b.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                                   sg=[SGE(self.dst(i), SLOT, self.mr.lkey)]))

    def post(self, wr_id, i, opcode=e.IBV_WR_RDMA_WRITE, length=SLOT,
             imm=None, flags=e.IBV_SEND_SIGNALED):
        """Message i: payload(i) from source slot i (to destination slot i
        for writes)."""
        self.mr.write(self.payload(i, length), length, i * SLOT)
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                    sg=[SGE(self.src(i), length, self.mr.lkey)],
                    send_flags=flags)
        if opcode in (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_WRITE_WITH_IMM):
            wr.set_wr_rdma(self.mr.rkey, self.dst(i))
        if imm is not None:
            wr.imm_data = socket.htonl(imm)
        self.a.qp.post_send(wr)

    def landed(self, i, length=SLOT):
        return self.mr.read(length, (64 + i) * SLOT) == \
            self.payload(i, length)

    def event(self, timeout):
        return h.pyverbs_async_event(self.ctx, self.async_fd, timeout)

    def close(self):
        for o in (self.a.qp, self.b.qp, *self.objs, self.mr):
            o.close()
        if self.ch:
            self.ch.close()
        self.pd.close()
        self.ctx.close()


@pytest.fixture
def rigs():
    made = []

    def make(**kw):
        made.append(Rig(**kw))
        return made[-1]
    yield make
    for r in made:
        r.close()


def expect_wcs(wcs, wr_ids, opcode, what):
    got = [(w.wr_id, w.status, w.opcode) for w in wcs]
    want = [(i, e.IBV_WC_SUCCESS, opcode) for i in wr_ids]
    assert got == want, f'{what}: ' + '; '.join(h.wc_str(w) for w in wcs)


def rdma_error(fn):
    with pytest.raises(PyverbsRDMAError) as ex:
        fn()
    return ex.value.error_code


# --------------------------------------------------------------------------
# create / destroy
# --------------------------------------------------------------------------

def test_create_destroy(ctx):
    """Sizes from 1 to max_cqe give at least the entries asked for; 0,
    max_cqe + 1 and a comp_vector beyond num_comp_vectors are EINVAL;
    every CQ is a kernel object until it is destroyed."""
    max_cqe = ctx.query_device().max_cqe
    before = len(h.nl_res_list('cq'))
    cqs = []
    for n in (1, 3, 1000, max_cqe):
        cq = CQ(ctx, n)
        cqs.append(cq)
        assert n <= cq.cqe <= max(2 * n, 1), f'asked {n}, got {cq.cqe}'
    assert len(h.nl_res_list('cq')) == before + len(cqs)
    for cq in cqs:
        cq.close()
    assert len(h.nl_res_list('cq')) == before
    assert rdma_error(lambda: CQ(ctx, 0)) == errno.EINVAL
    assert rdma_error(lambda: CQ(ctx, max_cqe + 1)) == errno.EINVAL
    assert rdma_error(lambda: CQ(ctx, 4, None, None,
                                 ctx.num_comp_vectors)) == errno.EINVAL


# --------------------------------------------------------------------------
# Polling and arming are memory operations on the mapped ring
# --------------------------------------------------------------------------

# x86-64 system call numbers; struct seccomp_data: nr @0, arch @4, args @16
NR = {'write': 1, 'mmap': 9, 'munmap': 11, 'brk': 12, 'rt_sigreturn': 15,
      'mremap': 25, 'madvise': 28, 'exit': 60, 'clock_gettime': 228,
      'exit_group': 231}
AUDIT_ARCH_X86_64 = 0xc000003e


def seccomp_only_memory_and_write_to(fd):
    """From here on this process may only manage its memory, read the
    clock, write to `fd` and exit; any other system call kills it with
    SIGSYS.  (clock_gettime: the child reads the clock through the vDSO,
    which falls back to the system call with the clocksource of a TCG
    guest; it is not a verbs call.)"""
    allow = [NR[n] for n in ('mmap', 'munmap', 'brk', 'rt_sigreturn',
                             'mremap', 'madvise', 'exit', 'clock_gettime',
                             'exit_group')]
    n = len(allow)
    LD, JEQ, RET = 0x20, 0x15, 0x06
    KILL, ALLOW = 0x80000000, 0x7fff0000
    prog = [(LD, 0, 0, 4), (JEQ, 0, 4 + n, AUDIT_ARCH_X86_64), (LD, 0, 0, 0)]
    prog += [(JEQ, 3 + n - i, 0, nr) for i, nr in enumerate(allow)]
    prog += [(JEQ, 0, 2, NR['write']), (LD, 0, 0, 16), (JEQ, 1, 0, fd),
             (RET, 0, 0, KILL), (RET, 0, 0, ALLOW)]

    class Insn(ctypes.Structure):
        _fields_ = [('code', ctypes.c_uint16), ('jt', ctypes.c_uint8),
                    ('jf', ctypes.c_uint8), ('k', ctypes.c_uint32)]

    class Prog(ctypes.Structure):
        _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.POINTER(Insn))]
    insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
    libc = ctypes.CDLL(None, use_errno=True)
    # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER
    if libc.prctl(38, 1, 0, 0, 0) or \
            libc.prctl(22, 2, ctypes.byref(Prog(len(prog), insns)), 0, 0):
        raise OSError(ctypes.get_errno(), 'seccomp filter not installed')




@pytest.mark.skipif(os.uname().machine != 'x86_64',
                    reason='the seccomp filter is written for x86-64')
def test_poll_and_arm_without_syscall(rigs):
    """A child process that seccomp allows no system call beyond memory
    management, the clock, writing to a pipe and exiting polls the
    completions of 5 RDMA WRITEs
    with ibv_poll_cq and arms the CQ with ibv_req_notify_cq: both work on
    the mapped ring.  The arming is real: the parent gets the channel
    event for the next completion."""
    # Contexts earlier tests left open in this process are not the rig's:
    # its command fd and rings are the ones that appear with it.
    fds_before, maps_before = h.uverbs_cmd_fds(), h.uverbs_ring_maps()
    r = rigs(channel=True)
    n = 5
    for i in range(n):
        r.post(0x500 + i, i, length=64)
    # a forked child inherits no ring (VM_DONTCOPY): it maps them itself
    # from the inherited command fd, where the provider expects them
    rings = {a: m for a, m in h.uverbs_ring_maps().items()
             if a not in maps_before}
    cmd_fd, = h.uverbs_cmd_fds() - fds_before
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:                                            # child
        code = 3
        try:
            os.close(rd)
            h.map_rings_at(cmd_fd, rings)
            seccomp_only_memory_and_write_to(wr)
            got = []
            for _ in range(200000):          # busy: sleeping is a syscall
                got.extend(r.a.scq.poll(n - len(got))[1])
                if len(got) >= n:
                    break
            r.a.scq.req_notify(False)
            os.write(wr, b''.join(struct.pack('<QIII', w.wr_id, w.status,
                                              w.opcode, w.byte_len)
                                  for w in got))
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    data = b''
    while True:
        chunk = os.read(rd, 4096)
        if not chunk:
            break
        data += chunk
    os.close(rd)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), \
        (f'the polling child was killed by signal {os.WTERMSIG(status)} '
         f'(SIGSYS: it made a system call)')
    assert os.WEXITSTATUS(status) == 0, f'child exit {os.WEXITSTATUS(status)}'
    wcs = [struct.unpack_from('<QIII', data, o) for o in range(0, len(data), 20)]
    assert wcs == [(0x500 + i, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE, 64)
                   for i in range(n)], wcs
    # the parent's view of this CQ's consumer index is stale now: it only
    # checks that the child's arming produces an event
    assert not r.ch.event(r.a.scq, QUIET), 'event before the next completion'
    r.post(0x600, n, length=64)
    assert r.ch.event(r.a.scq, h.CQ_TIMEOUT), 'arming from the child lost'
    assert all(r.landed(i, 64) for i in range(n + 1))


# --------------------------------------------------------------------------
# resize
# --------------------------------------------------------------------------

def sends(r, first, count, slot0=0):
    """`count` signaled SENDs into as many receives; waits for them at
    the receiver, so that their send completions are due."""
    for k in range(count):
        r.recv(0x9000 + first + k, slot0 + k)
    for k in range(count):
        r.post(first + k, slot0 + k, opcode=e.IBV_WR_SEND, length=32 + k)
    wcs = h.poll_cq(r.b.rcq, count)
    expect_wcs(wcs, range(0x9000 + first, 0x9000 + first + count),
               e.IBV_WC_RECV, 'receives')
    assert [w.byte_len for w in wcs] == [32 + k for k in range(count)]
    assert all(r.landed(slot0 + k, 32 + k) for k in range(count))


def test_resize_keeps_pending_completions(rigs):
    """Completions not yet polled survive ibv_resize_cq, in order and
    intact, whether it grows or shrinks the CQ, and also when the old
    ring has wrapped; shrinking below them is EINVAL and loses nothing;
    the arming survives too; the QP goes on completing into the new
    ring.  Sizes 0 and beyond max_cqe are EINVAL."""
    r = rigs(a_scq=8, channel=True)
    cq = r.a.scq
    k = cq.cqe - 2                                      # bzc: 8 - 2
    assert 8 <= cq.cqe <= 16, f'unexpected size {cq.cqe}'
    # wrap the ring: k in, k out, k in (across the end), 2 out
    sends(r, 1, k)
    expect_wcs(h.poll_cq(cq, k), range(1, k + 1), e.IBV_WC_SEND, 'first k')
    sends(r, k + 1, k)
    expect_wcs(h.poll_cq(cq, 2), (k + 1, k + 2), e.IBV_WC_SEND, 'two of k')
    cq.resize(32)                                       # grow, k - 2 pending
    grown = cq.cqe
    assert grown >= 32
    sends(r, 2 * k + 1, 6)
    pending = k + 4                                     # bzc: 10
    assert rdma_error(lambda: cq.resize(4)) == errno.EINVAL
    max_cqe = r.ctx.query_device().max_cqe
    assert rdma_error(lambda: cq.resize(0)) == errno.EINVAL
    assert rdma_error(lambda: cq.resize(max_cqe + 1)) == errno.EINVAL
    assert cq.cqe == grown, 'a failed resize changed the size'
    cq.req_notify(False)
    cq.resize(pending + 2)                              # shrink
    assert pending + 2 <= cq.cqe < grown
    last = 2 * k + 7
    sends(r, last, 1)                   # the first new CQE fires the arm
    assert r.ch.event(cq, h.CQ_TIMEOUT), 'the arming was lost in resize'
    expect_wcs(h.poll_cq(cq, pending + 1), range(k + 3, last + 1),
               e.IBV_WC_SEND, 'completions across three resizes')
    assert h.drain_cq(cq, QUIET) == []
    # the new ring wraps too
    for n in range(3):
        first = last + 1 + 10 * n
        sends(r, first, 10)
        expect_wcs(h.poll_cq(cq, 10), range(first, first + 10),
                   e.IBV_WC_SEND, f'round {n} in the resized ring')
    assert r.a.state() == e.IBV_QPS_RTS


# --------------------------------------------------------------------------
# ibv_create_cq_ex and ibv_start_poll / ibv_next_poll / ibv_end_poll
# --------------------------------------------------------------------------

def cqex_poll_one(cq, timeout=h.CQ_TIMEOUT):
    """start_poll until a completion is current (the caller reads it and
    calls end_poll)."""
    deadline = time.monotonic() + timeout
    while True:
        ret = cq.start_poll(PollCqAttr())
        if ret == 0:
            return
        assert ret == errno.ENOENT, f'start_poll: {ret}'
        assert time.monotonic() < deadline, 'no completion'
        time.sleep(0.001)


def cqex_fields(cq):
    return dict(wr_id=cq.wr_id, status=cq.status, opcode=cq.read_opcode(),
                byte_len=cq.read_byte_len(), qp_num=cq.read_qp_num(),
                wc_flags=cq.read_wc_flags(),
                imm=socket.ntohl(cq.read_imm_data())
                if cq.read_wc_flags() & e.IBV_WC_WITH_IMM else None)


def test_cq_ex_read_fields(rigs):
    """A SEND_WITH_IMM, a SEND and an RDMA WRITE_WITH_IMM read through
    the ibv_cq_ex API at both ends: wr_id, status, opcode, byte_len,
    qp_num, wc_flags and the immediate; end_poll consumes exactly the
    completions iterated over, and an empty CQ answers ENOENT."""
    r = rigs(cqex=True)
    scq, rcq = r.a.scq, r.b.rcq
    assert scq.start_poll(PollCqAttr()) == errno.ENOENT
    for k in range(3):
        r.recv(0x10 + k, k)
    r.post(1, 0, opcode=e.IBV_WR_SEND_WITH_IMM, length=100, imm=0x12345678)
    r.post(2, 1, opcode=e.IBV_WR_SEND, length=7)
    r.post(3, 2, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, length=33,
           imm=0xcafe0001)
    b, a = r.b.qpn, r.a.qpn
    want = [dict(wr_id=0x10, status=0, opcode=e.IBV_WC_RECV, byte_len=100,
                 qp_num=b, wc_flags=e.IBV_WC_WITH_IMM, imm=0x12345678),
            dict(wr_id=0x11, status=0, opcode=e.IBV_WC_RECV, byte_len=7,
                 qp_num=b, wc_flags=0, imm=None),
            dict(wr_id=0x12, status=0, opcode=e.IBV_WC_RECV_RDMA_WITH_IMM,
                 byte_len=33, qp_num=b, wc_flags=e.IBV_WC_WITH_IMM,
                 imm=0xcafe0001)]
    # the first alone: end_poll consumes it and no more
    cqex_poll_one(rcq)
    got = [cqex_fields(rcq)]
    rcq.end_poll()
    cqex_poll_one(rcq)
    got.append(cqex_fields(rcq))
    while len(got) < 3:
        ret = rcq.poll_next()
        if ret == errno.ENOENT:         # the third is not in yet
            rcq.end_poll()
            cqex_poll_one(rcq)
        else:
            assert ret == 0, f'poll_next: {ret}'
        got.append(cqex_fields(rcq))
    assert rcq.poll_next() == errno.ENOENT
    rcq.end_poll()
    assert got == want
    assert rcq.start_poll(PollCqAttr()) == errno.ENOENT
    assert r.landed(0, 100) and r.landed(1, 7) and r.landed(2, 33)

    got = []
    for k in range(3):
        cqex_poll_one(scq)
        f = cqex_fields(scq)
        scq.end_poll()
        got.append((f['wr_id'], f['status'], f['opcode'], f['qp_num'],
                    f['wc_flags']))
    assert got == [(1, 0, e.IBV_WC_SEND, a, 0), (2, 0, e.IBV_WC_SEND, a, 0),
                   (3, 0, e.IBV_WC_RDMA_WRITE, a, 0)]
    assert scq.start_poll(PollCqAttr()) == errno.ENOENT


def test_cq_ex_refuses_what_it_cannot_do(ctx):
    """ibv_create_cq_ex: IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN is EOPNOTSUPP
    (an overflow always puts a bzc CQ in error), so is a CVLAN; the
    standard fields and SINGLE_THREADED are accepted."""
    def make(**kw):
        return CQEX(ctx, CqInitAttrEx(cqe=8, **kw))
    assert rdma_error(lambda: make(
        comp_mask=e.IBV_CQ_INIT_ATTR_MASK_FLAGS,
        flags=e.IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) == errno.EOPNOTSUPP
    assert rdma_error(lambda: make(
        wc_flags=e.IBV_WC_EX_WITH_CVLAN)) == errno.EOPNOTSUPP
    make(wc_flags=e.IBV_WC_STANDARD_FLAGS,
         comp_mask=e.IBV_CQ_INIT_ATTR_MASK_FLAGS,
         flags=e.IBV_CREATE_CQ_ATTR_SINGLE_THREADED).close()


# --------------------------------------------------------------------------
# completion timestamps
# --------------------------------------------------------------------------

TS_FLAGS = (e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
            e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)


def test_device_clock(ctx):
    """The device clock is CLOCK_MONOTONIC in ns: hca_core_clock 1 GHz
    (in kHz), a 64-bit mask, and ibv_query_rt_values_ex() reads it."""
    attr = ctx.query_device_ex()
    assert attr.hca_core_clock == 1000000
    assert attr.completion_timestamp_mask == (1 << 64) - 1
    before = time.monotonic_ns()
    sec, nsec = ctx.query_rt_values_ex()
    after = time.monotonic_ns()
    assert before <= sec * 10**9 + nsec <= after


@pytest.mark.parametrize('wc_flags', [
    TS_FLAGS, e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK],
    ids=['both', 'wallclock_only'])
def test_completion_timestamps(rigs, wc_flags):
    """Each CQE carries when it was written: the device clock and the
    wall clock lie between the clock readings around its post and its
    poll, and neither goes backwards along one CQ (sender's and
    receiver's CQs, 16 messages, some apart in time)."""
    r = rigs(cqex=True, wc_flags=e.IBV_WC_STANDARD_FLAGS | wc_flags)
    stamps = {'scq': [], 'rcq': []}
    for i in range(16):
        r.recv(0x100 + i, i)
        mono0, wall0 = time.monotonic_ns(), time.time_ns()
        r.post(i, i, opcode=e.IBV_WR_SEND, length=32)
        for name, cq in (('scq', r.a.scq), ('rcq', r.b.rcq)):
            cqex_poll_one(cq)
            assert cq.status == e.IBV_WC_SUCCESS, (name, i, cq.status)
            wall = cq.read_completion_wallclock_ns()
            mono = (cq.read_timestamp()
                    if wc_flags & e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
                    else None)
            cq.end_poll()
            stamps[name].append((mono, wall))
            assert wall0 <= wall <= time.time_ns(), (name, i)
            if mono is not None:
                assert mono0 <= mono <= time.monotonic_ns(), (name, i)
        if i % 4 == 3:
            time.sleep(0.01)
    for name, s in stamps.items():
        walls = [w for _, w in s]
        assert walls == sorted(walls), name
        monos = [m for m, _ in s]
        if monos[0] is not None:
            assert monos == sorted(monos), name
            # 10 ms pauses show in the device clock
            assert monos[-1] - monos[0] >= 3 * 10**7, name
    assert all(r.landed(i, 32) for i in range(16))


# --------------------------------------------------------------------------
# overflow
# --------------------------------------------------------------------------

def collect_events(r, want, timeout):
    """Async event types until all of `want` are seen (or timeout), then
    whatever else comes within QUIET."""
    seen = []
    deadline = time.monotonic() + timeout
    while not set(want) <= set(seen):
        left = deadline - time.monotonic()
        ev = r.event(left) if left > 0 else None
        if ev is None:
            return seen
        seen.append(ev)
    while True:
        ev = r.event(QUIET)
        if ev is None:
            return seen
        seen.append(ev)


@pytest.mark.parametrize('side', ['send', 'recv'])
def test_overflow(rigs, side):
    """Overflow a CQ of 4 (bzc: exactly 4) entries without polling it:
    the send CQ with 2 signaled RDMA WRITEs too many, or the receive CQ
    with 1 SEND too many.  The CQEs that
    fitted are all still there, in order and intact, and nothing else
    ever appears; IBV_EVENT_CQ_ERR, then IBV_EVENT_QP_FATAL for the QP
    whose completion was dropped, which is in ERR; the kernel log names
    the overflow; the dead CQ polls empty, and everything is destroyable."""
    klog = h.KmsgReader()
    try:
        if side == 'send':
            r = rigs(a_scq=4)
            cq, owner = r.a.scq, r.a
            cap = cq.cqe
            for i in range(cap + 2):
                r.post(0x100 + i, i)
        else:
            r = rigs(b_rcq=4)
            cq, owner = r.b.rcq, r.b
            cap = cq.cqe
            for i in range(cap + 2):
                r.recv(0x100 + i, i)
            for i in range(cap + 1):
                r.post(0x200 + i, i, opcode=e.IBV_WR_SEND)
        # (the QPs hold 32 WRs, the MR 64 slots per side)
        assert 4 <= cap <= 16, f'unexpected size {cap}'
        events = collect_events(r, (e.IBV_EVENT_CQ_ERR, e.IBV_EVENT_QP_FATAL),
                                10)
        assert events == [e.IBV_EVENT_CQ_ERR, e.IBV_EVENT_QP_FATAL], events

        # nothing already completed is lost
        wcs = h.poll_cq(cq, cap)
        expect_wcs(wcs, range(0x100, 0x100 + cap),
                   e.IBV_WC_RDMA_WRITE if side == 'send' else e.IBV_WC_RECV,
                   'the completions that fitted')
        assert all(w.byte_len == SLOT and w.qp_num == owner.qpn
                   for w in wcs), [h.wc_str(w) for w in wcs]
        assert all(r.landed(i) for i in range(cap))
        assert h.drain_cq(cq, QUIET) == [], 'a CQE after the overflow'
        assert owner.state() == e.IBV_QPS_ERR
        if side == 'recv':
            # the requester saw its first `cap` SENDs succeed
            wcs = h.poll_cq(r.a.scq, cap + 1)
            expect_wcs(wcs[:cap], range(0x200, 0x200 + cap),
                       e.IBV_WC_SEND, 'the SENDs that were received')

        # the dead CQ stays empty: new work on its QP goes nowhere
        if side == 'send':
            r.post(0x1ff, cap + 2)
        else:
            r.recv(0x1ff, cap + 2)
        assert h.drain_cq(cq, QUIET) == []
        assert r.event(QUIET) is None, 'a second event for the dead CQ'

        lines = klog.read_new()
        assert any('CQ overflow' in line for line in lines), lines
    finally:
        klog.close()
