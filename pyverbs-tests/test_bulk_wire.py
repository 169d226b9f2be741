# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Bulk channels on an RC QP's connection (bzcdv_connect_bulk_chan_qp(),
issue 11 part 4): a bulk request becomes standard RDMA WRITE, WRITE with
immediate and READ messages of at most 2^31 bytes on the QP, so the far
side is any RC QP with an MR and an rkey.

On one machine the QP is connected to itself through bzc0 (the local
transport). On two machines (marker two_hosts, tools/bzc-machines) the far
side is a plain pyverbs RC QP on the peer (bulk_wire_peer.py): rxe1 by
default, bzc0 with --peer bzc. The data is checked by SHA-256 on the peer.

BULK_WIRE_MIB sets the size of the two-machine transfers (default 64: a
1 GiB transfer takes minutes between two TCG guests; tools/bzc demo
--two-hosts and tools/bzc_bulk_bw --qp-peer run the 1 GiB one).
"""

import ctypes
import errno
import hashlib
import os
import threading
import time

import pytest

import bzc_helpers as h
import bzcdv as dv
import client_runner as cr
import peer as peer_mod
import test_two_hosts as th

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20
WIRE_BYTES = int(os.environ.get('BULK_WIRE_MIB', '64')) * MIB
BZC_IPV4 = os.environ.get('BZC_IPV4', '198.19.0.1')
IMM = 0x5eed0b0c
MTU_4096 = 5
WC_REM_ACCESS_ERR = 10
ACCESS_ON_DEMAND = 1 << 6
PAGE = 4096
WC_RECV_RDMA_WITH_IMM = 129

needs_qp_chan = pytest.mark.skipif(
    not hasattr(dv.lib, 'bzcdv_connect_bulk_chan_qp'),
    reason='libbzc without bzcdv_connect_bulk_chan_qp (bulk channels on QPs)')
pytestmark = [needs_qp_chan]


def sha(addr, length):
    d = hashlib.sha256()
    pos = 0
    while pos < length:
        n = min(16 * MIB, length - pos)
        d.update(dv.read(addr + pos, n))
        pos += n
    return d.hexdigest()


def msg_bytes():
    """Bytes of each RDMA message of a bulk request on a QP."""
    with open('/sys/module/bzc/parameters/bulk_qp_msg_kb') as f:
        msg = int(f.read()) << 10
    return min(max(msg, 4 << 10), 1 << 31)


def last_msg_len(n):
    """Bytes of the last RDMA message of an n-byte bulk request on a QP."""
    msg = msg_bytes()
    return n - (n - 1) // msg * msg if n else 0


def one(chan, wr, timeout=120.0):
    wcs = chan.run([wr], timeout=timeout)
    assert len(wcs) == 1
    return wcs[0]


# --------------------------------------------------------------------------
# One machine: a channel on a QP connected to itself
# --------------------------------------------------------------------------

@pytest.fixture
def ctx():
    if not dv.is_supported(h.DEV):
        pytest.skip(dv.NO_BULK_REASON)
    c = dv.Ctx(h.DEV)
    yield c
    c.close()


def loop_qp(ctx):
    return ctx.rc_qp(ctx.loopback_gid()[0])


def test_connect_qp_checks(ctx):
    """Only an RC QP of the channel's PD in RTS, once per channel, and not
    beside a peer channel."""
    qp = loop_qp(ctx)
    other_pd = ctx.alloc_pd()
    foreign = ctx.chan(pd=other_pd)
    assert foreign.connect_qp(qp) == errno.EINVAL
    chan = ctx.chan()
    assert chan.connect_qp(qp) == 0
    assert chan.connect_qp(qp) == errno.EISCONN
    gid = ctx.loopback_gid()[1]
    assert chan.connect(gid, chan.num) == errno.EISCONN
    peer_chan = ctx.chan()
    assert peer_chan.connect(gid, peer_chan.num) == 0
    assert peer_chan.connect_qp(qp) == errno.EISCONN
    # A QP that is not in RTS yet.
    cq = ctx.cq()
    raw = dv.RcQp.__new__(dv.RcQp)
    ia = dv.IbvQpInitAttr(send_cq=ctypes.cast(cq.p, dv.VP),
                          recv_cq=ctypes.cast(cq.p, dv.VP), qp_type=dv.QPT_RC)
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1
    raw.p = dv._ibv.ibv_create_qp(ctx.pd, ctypes.byref(ia))
    assert raw.p
    ctx.track(raw)
    assert ctx.chan().connect_qp(raw) == errno.ENOTCONN


def test_write_read_on_qp(ctx):
    """WRITE from MR-cache memory (lkey 0) into an MR through the QP, then
    READ it back into an MR: the bytes arrive, one completion each, the
    QP stays in RTS and its own CQ gets nothing."""
    n = 8 * MIB + 4099
    qp = loop_qp(ctx)
    chan = ctx.chan()
    assert chan.connect_qp(qp) == 0
    src, dst, back = ctx.buf(n), ctx.buf(n), ctx.buf(n)
    block = dv.pattern(11)
    dv.fill(src.addr, n, block)
    dst_mr, back_mr = ctx.mr(dst.addr, n), ctx.mr(back.addr, n)
    wc = one(chan, {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                    'raddr': dst.addr, 'rkey': dst_mr.rkey})
    assert wc.status == dv.WC_SUCCESS and wc.byte_len == n, dv.wc_str(wc)
    assert dv.memcmp(src.addr, dst.addr, n) == 0
    wc = one(chan, {'op': dv.BULK_READ,
                    'sges': [(back.addr, n // 2, back_mr.lkey),
                             (back.addr + n // 2, n - n // 2, back_mr.lkey)],
                    'raddr': dst.addr, 'rkey': dst_mr.rkey})
    assert wc.status == dv.WC_SUCCESS and wc.byte_len == n, dv.wc_str(wc)
    assert dv.memcmp(src.addr, back.addr, n) == 0
    assert qp.state() == dv.QPS_RTS
    qp.cq.assert_empty()


def test_bad_rkey_on_qp(ctx):
    """A wrong rkey: the bulk WQE completes with REM_ACCESS_ERR, the target
    is untouched, the QP is in ERR and the channel stopped (the next post
    fails with EIO, as after a lost completion)."""
    n = MIB
    qp = loop_qp(ctx)
    chan = ctx.chan()
    assert chan.connect_qp(qp) == 0
    src, dst = ctx.buf(n), ctx.buf(n)
    dv.fill(src.addr, n, dv.pattern(3))
    dv.zero(dst.addr, n, 0xa5)
    dst_mr = ctx.mr(dst.addr, n)
    wc = one(chan, {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                    'raddr': dst.addr, 'rkey': dst_mr.rkey ^ 0x80})
    assert wc.status == WC_REM_ACCESS_ERR, dv.wc_str(wc)
    assert dv.read(dst.addr, n) == b'\xa5' * n
    assert qp.state() == dv.QPS_ERR
    rc, _ = chan.post([{'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                        'raddr': dst.addr, 'rkey': dst_mr.rkey}])
    assert rc == errno.EIO


def test_qp_held_by_channel(ctx):
    """The channel holds its QP: ibv_destroy_qp() fails with EBUSY until
    the channel is destroyed, then succeeds."""
    qp = loop_qp(ctx)
    chan = ctx.chan()
    assert chan.connect_qp(qp) == 0
    rc = dv._ibv.ibv_destroy_qp(qp.p)
    assert rc == errno.EBUSY
    chan.close()
    qp.close()


def test_write_with_imm_waits_for_receive(ctx):
    """WRITE_WITH_IMM to a QP with no receive posted: RNR NAKs, retried
    after the responder's timer (rnr_retry 7: until it works), so the
    request completes once a receive is posted, and the QP's CQ gets one
    receive completion with the immediate and the last message's length;
    a zero-length one too."""
    n = 3 * MIB + 5
    qp = loop_qp(ctx)
    chan = ctx.chan()
    assert chan.connect_qp(qp) == 0
    src, dst, rbuf = ctx.buf(n), ctx.buf(n), ctx.buf(4096)
    dv.fill(src.addr, n, dv.pattern(31))
    dst_mr, rmr = ctx.mr(dst.addr, n), ctx.mr(rbuf.addr, 4096)
    rc, _ = chan.post([{'op': dv.BULK_WRITE_WITH_IMM, 'imm': IMM,
                        'sges': [(src.addr, n, 0)], 'raddr': dst.addr,
                        'rkey': dst_mr.rkey}])
    assert rc == 0
    time.sleep(1.0)
    assert chan.cq.poll() == [], 'completed without a receive at the peer'
    assert qp.post_recv(70, rbuf.addr, 4096, rmr.lkey) == 0
    wc = chan.cq.wait(1, timeout=60)[0]
    assert wc.status == dv.WC_SUCCESS and wc.byte_len == n, dv.wc_str(wc)
    assert dv.memcmp(src.addr, dst.addr, n) == 0
    got = qp.cq.wait(1, timeout=10)[0]
    assert got.wr_id == 70 and got.status == dv.WC_SUCCESS and \
        got.opcode == WC_RECV_RDMA_WITH_IMM and dv.wc_imm(got) == IMM and \
        got.byte_len == last_msg_len(n), dv.wc_str(got)
    # Zero bytes: one zero-length message, still one receive.
    assert qp.post_recv(71, rbuf.addr, 4096, rmr.lkey) == 0
    wc = one(chan, {'op': dv.BULK_WRITE_WITH_IMM, 'imm': IMM + 1,
                    'raddr': dst.addr, 'rkey': dst_mr.rkey})
    assert wc.status == dv.WC_SUCCESS and wc.byte_len == 0, dv.wc_str(wc)
    got = qp.cq.wait(1, timeout=10)[0]
    assert got.wr_id == 71 and dv.wc_imm(got) == IMM + 1 and \
        got.byte_len == 0, dv.wc_str(got)
    qp.cq.assert_empty()


def test_destroy_mid_transfer(ctx):
    """Destroying the channel while its requests run on the QP: every
    request completes (done or WR_FLUSH_ERR) before the destroy returns,
    and the QP is free to go afterwards."""
    n = 64 * MIB
    qp = loop_qp(ctx)
    chan = ctx.chan()
    assert chan.connect_qp(qp) == 0
    src, dst = ctx.buf(n), ctx.buf(n)
    dst_mr = ctx.mr(dst.addr, n)
    rc, _ = chan.post([{'op': dv.BULK_WRITE, 'wr_id': i,
                        'sges': [(src.addr, n, 0)], 'raddr': dst.addr,
                        'rkey': dst_mr.rkey} for i in range(4)])
    assert rc == 0
    chan.close()
    wcs = chan.cq.wait(4, timeout=10)
    assert sorted(w.wr_id for w in wcs) == [0, 1, 2, 3]
    assert all(w.status in (dv.WC_SUCCESS, dv.WC_WR_FLUSH_ERR)
               for w in wcs), [dv.wc_str(w) for w in wcs]
    qp.close()


# --------------------------------------------------------------------------
# Two machines: the far side is a plain RC QP on the peer
# --------------------------------------------------------------------------

def gid_str(raw):
    return ':'.join(raw[i:i + 2].hex() for i in range(0, 16, 2))


class Far(peer_mod.Script):
    """bulk_wire_peer.py on the peer, and our RC QP connected to its."""

    def __init__(self, peer, size):
        env = peer.env
        self.dev = env['BZC_LINK_DEV']
        self.ipv4 = env['BZC_IPV4']
        gidx = th.gid_index(th.peer_gids(peer, self.dev), self.ipv4)
        port = cr.free_tcp_port()
        super().__init__(peer, ['/usr/bin/python3',
                                os.path.join(HERE, 'bulk_wire_peer.py'),
                                self.dev, str(gidx), str(port), str(size)],
                         self.ipv4, port)
        self.info = self.ask('info')

    def connect(self, qp):
        self.ask('connect', qpn=qp.qpn, gid=gid_str(qp.gid), psn=0,
                 mtu=MTU_4096)


@pytest.fixture
def far(peer):
    """(ctx, chan, far): a channel on an RC QP of bzc0 connected to the
    peer script's QP, and its MR of WIRE_BYTES."""
    if not dv.is_supported(h.DEV):
        pytest.skip(dv.NO_BULK_REASON)
    f = Far(peer, WIRE_BYTES)
    c = dv.Ctx(h.DEV)
    try:
        want = dv.ipv4_gid(BZC_IPV4)
        qp = c.rc_qp(c.gid_index(want), path_mtu=MTU_4096,
                     remote={'qpn': f.info['qpn'],
                             'gid': bytes.fromhex(
                                 f.info['gid'].replace(':', '')),
                             'psn': f.info['psn']})
        f.connect(qp)
        chan = c.chan()
        assert chan.connect_qp(qp) == 0
        yield c, chan, f, qp
    finally:
        c.close()
        f.close()


