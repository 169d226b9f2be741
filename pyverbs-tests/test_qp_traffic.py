# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Data path on bzc0, loopback (two QPs on the same device, addressed by
the RoCE v2 GID of $BZC_IPV4): every RC opcode at sizes from 0 to 8 MiB
(the largest go through the kernel worker, > 64 KiB), unaligned buffers,
scatter/gather on both sides up to the QP's limits, inline data, UC and
UD, signaled vs unsignaled work requests and long chains.

Every transfer checks the bytes that arrived, and that the bytes just
around each destination buffer did not change (16 guard bytes on each
side); the destination is pre-filled with the complement of the expected
data, so a transfer that did not happen cannot pass.
"""

import ctypes
import random
import socket
import struct

import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h
from bzc_helpers import assert_quiet

pytestmark = pytest.mark.keeps_netdev

KiB, MiB = 1 << 10, 1 << 20
SIZES = [0, 1, 4095, 4096, 4097, 64 * KiB, 1 * MiB, 8 * MiB]
GUARD = 16
GUARD_BYTES = b'\xa5' * GUARD
BIG = 8 * MiB + 128 * KiB       # the largest message + room to misalign
AUX = 2 * MiB


# --------------------------------------------------------------------------
# Buffers: pieces of MRs at unaligned offsets, with guard bytes around
# --------------------------------------------------------------------------

class Piece:
    def __init__(self, mr, off, length):
        self.mr, self.off, self.length = mr, off, length

    @property
    def addr(self):
        return self.mr.buf + self.off

    def sge(self):
        return SGE(self.addr, self.length, self.mr.lkey)


def split(total, n, rng):
    """n lengths adding up to total (some may be 0 when total < n)."""
    if n == 1:
        return [total]
    cuts = sorted(rng.randrange(total + 1) for _ in range(n - 1))
    return [b - a for a, b in zip([0] + cuts, cuts + [total])]


def place(mrs, lengths, rng):
    """Pieces of the given lengths at odd offsets, round robin over `mrs`,
    with at least two guard areas between pieces."""
    cursor = {id(m): GUARD + rng.randrange(1, 4096, 2) for m in mrs}
    pieces = []
    for i, ln in enumerate(lengths):
        mr = mrs[i % len(mrs)]
        off = cursor[id(mr)]
        if off + ln + GUARD > mr.length:
            raise AssertionError('test bug: buffer layout does not fit')
        pieces.append(Piece(mr, off, ln))
        cursor[id(mr)] = off + ln + 2 * GUARD + rng.randrange(64)
    return pieces


def layout(mrs, total, n, rng):
    """n pieces holding `total` bytes (see place())."""
    return place(mrs, split(total, n, rng), rng)


def first_difference(got, want):
    k = 0
    while len(want) - k > 4096 and got[k:k + 4096] == want[k:k + 4096]:
        k += 4096
    return next(j for j in range(k, len(want)) if got[j] != want[j])


def write_pieces(pieces, data):
    pos = 0
    for p in pieces:
        if p.length:
            p.mr.write(data[pos:pos + p.length], p.length, p.off)
        pos += p.length


def prefill(pieces, content):
    """Guard bytes + content + guard bytes around every piece."""
    pos = 0
    for p in pieces:
        blob = GUARD_BYTES + content[pos:pos + p.length] + GUARD_BYTES
        p.mr.write(blob, len(blob), p.off - GUARD)
        pos += p.length


def verify(pieces, content, what):
    """The pieces hold `content` and their guard bytes are intact."""
    pos = 0
    for i, p in enumerate(pieces):
        want = GUARD_BYTES + content[pos:pos + p.length] + GUARD_BYTES
        got = p.mr.read(len(want), p.off - GUARD)
        if got != want:
            k = first_difference(got, want)
            where = ('guard before' if k < GUARD else
                     'guard after' if k >= GUARD + p.length else
                     f'byte {pos + k - GUARD} of the message')
            raise AssertionError(
                f'{what}: piece {i}/{len(pieces)} (offset {p.off}, '
                f'{p.length} bytes): first difference at {where}: '
                f'want {want[k:k + 8].hex()} got {got[k:k + 8].hex()}')
        pos += p.length


def send_wr(wr_id, opcode, pieces, flags=e.IBV_SEND_SIGNALED, imm=None):
    sges = [p.sge() for p in pieces]
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sges), sg=sges,
                send_flags=flags)
    if imm is not None:
        wr.imm_data = socket.htonl(imm)
    return wr


def recv_wr(wr_id, pieces):
    sges = [p.sge() for p in pieces]
    return RecvWR(wr_id=wr_id, num_sge=len(sges), sg=sges)


def check_wc(wc, what, wr_id, opcode=None, byte_len=None, qp_num=None):
    ok = (wc.status == e.IBV_WC_SUCCESS and wc.wr_id == wr_id and
          (opcode is None or wc.opcode == opcode) and
          (byte_len is None or wc.byte_len == byte_len) and
          (qp_num is None or wc.qp_num == qp_num))
    assert ok, (f'{what}: got {h.wc_str(wc)}; want wr_id={wr_id:#x} '
                f'SUCCESS opcode={opcode} byte_len={byte_len} '
                f'qp_num={qp_num}')


def check_imm(wc, what, imm):
    if imm is None:
        assert not wc.wc_flags & e.IBV_WC_WITH_IMM, \
            f'{what}: IBV_WC_WITH_IMM set without immediate: {h.wc_str(wc)}'
    else:
        assert wc.wc_flags & e.IBV_WC_WITH_IMM, \
            f'{what}: IBV_WC_WITH_IMM missing: {h.wc_str(wc)}'
        assert socket.ntohl(wc.imm_data) == imm, \
            f'{what}: immediate {socket.ntohl(wc.imm_data):#x}, want {imm:#x}'


# --------------------------------------------------------------------------
# Fixtures: one context, PD and set of MRs per module; QP pairs that are
# rebuilt if a failed test left them in a bad state
# --------------------------------------------------------------------------

class Env(h.VerbsEnv):
    def __init__(self):
        super().__init__(second_pd=False)
        self.dev_attr = self.ctx.query_device()
        acc = h.access_all()
        # side a (requester) and side b (responder) each have a big MR
        # and an auxiliary one, for gather lists that span two MRs
        self.mrs = {s: (self.reg(BIG, acc), self.reg(AUX, acc))
                    for s in 'ab'}
        self.pairs = {}

    def pair(self, kind):
        p = self.pairs.get(kind)
        if p is not None and not p.healthy():
            p.close()
            p = None
        if p is None:
            p = self.pairs[kind] = Pair(self, kind)
        p.drain()
        return p

    def close(self):
        for p in self.pairs.values():
            p.close()
        super().close()


QP_TYPES = {'rc': e.IBV_QPT_RC, 'uc': e.IBV_QPT_UC, 'ud': e.IBV_QPT_UD}


class Pair(h.QPPair):
    """QP a (requester) connected to QP b (responder); neither signals
    every WR (sq_sig_all=0)."""

    def __init__(self, env, kind):
        m = env.dev_attr.max_sge
        cap = QPCap(max_send_wr=128, max_recv_wr=128, max_send_sge=m,
                    max_recv_sge=m, max_inline_data=256)
        super().__init__(env, QP_TYPES[kind], cap, cq_depth=512)
        self.kind = kind
        self.ah = None
        if self.qp_type == e.IBV_QPT_UD:
            self.ah = AH(env.pd, attr=h.ah_attr_for(env.gid, env.gid_index))

    def healthy(self):
        return self.a.state() == e.IBV_QPS_RTS and \
            self.b.state() == e.IBV_QPS_RTS

    def drain(self):
        for cq in (self.a.scq, self.a.rcq, self.b.scq, self.b.rcq):
            h.drain_cq(cq)

    def ud(self, wr, to):
        if self.ah is not None:
            wr.set_wr_ud(self.ah, to.qpn, h.UD_QKEY)
        return wr

    def close(self):
        if self.ah is not None:
            self.ah.close()
        super().close()


@pytest.fixture(scope='module')
def env():
    with Env() as en:
        yield en


@pytest.fixture
def rc(env):
    return env.pair('rc')


@pytest.fixture
def uc(env):
    return env.pair('uc')


@pytest.fixture
def ud(env):
    return env.pair('ud')


@pytest.fixture
def rng(request):
    return random.Random(request.node.nodeid)


def each_size(sizes, fn):
    """Run fn(size) for every size; report every size that failed."""
    failed = []
    for size in sizes:
        try:
            fn(size)
        except AssertionError as ex:
            failed.append(f'size {size}: {ex}')
        except PyverbsRDMAError as ex:
            failed.append(f'size {size}: {ex}')
    assert not failed, '\n'.join(failed)


# --------------------------------------------------------------------------
# The transfers
# --------------------------------------------------------------------------

def do_send(env, pair, rng, size, imm=None, nsge_s=1, nsge_r=1, spare=0):
    """SEND (WITH_IMM) of `size` random bytes from a to b, whose receive
    buffer has `spare` bytes more than needed (they must not change)."""
    a, b = pair.a, pair.b
    data = rng.randbytes(size)
    extra = rng.randbytes(spare)
    src = layout(env.mrs['a'], size, nsge_s, rng)
    dst = layout(env.mrs['b'], size + spare, nsge_r, rng)
    write_pieces(src, data)
    prefill(dst, h.fill_for(data) + extra)
    rid, sid = rng.getrandbits(64), rng.getrandbits(64)
    b.qp.post_recv(recv_wr(rid, dst))
    op = e.IBV_WR_SEND if imm is None else e.IBV_WR_SEND_WITH_IMM
    a.qp.post_send(pair.ud(send_wr(sid, op, src, imm=imm), b))
    swc = h.poll_cq(a.scq, 1)[0]
    rwc = h.poll_cq(b.rcq, 1)[0]
    check_wc(swc, 'sender', sid, e.IBV_WC_SEND)
    check_wc(rwc, 'receiver', rid, e.IBV_WC_RECV, size, b.qpn)
    check_imm(rwc, 'receiver', imm)
    verify(dst, data + extra, 'received data')
    assert_quiet(a.rcq, 'sender receive CQ')


def do_write(env, pair, rng, size, imm=None, nsge=1):
    """RDMA WRITE (WITH_IMM) of `size` bytes from a's gather list into one
    region of b's big MR."""
    a, b = pair.a, pair.b
    data = rng.randbytes(size)
    src = layout(env.mrs['a'], size, nsge, rng)
    dst = layout(env.mrs['b'][:1], size, 1, rng)
    write_pieces(src, data)
    prefill(dst, h.fill_for(data))
    rid, sid = rng.getrandbits(64), rng.getrandbits(64)
    if imm is not None:
        # the receive consumed by WRITE_WITH_IMM: its buffer stays as is
        rbuf = layout(env.mrs['b'][1:], 16, 1, rng)
        untouched = rng.randbytes(16)
        prefill(rbuf, untouched)
        b.qp.post_recv(recv_wr(rid, rbuf))
        op = e.IBV_WR_RDMA_WRITE_WITH_IMM
    else:
        op = e.IBV_WR_RDMA_WRITE
    wr = send_wr(sid, op, src, imm=imm)
    wr.set_wr_rdma(env.mrs['b'][0].rkey, dst[0].addr)
    a.qp.post_send(wr)
    swc = h.poll_cq(a.scq, 1)[0]
    check_wc(swc, 'writer', sid, e.IBV_WC_RDMA_WRITE)
    if imm is not None:
        rwc = h.poll_cq(b.rcq, 1)[0]
        check_wc(rwc, 'target', rid, e.IBV_WC_RECV_RDMA_WITH_IMM, size,
                 b.qpn)
        check_imm(rwc, 'target', imm)
        verify(rbuf, untouched, 'receive buffer of WRITE_WITH_IMM')
    verify(dst, data, 'written data')
    assert_quiet(b.rcq, 'target receive CQ')


def do_read(env, pair, rng, size, nsge=1):
    """RDMA READ of `size` bytes of b's big MR into a's scatter list."""
    a, b = pair.a, pair.b
    data = rng.randbytes(size)
    remote = layout(env.mrs['b'][:1], size, 1, rng)
    dst = layout(env.mrs['a'], size, nsge, rng)
    write_pieces(remote, data)
    prefill(dst, h.fill_for(data))
    sid = rng.getrandbits(64)
    wr = send_wr(sid, e.IBV_WR_RDMA_READ, dst)
    wr.set_wr_rdma(env.mrs['b'][0].rkey, remote[0].addr)
    a.qp.post_send(wr)
    swc = h.poll_cq(a.scq, 1)[0]
    check_wc(swc, 'reader', sid, e.IBV_WC_RDMA_READ, size)
    verify(dst, data, 'read data')
    assert_quiet(b.rcq, 'target receive CQ')


# --------------------------------------------------------------------------
# RC
# --------------------------------------------------------------------------

def test_rc_send(env, rc, rng):
    each_size(SIZES, lambda n: do_send(env, rc, rng, n))


def test_rc_send_with_imm(env, rc, rng):
    each_size(SIZES, lambda n: do_send(env, rc, rng, n,
                                       imm=rng.getrandbits(32)))