def timed(chan, wr, nbytes):
    t0 = time.monotonic()
    wc = one(chan, wr, timeout=900)
    dt = time.monotonic() - t0
    print(f'{nbytes / MIB:.0f} MiB in {dt:.1f} s: '
          f'{nbytes / dt / 1e6:.1f} MB/s')
    return wc


@pytest.mark.two_hosts
def test_wire_write(far):
    """A bulk WRITE of WIRE_BYTES from MR-cache memory into the peer's MR
    arrives intact (SHA-256 on the peer), one completion."""
    c, chan, f, _ = far
    n = WIRE_BYTES
    src = c.buf(n)
    dv.fill(src.addr, n, dv.pattern(21))
    wc = timed(chan, {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                      'raddr': f.info['addr'], 'rkey': f.info['rkey']}, n)
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    assert wc.byte_len == (n if n < 1 << 32 else dv.BYTE_LEN_SATURATED)
    assert f.ask('sha', off=0, len=n)['sha'] == sha(src.addr, n)
    chan.cq.assert_empty()


@pytest.mark.two_hosts
def test_wire_write_with_imm(far):
    """WRITE_WITH_IMM: the data arrives and the peer's QP consumes one
    receive, with the immediate; its byte_len is the length of the last
    message (the request is cut into messages of bulk_qp_msg_kb KiB)."""
    c, chan, f, _ = far
    n = 4 * MIB + 12
    src = c.buf(n)
    dv.fill(src.addr, n, dv.pattern(22))
    wc = one(chan, {'op': dv.BULK_WRITE_WITH_IMM, 'imm': IMM,
                    'sges': [(src.addr, n, 0)],
                    'raddr': f.info['addr'] + 8, 'rkey': f.info['rkey']})
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    got = f.ask('recv', timeout=20)['wcs']
    assert len(got) == 1, got
    assert got[0]['status'] == 0 and \
        got[0]['opcode'] == WC_RECV_RDMA_WITH_IMM and \
        got[0]['imm'] == IMM and got[0]['byte_len'] == last_msg_len(n), got
    assert f.ask('recv', timeout=1, first=False)['wcs'] == []
    assert f.ask('sha', off=8, len=n)['sha'] == sha(src.addr, n)


@pytest.mark.two_hosts
def test_wire_read(far):
    """A bulk READ of the peer's MR into two local SGEs (an MR and the MR
    cache) is intact."""
    c, chan, f, _ = far
    n = WIRE_BYTES
    f.ask('fill', seed=23, off=0, len=n)
    dst = c.buf(n)
    mr = c.mr(dst.addr, n // 2)
    wc = timed(chan, {'op': dv.BULK_READ,
                      'sges': [(dst.addr, n // 2, mr.lkey),
                               (dst.addr + n // 2, n - n // 2, 0)],
                      'raddr': f.info['addr'], 'rkey': f.info['rkey']}, n)
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    assert f.ask('sha', off=0, len=n)['sha'] == sha(dst.addr, n)


@pytest.mark.two_hosts
def test_wire_bad_rkey(far):
    """A wrong rkey: REM_ACCESS_ERR for the bulk WQE, the peer's MR
    untouched, our QP in ERR."""
    c, chan, f, qp = far
    n = MIB
    f.ask('fill', seed=24, off=0, len=n)
    before = f.ask('sha', off=0, len=n)['sha']
    src = c.buf(n)
    dv.fill(src.addr, n, dv.pattern(25))
    wc = one(chan, {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                    'raddr': f.info['addr'],
                    'rkey': f.info['rkey'] ^ 0x1000}, timeout=120)
    assert wc.status == WC_REM_ACCESS_ERR, dv.wc_str(wc)
    assert f.ask('sha', off=0, len=n)['sha'] == before
    assert qp.state() == dv.QPS_ERR


@pytest.mark.two_hosts
def test_wire_write_fails_mid_request(far):
    """A bulk WRITE of 8 messages whose range runs past the end of the
    peer's MR from the 3rd message on: the messages go without waiting
    for each other's answers, yet the WQE completes once, with the
    failure's REM_ACCESS_ERR (not a flush of the messages behind it),
    the first two messages' bytes are on the peer, the third (refused
    at its first packet) placed nothing, and our QP is in ERR."""
    c, chan, f, qp = far
    msg = msg_bytes()
    n = 8 * msg
    assert WIRE_BYTES >= 2 * msg + msg // 2
    off = WIRE_BYTES - 2 * msg - msg // 2
    f.ask('fill', seed=28, off=0, len=WIRE_BYTES)
    tail = f.ask('sha', off=off + 2 * msg, len=msg // 2)['sha']
    src = c.buf(n)
    dv.fill(src.addr, n, dv.pattern(29))
    wc = one(chan, {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                    'raddr': f.info['addr'] + off,
                    'rkey': f.info['rkey']}, timeout=300)
    assert wc.status == WC_REM_ACCESS_ERR, dv.wc_str(wc)
    assert f.ask('sha', off=off, len=2 * msg)['sha'] == \
        sha(src.addr, 2 * msg)
    assert f.ask('sha', off=off + 2 * msg, len=msg // 2)['sha'] == tail
    chan.cq.assert_empty()
    assert qp.state() == dv.QPS_ERR


@pytest.mark.two_hosts
def test_wire_write_under_netem(far, peer):
    """A bulk WRITE of 16 messages on the faulty link (netem on both ends
    of the bzc link: 1 % loss, 1 % reordering, 0.5 % duplication): the
    messages share the send window, so losses land among several of
    them, and go-back-N from the first PSN not acknowledged brings the
    request through: one successful completion, the bytes intact on the
    peer, bzc0 retransmitted."""
    c, chan, f, _ = far
    n = 16 * msg_bytes()
    assert n <= WIRE_BYTES
    src = c.buf(n)
    dv.fill(src.addr, n, dv.pattern(30))
    before = h.hw_counters()
    with th.netem_both_ends(peer, th.NETEM):
        wc = timed(chan, {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, 0)],
                          'raddr': f.info['addr'],
                          'rkey': f.info['rkey']}, n)
    resent = h.hw_counters()['retransmits'] - before['retransmits']
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    assert f.ask('sha', off=0, len=n)['sha'] == sha(src.addr, n)
    chan.cq.assert_empty()
    assert resent > 0
    print(f'{n // MIB} MiB under netem: {resent} retransmissions')


# An ODP MR as the sink of a bulk READ from the peer, and the process
# changing its mapping while the READ responses come in: the requester
# takes the fault (the receive worker cannot), then asks again for the rest.
# 16 MiB: two seconds of responses between two TCG guests.

ODP_BYTES = min(WIRE_BYTES, 16 * MIB)

@pytest.fixture
def one_message():
    """The bulk request goes as one READ message, so its SGEs are resolved
    (and an ODP MR's pages faulted in) once, before the first response."""
    path = '/sys/module/bzc/parameters/bulk_qp_msg_kb'
    with open(path) as fh:
        old = fh.read().strip()
    with open(path, 'w') as fh:
        fh.write(str(ODP_BYTES >> 10))
    yield
    with open(path, 'w') as fh:
        fh.write(old)


def read_while(chan, f, dst, mr, change):
    """A bulk READ of the peer's first ODP_BYTES into dst (ODP MR mr);
    change() runs in a thread once the first bytes have landed."""
    n = ODP_BYTES
    first = ctypes.c_ubyte.from_address(dst.addr)
    errors = []

    def watch():
        deadline = time.monotonic() + 120
        while not first.value and time.monotonic() < deadline:
            time.sleep(0.001)
        try:
            assert first.value, 'the READ never started'
            change()
        except Exception as ex:          # reported by the test below
            errors.append(ex)
    t = threading.Thread(target=watch)
    t.start()
    try:
        wc = one(chan, {'op': dv.BULK_READ,
                        'sges': [(dst.addr, n, mr.lkey)],
                        'raddr': f.info['addr'], 'rkey': f.info['rkey']},
                 timeout=900)
    finally:
        t.join()
    assert not errors, errors
    return wc


@pytest.mark.two_hosts
def test_wire_read_odp_sink_discarded(far, one_message):
    """The process discards (MADV_DONTNEED) the half of the ODP sink the
    responses have not reached yet: the pages come back and the data
    arrives intact (before, the responses for them were skipped and the
    READ succeeded with zeros there)."""
    c, chan, f, _ = far
    n = ODP_BYTES
    f.ask('fill', seed=27, off=0, len=n)
    dst = c.buf(n)
    mr = c.mr(dst.addr, n, dv.ACCESS_ALL | ACCESS_ON_DEMAND)
    wc = read_while(chan, f, dst, mr, lambda: dv.madvise(
        dst.addr + n // 2, n // 2, dv.MADV_DONTNEED))
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    assert f.ask('sha', off=0, len=n)['sha'] == sha(dst.addr, n)


@pytest.mark.two_hosts
def test_wire_read_odp_sink_unmapped(far, one_message):
    """The process unmaps the last page of the ODP sink while the READ
    responses come in: a local protection error, the QP in ERR."""
    c, chan, f, qp = far
    n = ODP_BYTES
    f.ask('fill', seed=28, off=0, len=n)
    dst = c.buf(n)
    mr = c.mr(dst.addr, n, dv.ACCESS_ALL | ACCESS_ON_DEMAND)
    wc = read_while(chan, f, dst, mr,
                    lambda: dv.munmap(dst.addr + n - PAGE, PAGE))
    assert wc.status == dv.WC_LOC_PROT_ERR, dv.wc_str(wc)
    assert qp.state() == dv.QPS_ERR