def test_rc_send_into_larger_receive(env, rc, rng):
    """The bytes of a receive buffer beyond the message stay as they were;
    byte_len is the message's."""
    each_size([0, 1, 4097, 100 * KiB],
              lambda n: do_send(env, rc, rng, n, spare=4099))


def test_rc_rdma_write(env, rc, rng):
    each_size(SIZES, lambda n: do_write(env, rc, rng, n))


def test_rc_rdma_write_with_imm(env, rc, rng):
    """The target gets IBV_WC_RECV_RDMA_WITH_IMM with the immediate and the
    write's length, and its receive buffer is not touched."""
    each_size(SIZES, lambda n: do_write(env, rc, rng, n,
                                        imm=rng.getrandbits(32)))


def test_rc_rdma_read(env, rc, rng):
    each_size(SIZES, lambda n: do_read(env, rc, rng, n))


def test_rc_multi_sge(env, rc, rng):
    """Gather and scatter lists of max_send_sge / max_recv_sge entries
    spanning two MRs, for SEND, WRITE and READ; one size runs in the
    doorbell, the others in the worker."""
    ns, nr = rc.a.cap.max_send_sge, rc.b.cap.max_recv_sge
    assert ns >= env.dev_attr.max_sge and nr >= env.dev_attr.max_sge, \
        f'QP granted {ns}/{nr} SGEs, asked for {env.dev_attr.max_sge}'
    sizes = [ns - 1, 64 * KiB + 7, 1 * MiB + 13]
    each_size(sizes, lambda n: do_send(env, rc, rng, n, nsge_s=ns,
                                       nsge_r=nr, spare=5))
    each_size(sizes, lambda n: do_write(env, rc, rng, n, nsge=ns))
    each_size(sizes, lambda n: do_read(env, rc, rng, n, nsge=ns))


def test_rc_inline(env, rc, rng):
    """IBV_SEND_INLINE: the data is taken at post time from memory that is
    not registered (the lkey is garbage), up to max_inline_data, split over
    several SGEs; one byte more is refused with EINVAL."""
    a, b = rc.a, rc.b
    mx = a.cap.max_inline_data
    assert mx >= 256, f'max_inline_data {mx} < the 256 asked for'

    def inline_sges(data, n):
        """Unregistered memory holding data, and n SGEs over it."""
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        base, pos, sges = ctypes.addressof(buf), 0, []
        for ln in split(len(data), n, rng):
            sges.append(SGE(base + pos, ln, 0xdeadbeef))
            pos += ln
        return buf, sges

    def one(size, opcode, nsge):
        data = rng.randbytes(size)
        buf, sges = inline_sges(data, nsge)
        sid = rng.getrandbits(64)
        wr = SendWR(wr_id=sid, opcode=opcode, num_sge=len(sges), sg=sges,
                    send_flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
        if opcode == e.IBV_WR_SEND:
            dst = layout(env.mrs['b'], size, 1, rng)
            prefill(dst, h.fill_for(data))
            rid = rng.getrandbits(64)
            b.qp.post_recv(recv_wr(rid, dst))
        else:
            dst = layout(env.mrs['b'][:1], size, 1, rng)
            prefill(dst, h.fill_for(data))
            wr.set_wr_rdma(env.mrs['b'][0].rkey, dst[0].addr)
        a.qp.post_send(wr)
        ctypes.memset(buf, 0x5a, len(buf.raw))  # copied at post time
        check_wc(h.poll_cq(a.scq, 1)[0], 'inline sender', sid)
        if opcode == e.IBV_WR_SEND:
            check_wc(h.poll_cq(b.rcq, 1)[0], 'inline receiver', rid,
                     e.IBV_WC_RECV, size)
        verify(dst, data, f'inline opcode {opcode} data')

    for opcode in (e.IBV_WR_SEND, e.IBV_WR_RDMA_WRITE):
        each_size([0, 1, 100, mx], lambda n: one(n, opcode, 1))
        one(mx, opcode, 3)
    # one byte too many: refused at post time, nothing reaches the device
    data = rng.randbytes(mx + 1)
    buf = ctypes.create_string_buffer(data, len(data))
    wr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                sg=[SGE(ctypes.addressof(buf), mx + 1, 0)],
                send_flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
    with pytest.raises(PyverbsRDMAError) as ei:
        a.qp.post_send(wr)
    assert ei.value.error_code == 22, f'inline of {mx + 1} bytes: {ei.value}'
    assert_quiet(a.scq, 'after the refused inline post', 0.2)
    assert a.state() == e.IBV_QPS_RTS


def test_rc_atomics(env, rc, rng):
    """CMP_AND_SWP (equal and not equal) and FETCH_AND_ADD (with wrap
    around): the original value comes back in the local buffer, byte_len
    is 8, the remote memory is updated (or not)."""
    a = rc.a
    lmr, rmr = env.mrs['a'][0], env.mrs['b'][0]
    roff = 8 * rng.randrange(1, 4096)       # remote: 8-byte aligned
    loff = rng.randrange(1, 4096) | 1       # local result: unaligned is fine
    U64 = (1 << 64) - 1

    def atomic(opcode, cmp_add, swap, remote_before):
        rmr.write(struct.pack('<Q', remote_before), 8, roff)
        lmr.write(b'\xee' * 8, 8, loff)
        sid = rng.getrandbits(64)
        wr = SendWR(wr_id=sid, opcode=opcode, num_sge=1,
                    sg=[SGE(lmr.buf + loff, 8, lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rmr.rkey, rmr.buf + roff, cmp_add, swap)
        a.qp.post_send(wr)
        want_op = (e.IBV_WC_COMP_SWAP if opcode == e.IBV_WR_ATOMIC_CMP_AND_SWP
                   else e.IBV_WC_FETCH_ADD)
        check_wc(h.poll_cq(a.scq, 1)[0], f'atomic {opcode}', sid, want_op, 8)
        orig = struct.unpack('<Q', lmr.read(8, loff))[0]
        after = struct.unpack('<Q', rmr.read(8, roff))[0]
        return orig, after

    x, y, z = (rng.getrandbits(64) for _ in range(3))
    assert atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, x, y, x) == (x, y), \
        'CMP_AND_SWP with equal compare: want (original, swapped)'
    assert atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, x, z, y) == (y, y), \
        'CMP_AND_SWP with different compare: memory must not change'
    assert atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, 7, 0, U64 - 4) == \
        (U64 - 4, 2), 'FETCH_AND_ADD must wrap modulo 2^64'

    # 16 FETCH_AND_ADDs in one post: each sees the previous one's result
    rmr.write(struct.pack('<Q', 1000), 8, roff)
    adds = [rng.randrange(1, 1 << 20) for _ in range(16)]
    first, keep = None, []
    for i, add in enumerate(reversed(adds)):
        wr = SendWR(wr_id=len(adds) - 1 - i,
                    opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                    sg=[SGE(lmr.buf + loff + 8 * (len(adds) - 1 - i), 8,
                            lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rmr.rkey, rmr.buf + roff, add, 0)
        keep.append(wr)
        if first is not None:
            wr.next_wr = first
        first = wr
    a.qp.post_send(first)
    wcs = h.poll_cq(a.scq, len(adds))
    assert [w.wr_id for w in wcs] == list(range(len(adds)))
    for w in wcs:
        check_wc(w, 'chained FETCH_AND_ADD', w.wr_id, e.IBV_WC_FETCH_ADD, 8)
    olds = struct.unpack(f'<{len(adds)}Q', lmr.read(8 * len(adds), loff))
    want, v = [], 1000
    for add in adds:
        want.append(v)
        v += add
    assert list(olds) == want, 'FETCH_AND_ADD results out of order'
    assert struct.unpack('<Q', rmr.read(8, roff))[0] == v


def test_rc_signaled_only_complete(env, rc, rng):
    """With sq_sig_all=0 only WRs posted with IBV_SEND_SIGNALED produce a
    send completion, in posting order."""
    a = rc.a
    dst = layout(env.mrs['b'][:1], 64, 1, rng)[0]
    src = layout(env.mrs['a'][:1], 64, 1, rng)
    pattern = [1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0]
    for i, sig in enumerate(pattern):
        wr = send_wr(i, e.IBV_WR_RDMA_WRITE, src,
                     flags=e.IBV_SEND_SIGNALED if sig else 0)
        wr.set_wr_rdma(env.mrs['b'][0].rkey, dst.addr)
        a.qp.post_send(wr)
    want = [i for i, s in enumerate(pattern) if s]
    wcs = h.poll_cq(a.scq, len(want))
    assert [w.wr_id for w in wcs] == want
    for w in wcs:
        check_wc(w, 'signaled write', w.wr_id, e.IBV_WC_RDMA_WRITE)
    assert_quiet(a.scq, 'unsignaled WRs', 0.3)


def test_rc_sq_sig_all(env, rng):
    """A QP created with sq_sig_all=1 completes every WR, signaled or
    not."""
    a = h.QPEnd(env.ctx, env.pd, e.IBV_QPT_RC, QPCap(max_send_wr=8),
                sq_sig_all=True, cq_depth=16)
    b = h.QPEnd(env.ctx, env.pd, e.IBV_QPT_RC, cq_depth=16)
    try:
        h.connect_qps(a, b, env.gid_index)
        src = layout(env.mrs['a'][:1], 32, 1, rng)
        dst = layout(env.mrs['b'][:1], 32, 1, rng)[0]
        for i in range(4):
            wr = send_wr(i, e.IBV_WR_RDMA_WRITE, src,
                         flags=e.IBV_SEND_SIGNALED if i == 2 else 0)
            wr.set_wr_rdma(env.mrs['b'][0].rkey, dst.addr)
            a.qp.post_send(wr)
        wcs = h.poll_cq(a.scq, 4)
        assert [w.wr_id for w in wcs] == [0, 1, 2, 3]
        for w in wcs:
            check_wc(w, 'sq_sig_all write', w.wr_id, e.IBV_WC_RDMA_WRITE)
    finally:
        a.close()
        b.close()


def test_rc_chain_of_64(env, rc, rng):
    """64 receives in one post_recv and 64 WRs (SEND and RDMA WRITE in
    turn) in one post_send: all complete, in order, with their data."""
    a, b = rc.a, rc.b
    n = 64
    msgs = [rng.randbytes(rng.randrange(1, 200)) for _ in range(n)]
    src = layout(env.mrs['a'][:1], sum(len(m) for m in msgs), 1, rng)[0]
    sends = [i for i in range(n) if i % 2 == 0]
    writes = [i for i in range(n) if i % 2]
    rb = place(env.mrs['b'][1:], [256] * len(sends), rng)
    rbufs = dict(zip(sends, rb))
    wd = place(env.mrs['b'][:1], [len(msgs[i]) for i in writes], rng)
    wdst = {i: [p] for i, p in zip(writes, wd)}
    keep = []                   # the WR objects of the chains stay alive
    rfirst = None
    for i in reversed(sends):
        prefill([rbufs[i]], b'\0' * 256)
        r = recv_wr(1000 + i, [rbufs[i]])
        keep.append(r)
        if rfirst is not None:
            r.next_wr = rfirst
        rfirst = r
    b.qp.post_recv(rfirst)
    pos, pieces = 0, []
    for m in msgs:
        pieces.append(Piece(src.mr, src.off + pos, len(m)))
        pos += len(m)
    write_pieces(pieces, b''.join(msgs))
    first = None
    for i in reversed(range(n)):
        if i in wdst:
            prefill(wdst[i], h.fill_for(msgs[i]))
            wr = send_wr(i, e.IBV_WR_RDMA_WRITE, [pieces[i]])
            wr.set_wr_rdma(env.mrs['b'][0].rkey, wdst[i][0].addr)
        else:
            wr = send_wr(i, e.IBV_WR_SEND, [pieces[i]])
        keep.append(wr)
        if first is not None:
            wr.next_wr = first
        first = wr
    a.qp.post_send(first)
    swcs = h.poll_cq(a.scq, n)
    assert [w.wr_id for w in swcs] == list(range(n)), 'send completions ' \
        'out of order'
    for w in swcs:
        check_wc(w, 'chain sender', w.wr_id,
                 e.IBV_WC_SEND if w.wr_id in rbufs else e.IBV_WC_RDMA_WRITE)
    rwcs = h.poll_cq(b.rcq, len(sends))
    assert [w.wr_id - 1000 for w in rwcs] == sends, \
        'receive completions out of order'
    for w in rwcs:
        i = w.wr_id - 1000
        check_wc(w, 'chain receiver', w.wr_id, e.IBV_WC_RECV, len(msgs[i]))
        got = rbufs[i].mr.read(len(msgs[i]), rbufs[i].off)
        assert got == msgs[i], f'message {i} corrupted'
    for i in writes:
        verify(wdst[i], msgs[i], f'write {i} of the chain')


# --------------------------------------------------------------------------
# UC and UD
# --------------------------------------------------------------------------

UC_SIZES = [0, 1, 4097, 64 * KiB, 1 * MiB]


def test_uc_send(env, uc, rng):
    each_size(UC_SIZES, lambda n: do_send(env, uc, rng, n))
    each_size([1, 4097], lambda n: do_send(env, uc, rng, n,
                                           imm=rng.getrandbits(32)))


def test_uc_rdma_write(env, uc, rng):
    each_size(UC_SIZES, lambda n: do_write(env, uc, rng, n))
    each_size([0, 4097], lambda n: do_write(env, uc, rng, n,
                                            imm=rng.getrandbits(32)))


def test_uc_send_without_receive_is_dropped(env, uc, rng):
    """UC has no RNR: a SEND finding no receive completes successfully at
    the sender and is lost; both QPs stay in RTS and the next message,
    with a receive posted, arrives."""
    a, b = uc.a, uc.b
    src = layout(env.mrs['a'][:1], 100, 1, rng)
    write_pieces(src, rng.randbytes(100))
    a.qp.post_send(send_wr(7, e.IBV_WR_SEND, src))
    check_wc(h.poll_cq(a.scq, 1)[0], 'UC sender', 7, e.IBV_WC_SEND)
    assert_quiet(b.rcq, 'UC receiver without a receive', 0.2)
    assert a.state() == e.IBV_QPS_RTS and b.state() == e.IBV_QPS_RTS
    do_send(env, uc, rng, 100)


def test_ud_send(env, ud, rng):
    """UD SEND (WITH_IMM): the receive buffer starts with the 40-byte GRH
    naming the source and destination GID, byte_len counts it,
    IBV_WC_GRH is set and src_qp is the sender's QPN."""
    a, b = ud.a, ud.b
    mtu = h.IB_MTU[env.ctx.query_port(h.PORT).active_mtu]
    gid = h.gid_raw(env.gid)

    def one(size, imm):
        data = rng.randbytes(size)
        src = layout(env.mrs['a'][:1], size, 1, rng)
        dst = layout(env.mrs['b'][:1], h.GRH_BYTES + size + 8, 1, rng)
        write_pieces(src, data)
        spare = rng.randbytes(8)
        prefill(dst, b'\0' * h.GRH_BYTES + h.fill_for(data) + spare)
        rid, sid = rng.getrandbits(64), rng.getrandbits(64)
        b.qp.post_recv(recv_wr(rid, dst))
        op = e.IBV_WR_SEND if imm is None else e.IBV_WR_SEND_WITH_IMM
        a.qp.post_send(ud.ud(send_wr(sid, op, src, imm=imm), b))
        check_wc(h.poll_cq(a.scq, 1)[0], 'UD sender', sid, e.IBV_WC_SEND)
        rwc = h.poll_cq(b.rcq, 1)[0]
        check_wc(rwc, 'UD receiver', rid, e.IBV_WC_RECV,
                 h.GRH_BYTES + size, b.qpn)
        check_imm(rwc, 'UD receiver', imm)
        assert rwc.wc_flags & e.IBV_WC_GRH, f'no IBV_WC_GRH: {h.wc_str(rwc)}'
        assert rwc.src_qp == a.qpn, \
            f'src_qp {rwc.src_qp}, want the sender {a.qpn}'
        grh = dst[0].mr.read(h.GRH_BYTES, dst[0].off)
        assert grh[8:24] == gid, \
            f'GRH source GID {grh[8:24].hex()}, want {gid.hex()}'
        assert grh[24:40] == gid, \
            f'GRH destination GID {grh[24:40].hex()}, want {gid.hex()}'
        verify(dst, grh + data + spare, 'UD payload')

    each_size([0, 1, 100, mtu], lambda n: one(n, None))
    each_size([0, mtu], lambda n: one(n, rng.getrandbits(32)))


def test_ud_wrong_qkey_is_dropped(env, ud, rng):
    """A datagram with a Q_Key other than the receiver's is dropped: the
    sender completes successfully, the receive stays posted (and gets the
    next datagram with the right Q_Key)."""
    a, b = ud.a, ud.b
    src = layout(env.mrs['a'][:1], 32, 1, rng)
    write_pieces(src, rng.randbytes(32))
    dst = layout(env.mrs['b'][:1], h.GRH_BYTES + 32, 1, rng)
    b.qp.post_recv(recv_wr(99, dst))
    wr = send_wr(5, e.IBV_WR_SEND, src)
    wr.set_wr_ud(ud.ah, b.qpn, h.UD_QKEY ^ 0x1)
    a.qp.post_send(wr)
    check_wc(h.poll_cq(a.scq, 1)[0], 'UD sender (wrong qkey)', 5)
    assert_quiet(b.rcq, 'UD receiver (wrong qkey)', 0.2)
    a.qp.post_send(ud.ud(send_wr(6, e.IBV_WR_SEND, src), b))
    check_wc(h.poll_cq(a.scq, 1)[0], 'UD sender', 6)
    check_wc(h.poll_cq(b.rcq, 1)[0], 'UD receiver', 99, e.IBV_WC_RECV,
             h.GRH_BYTES + 32)


def test_ud_send_larger_than_mtu_not_delivered(env, ud, rng):
    """IBA C10-93.1.1: a UD message longer than the port's MTU emits
    nothing and is not an error: the sender completes successfully, the
    receiver gets nothing (as rxe does), and the receive stays posted
    for the next datagram that fits."""
    a, b = ud.a, ud.b
    mtu = h.IB_MTU[env.ctx.query_port(h.PORT).active_mtu]
    dst = layout(env.mrs['b'][:1], h.GRH_BYTES + 4 * mtu, 1, rng)
    b.qp.post_recv(recv_wr(99, dst))
    failed = []
    for size in (mtu + 1, 4 * mtu):
        src = layout(env.mrs['a'][:1], size, 1, rng)
        write_pieces(src, rng.randbytes(size))
        a.qp.post_send(ud.ud(send_wr(size, e.IBV_WR_SEND, src), b))
        check_wc(h.poll_cq(a.scq, 1)[0], f'UD sender of {size} bytes', size)
        got = h.drain_cq(b.rcq, 0.2)
        if got:
            failed.append(f'{size} bytes > MTU {mtu} delivered: ' +
                          '; '.join(h.wc_str(w) for w in got))
            b.qp.post_recv(recv_wr(99, dst))
    assert not failed, '\n'.join(failed)
    src = layout(env.mrs['a'][:1], mtu, 1, rng)
    a.qp.post_send(ud.ud(send_wr(1, e.IBV_WR_SEND, src), b))
    check_wc(h.poll_cq(a.scq, 1)[0], 'UD sender of MTU bytes', 1)
    check_wc(h.poll_cq(b.rcq, 1)[0], 'UD receiver', 99, e.IBV_WC_RECV,
             h.GRH_BYTES + mtu)
