# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Data path errors on bzc0 (loopback RC/UD QPs): each error becomes the
completion status the IB spec gives it, on the side(s) it names; an RC
requester that sees an error goes to ERR, and everything outstanding or
posted later is flushed; nothing is written where it must not be; keys
and AHs of another PD or another process are refused."""

import errno
import hashlib
import os
import select
import time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
import pytest

import bzc_helpers as h
from bzc_helpers import expect_wcs, rdma_wr, recv_wr, send_wr, sge

pytestmark = pytest.mark.keeps_netdev

SZ = 64 * 1024
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
RA = e.IBV_ACCESS_REMOTE_ATOMIC


@pytest.fixture(scope='module')
def env():
    with h.VerbsEnv() as en:                # en.pd2: "another PD"
        acc = h.access_all()
        en.mr_a = en.reg(SZ, acc)
        en.mr_b = en.reg(SZ, acc)
        en.mr_b_no_rw = en.reg(SZ, LW | RR | RA)
        en.mr_b_no_rr = en.reg(SZ, LW | RW | RA)
        en.mr_b_no_ra = en.reg(SZ, LW | RW | RR)
        en.mr_a_no_lw = en.reg(SZ, 0)
        en.mr_pd2 = en.reg(SZ, acc, pd=en.pd2)
        yield en


@pytest.fixture
def pairs(env):
    """Makes pairs (closed after the test): pairs(qp_type=..., ...)."""
    with h.ClosingFactory(h.QPPair, env) as make:
        yield make


def atomic_wr(wr_id, opcode, sges, rkey, addr):
    w = send_wr(wr_id, opcode, sges)
    w.set_wr_atomic(rkey, addr, 1, 2)
    return w


def assert_state(end, state, what):
    got = end.state()
    assert got == state, f'{what}: QP state {got}, want {state}'


def pattern(n, seed):
    return hashlib.shake_128(seed.encode()).digest(n)


# --------------------------------------------------------------------------
# Remote access: IBV_WC_REM_ACCESS_ERR, the target memory unchanged, both
# QPs in ERR (an RC responder's R_Key and access violations are IBA class
# C errors: it NAKs and goes to ERR, flushing its receives)
# --------------------------------------------------------------------------

def _bad_rkey(env):
    return env.mr_b.rkey ^ 0x5a5a00, env.mr_b, 0


REMOTE_CASES = {
    # name: (opcode, responder QP access or None, (rkey, mr, offset), len)
    'write-bad-rkey': (e.IBV_WR_RDMA_WRITE, None, _bad_rkey, 64),
    'write-mr-without-remote-write': (
        e.IBV_WR_RDMA_WRITE, None,
        lambda v: (v.mr_b_no_rw.rkey, v.mr_b_no_rw, 0), 64),
    'write-qp-without-remote-write': (
        e.IBV_WR_RDMA_WRITE, LW | RR | RA,
        lambda v: (v.mr_b.rkey, v.mr_b, 0), 64),
    'write-past-mr-end': (e.IBV_WR_RDMA_WRITE, None,
                          lambda v: (v.mr_b.rkey, v.mr_b, SZ - 10), 20),
    'write-before-mr-start': (e.IBV_WR_RDMA_WRITE, None,
                              lambda v: (v.mr_b.rkey, v.mr_b, -8), 16),
    'write-mr-of-other-pd': (e.IBV_WR_RDMA_WRITE, None,
                             lambda v: (v.mr_pd2.rkey, v.mr_pd2, 0), 64),
    'write-with-imm-bad-rkey': (e.IBV_WR_RDMA_WRITE_WITH_IMM, None,
                                _bad_rkey, 64),
    'read-bad-rkey': (e.IBV_WR_RDMA_READ, None, _bad_rkey, 64),
    'read-mr-without-remote-read': (
        e.IBV_WR_RDMA_READ, None,
        lambda v: (v.mr_b_no_rr.rkey, v.mr_b_no_rr, 0), 64),
    'read-qp-without-remote-read': (
        e.IBV_WR_RDMA_READ, LW | RW | RA,
        lambda v: (v.mr_b.rkey, v.mr_b, 0), 64),
    'read-past-mr-end': (e.IBV_WR_RDMA_READ, None,
                         lambda v: (v.mr_b.rkey, v.mr_b, SZ - 63), 64),
    'read-mr-of-other-pd': (e.IBV_WR_RDMA_READ, None,
                            lambda v: (v.mr_pd2.rkey, v.mr_pd2, 0), 64),
    'atomic-bad-rkey': (e.IBV_WR_ATOMIC_FETCH_AND_ADD, None, _bad_rkey, 8),
    'atomic-mr-without-remote-atomic': (
        e.IBV_WR_ATOMIC_CMP_AND_SWP, None,
        lambda v: (v.mr_b_no_ra.rkey, v.mr_b_no_ra, 0), 8),
    'atomic-qp-without-remote-atomic': (
        e.IBV_WR_ATOMIC_FETCH_AND_ADD, LW | RW | RR,
        lambda v: (v.mr_b.rkey, v.mr_b, 0), 8),
    'atomic-past-mr-end': (e.IBV_WR_ATOMIC_FETCH_AND_ADD, None,
                           lambda v: (v.mr_b.rkey, v.mr_b, SZ), 8),
}


@pytest.mark.parametrize('case', REMOTE_CASES)
def test_remote_access_error(env, pairs, case):
    opcode, access_b, target, length = REMOTE_CASES[case]
    p = pairs(access_b=access_b)
    rkey, tmr, toff = target(env)
    # what the target and the local buffer hold before
    tmr.write(pattern(SZ, case), SZ, 0)
    before = tmr.read(SZ, 0)
    env.mr_a.write(pattern(SZ, case + 'local'), SZ, 0)
    local_before = env.mr_a.read(length, 128)
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 1024, 64)]))
    if opcode in (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_ATOMIC_CMP_AND_SWP):
        w = atomic_wr(1, opcode, [sge(env.mr_a, 128, 8)], rkey,
                      tmr.buf + toff)
    else:
        w = rdma_wr(1, opcode, [sge(env.mr_a, 128, length)], rkey,
                    tmr.buf + toff)
    p.a.qp.post_send(w)
    expect_wcs(p.a.scq, [(1, e.IBV_WC_REM_ACCESS_ERR)], case)
    assert_state(p.a, e.IBV_QPS_ERR, f'{case}: requester')
    assert tmr.read(SZ, 0) == before, f'{case}: target memory changed'
    assert env.mr_a.read(length, 128) == local_before, \
        f'{case}: local buffer changed'
    # the receive was not consumed (not even by WRITE_WITH_IMM): flushed
    expect_wcs(p.b.rcq, [(9, e.IBV_WC_WR_FLUSH_ERR)], f'{case}: responder')
    assert_state(p.b, e.IBV_QPS_ERR, f'{case}: responder')


def test_responder_access_error_event(env):
    """The responder of a refused RDMA WRITE learns of it through the
    affiliated event IBV_EVENT_QP_ACCESS_ERR (IBA's local access
    violation work queue error), since no completion of its own says
    so; the requester gets no event."""
    ctx, async_fd = h.open_pyverbs_context()
    try:
        pd = PD(ctx)
        mr = MR(pd, SZ, h.access_all())
        a, b = (h.QPEnd(ctx, pd, e.IBV_QPT_RC, cq_depth=16) for _ in '12')
        h.connect_qps(a, b, env.gid_index)
        a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE, [sge(mr, 0, 64)],
                               mr.rkey ^ 0x5a5a00, mr.buf))
        expect_wcs(a.scq, [(1, e.IBV_WC_REM_ACCESS_ERR)], 'requester')
        ev = h.pyverbs_async_event(ctx, async_fd, 10)
        assert ev == e.IBV_EVENT_QP_ACCESS_ERR, f'event {ev}'
        assert h.pyverbs_async_event(ctx, async_fd, 0.2) is None
        assert_state(b, e.IBV_QPS_ERR, 'responder')
        for end in (a, b):
            end.close()
        mr.close()
        pd.close()
    finally:
        ctx.close()


def test_remote_access_deregistered_mr(env, pairs):
    """The rkey of an MR that was deregistered: REM_ACCESS_ERR."""
    p = pairs()
    mr = MR(env.pd, 4096, h.access_all())
    rkey, addr = mr.rkey, mr.buf
    mr.close()
    p.a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE, [sge(env.mr_a, 0, 64)],
                             rkey, addr))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_REM_ACCESS_ERR)], 'deregistered rkey')
    assert_state(p.a, e.IBV_QPS_ERR, 'requester')


def test_atomic_misaligned(env, pairs):
    """An atomic on a remote address that is not 8-byte aligned is an
    invalid request: IBV_WC_REM_INV_REQ_ERR, memory unchanged, and the
    responder in ERR (IBA class C), its receives flushed."""
    p = pairs()
    env.mr_b.write(b'\x11' * 16, 16, 0)
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 1024, 64)]))
    p.a.qp.post_send(atomic_wr(1, e.IBV_WR_ATOMIC_FETCH_AND_ADD,
                               [sge(env.mr_a, 0, 8)], env.mr_b.rkey,
                               env.mr_b.buf + 4))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_REM_INV_REQ_ERR)], 'misaligned atomic')
    assert env.mr_b.read(16, 0) == b'\x11' * 16
    assert_state(p.a, e.IBV_QPS_ERR, 'requester')
    expect_wcs(p.b.rcq, [(9, e.IBV_WC_WR_FLUSH_ERR)], 'responder')
    assert_state(p.b, e.IBV_QPS_ERR, 'responder')


@pytest.mark.parametrize('length', [4, 7])
def test_atomic_local_sge_too_short(env, pairs, length):
    """An atomic whose local SGEs hold fewer than the 8 bytes of the
    result is the requester's own length error (IBV_WC_LOC_LEN_ERR); the
    target memory is unchanged and the responder is not at fault."""
    p = pairs()
    env.mr_b.write(b'\x22' * 16, 16, 0)
    env.mr_a.write(b'\x33' * 16, 16, 0)
    p.a.qp.post_send(atomic_wr(1, e.IBV_WR_ATOMIC_FETCH_AND_ADD,
                               [sge(env.mr_a, 0, length)], env.mr_b.rkey,
                               env.mr_b.buf))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_LOC_LEN_ERR)], f'{length}-byte SGE')
    assert env.mr_b.read(16, 0) == b'\x22' * 16, 'the atomic ran'
    assert env.mr_a.read(16, 0) == b'\x33' * 16, 'the local buffer changed'
    assert_state(p.a, e.IBV_QPS_ERR, 'requester')
    assert_state(p.b, e.IBV_QPS_RTS, 'responder')


# --------------------------------------------------------------------------
# Local protection
# --------------------------------------------------------------------------

LOCAL_CASES = {
    'send-bogus-lkey': (e.IBV_WR_SEND, lambda v: sge(v.mr_a, 0, 64,
                                                     v.mr_a.lkey ^ 0x5a5a00)),
    'send-lkey-of-other-pd': (e.IBV_WR_SEND, lambda v: sge(v.mr_pd2, 0, 64)),
    'send-sge-past-mr-end': (e.IBV_WR_SEND, lambda v: sge(v.mr_a, SZ - 8, 64)),
    'write-bogus-lkey': (e.IBV_WR_RDMA_WRITE, lambda v: sge(
        v.mr_a, 0, 64, v.mr_a.lkey ^ 0x5a5a00)),
    'write-lkey-of-other-pd': (e.IBV_WR_RDMA_WRITE,
                               lambda v: sge(v.mr_pd2, 0, 64)),
    'read-into-mr-without-local-write': (e.IBV_WR_RDMA_READ,
                                         lambda v: sge(v.mr_a_no_lw, 0, 64)),
    'read-lkey-of-other-pd': (e.IBV_WR_RDMA_READ,
                              lambda v: sge(v.mr_pd2, 0, 64)),
}


@pytest.mark.parametrize('case', LOCAL_CASES)
@pytest.mark.parametrize('signaled', [True, False], ids=['signaled',
                                                          'unsignaled'])
def test_local_protection_error(env, pairs, case, signaled):
    """A bad local key or range: IBV_WC_LOC_PROT_ERR, also for a WR that
    was not signaled; nothing reaches the responder."""
    opcode, mk = LOCAL_CASES[case]
    p = pairs()
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 0, SZ)]))
    env.mr_b.write(b'\x33' * 128, 128, 0)
    flags = e.IBV_SEND_SIGNALED if signaled else 0
    if opcode == e.IBV_WR_SEND:
        w = send_wr(1, opcode, [mk(env)], flags)
    else:
        w = rdma_wr(1, opcode, [mk(env)], env.mr_b.rkey, env.mr_b.buf, flags)
    p.a.qp.post_send(w)
    expect_wcs(p.a.scq, [(1, e.IBV_WC_LOC_PROT_ERR)], case)
    assert_state(p.a, e.IBV_QPS_ERR, f'{case}: requester')
    assert not h.drain_cq(p.b.rcq), f'{case}: the responder got a completion'
    assert env.mr_b.read(128, 0) == b'\x33' * 128, f'{case}: target changed'
    assert_state(p.b, e.IBV_QPS_RTS, f'{case}: responder')


def test_receive_with_lkey_of_other_pd(env, pairs):
    """The responder's receive names an MR of another PD: the receive
    completes with IBV_WC_LOC_PROT_ERR, the requester gets
    IBV_WC_REM_OP_ERR, and nothing is written into that MR."""
    p = pairs()
    env.mr_pd2.write(b'\x44' * 256, 256, 0)
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_pd2, 0, 256)]))
    env.mr_a.write(b'\x55' * 64, 64, 0)
    p.a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 64)]))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_REM_OP_ERR)], 'requester')
    expect_wcs(p.b.rcq, [(9, e.IBV_WC_LOC_PROT_ERR)], 'responder')
    assert env.mr_pd2.read(256, 0) == b'\x44' * 256
    assert_state(p.a, e.IBV_QPS_ERR, 'requester')
    assert_state(p.b, e.IBV_QPS_ERR, 'responder')


def test_send_larger_than_receive(env, pairs):
    """RC SEND of 100 bytes into a 64-byte receive: the sender gets
    IBV_WC_REM_INV_REQ_ERR, the receiver IBV_WC_LOC_LEN_ERR; both QPs go
    to ERR; the receive buffer's neighbour is not written."""
    p = pairs()
    env.mr_b.write(b'\x66' * 256, 256, 0)
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 0, 40),
                                 sge(env.mr_b, 128, 24)]))
    p.a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 100)]))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_REM_INV_REQ_ERR)], 'sender')
    expect_wcs(p.b.rcq, [(9, e.IBV_WC_LOC_LEN_ERR)], 'receiver')
    assert env.mr_b.read(88, 40) == b'\x66' * 88, 'written between SGEs'
    assert env.mr_b.read(104, 152) == b'\x66' * 104, 'written past the end'
    assert_state(p.a, e.IBV_QPS_ERR, 'sender')
    assert_state(p.b, e.IBV_QPS_ERR, 'receiver')


@pytest.mark.parametrize('fault', ['length', 'lkey'])
def test_uc_receive_error_is_the_receivers_own(env, pairs, fault):
    """UC has no acknowledgements: a SEND whose receive cannot take it (too
    short, or an SGE of another PD) completes successfully at the sender,
    which stays in RTS; only the receive fails (IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_PROT_ERR), and nothing is written into the receive's
    memory."""
    p = pairs(qp_type=e.IBV_QPT_UC)
    env.mr_b.write(b'\x66' * 256, 256, 0)
    env.mr_pd2.write(b'\x44' * 256, 256, 0)
    if fault == 'length':
        p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 0, 64)]))
        status = e.IBV_WC_LOC_LEN_ERR
    else:
        p.b.qp.post_recv(recv_wr(9, [sge(env.mr_pd2, 0, 256)]))
        status = e.IBV_WC_LOC_PROT_ERR
    p.a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 100)]))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_SUCCESS)], 'UC sender')
    expect_wcs(p.b.rcq, [(9, status)], 'UC receiver')
    assert env.mr_b.read(256, 0) == b'\x66' * 256
    assert env.mr_pd2.read(256, 0) == b'\x44' * 256
    assert_state(p.a, e.IBV_QPS_RTS, 'UC sender')


# --------------------------------------------------------------------------
# RNR
# --------------------------------------------------------------------------

@pytest.mark.parametrize('rnr_retry', [0, 3])
def test_rnr_retry_exceeded(env, pairs, rnr_retry):
    """No receive posted and a finite rnr_retry: the SEND completes with
    IBV_WC_RNR_RETRY_EXC_ERR and the requester goes to ERR."""
    p = pairs(rnr_retry=rnr_retry, min_rnr_timer=1)
    p.a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 64)]))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_RNR_RETRY_EXC_ERR)], 'sender')
    assert_state(p.a, e.IBV_QPS_ERR, 'sender')
    assert not h.drain_cq(p.b.rcq)


def test_rnr_retry_infinite(env, pairs):
    """rnr_retry=7 retries for ever: a receive posted 50 ms after the SEND
    gets the message, and the SEND completes successfully."""
    p = pairs(rnr_retry=7, min_rnr_timer=1)
    data = pattern(3000, 'rnr')
    env.mr_a.write(data, len(data), 0)
    env.mr_b.write(b'\0' * 4096, 4096, 0)
    p.a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, len(data))]))
    time.sleep(0.05)
    early = h.drain_cq(p.a.scq)
    assert not early, 'completed before a receive was posted: ' + \
        '; '.join(h.wc_str(w) for w in early)
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 0, 4096)]))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_SUCCESS)], 'sender')
    wc = expect_wcs(p.b.rcq, [(9, e.IBV_WC_SUCCESS)], 'receiver')[0]
    assert wc.byte_len == len(data)
    assert env.mr_b.read(len(data), 0) == data
    assert_state(p.a, e.IBV_QPS_RTS, 'sender')


# --------------------------------------------------------------------------
# Flushing
# --------------------------------------------------------------------------

def test_flush_after_error(env, pairs):
    """After an error every outstanding WR - signaled or not - completes
    with IBV_WC_WR_FLUSH_ERR in order, on the send and the receive queue,
    and so do WRs posted later (receives too).  The responder refused
    the first WRITE (IBA class C): it is in ERR too, its receive
    flushed, nothing else.  RESET brings both back into service."""
    p = pairs()
    a, b = p.a, p.b
    for i in range(3):
        a.qp.post_recv(recv_wr(100 + i, [sge(env.mr_a, 4096, 64)]))
    b.qp.post_recv(recv_wr(200, [sge(env.mr_b, 0, 64)]))
    bad = env.mr_b.rkey ^ 0x5a5a00
    chain = [rdma_wr(1, e.IBV_WR_RDMA_WRITE, [sge(env.mr_a, 0, 64)], bad,
                     env.mr_b.buf),
             send_wr(2, e.IBV_WR_SEND, [sge(env.mr_a, 0, 64)]),
             rdma_wr(3, e.IBV_WR_RDMA_WRITE, [sge(env.mr_a, 0, 64)],
                     env.mr_b.rkey, env.mr_b.buf, flags=0),
             rdma_wr(4, e.IBV_WR_RDMA_READ, [sge(env.mr_a, 0, 64)],
                     env.mr_b.rkey, env.mr_b.buf)]
    for x, y in zip(chain, chain[1:]):
        x.next_wr = y
    a.qp.post_send(chain[0])
    expect_wcs(a.scq, [(1, e.IBV_WC_REM_ACCESS_ERR),
                       (2, e.IBV_WC_WR_FLUSH_ERR),
                       (3, e.IBV_WC_WR_FLUSH_ERR),
                       (4, e.IBV_WC_WR_FLUSH_ERR)], 'send queue')
    expect_wcs(a.rcq, [(100 + i, e.IBV_WC_WR_FLUSH_ERR) for i in range(3)],
               'receives posted before the error')
    assert_state(a, e.IBV_QPS_ERR, 'requester')
    # posted in the error state: flushed too
    a.qp.post_send(send_wr(5, e.IBV_WR_SEND, [sge(env.mr_a, 0, 8)], flags=0))
    expect_wcs(a.scq, [(5, e.IBV_WC_WR_FLUSH_ERR)], 'send posted in ERR')
    a.qp.post_recv(recv_wr(103, [sge(env.mr_a, 4096, 64)]))
    a.qp.post_recv(recv_wr(104, [sge(env.mr_a, 4096, 64)]))
    expect_wcs(a.rcq, [(103, e.IBV_WC_WR_FLUSH_ERR),
                       (104, e.IBV_WC_WR_FLUSH_ERR)], 'receives posted in ERR')
    # the responder refused the first WRITE (class C): ERR, receive flushed
    assert_state(b, e.IBV_QPS_ERR, 'responder')
    expect_wcs(b.rcq, [(200, e.IBV_WC_WR_FLUSH_ERR)], 'responder')
    # RESET -> RTS again: both work, the old WQEs are gone
    from pyverbs.qp import QPAttr
    attr = QPAttr()
    attr.qp_state = e.IBV_QPS_RESET
    for end, peer in ((a, b), (b, a)):
        end.qp.modify(attr, e.IBV_QP_STATE)
        h.bring_up_qp(end.qp, end.qp_type, env.gid, env.gid_index, peer.qpn)
    b.qp.post_recv(recv_wr(201, [sge(env.mr_b, 0, 64)]))
    env.mr_a.write(b'back', 4, 0)
    a.qp.post_send(send_wr(6, e.IBV_WR_SEND, [sge(env.mr_a, 0, 4)]))
    expect_wcs(a.scq, [(6, e.IBV_WC_SUCCESS)], 'after RESET')
    expect_wcs(b.rcq, [(201, e.IBV_WC_SUCCESS)], 'responder after RESET')
    assert env.mr_b.read(4, 0) == b'back'


def test_modify_to_err_flushes(env, pairs):
    """Moving a QP to ERR flushes its posted receives in order; later
    sends and receives are flushed; a requester sending to it gets
    IBV_WC_RETRY_EXC_ERR (nobody answers)."""
    p = pairs()
    a, b = p.a, p.b
    for i in range(5):
        b.qp.post_recv(recv_wr(300 + i, [sge(env.mr_b, 64 * i, 64)]))
    h.qp_to_err(b.qp)
    expect_wcs(b.rcq, [(300 + i, e.IBV_WC_WR_FLUSH_ERR) for i in range(5)],
               'receives of the QP moved to ERR')
    assert_state(b, e.IBV_QPS_ERR, 'after modify')
    b.qp.post_recv(recv_wr(305, [sge(env.mr_b, 0, 64)]))
    expect_wcs(b.rcq, [(305, e.IBV_WC_WR_FLUSH_ERR)], 'receive in ERR')
    b.qp.post_send(send_wr(7, e.IBV_WR_SEND, [sge(env.mr_b, 0, 8)]))
    expect_wcs(b.scq, [(7, e.IBV_WC_WR_FLUSH_ERR)], 'send in ERR')
    a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 8)]))
    expect_wcs(a.scq, [(1, e.IBV_WC_RETRY_EXC_ERR)], 'send to a QP in ERR')


def test_send_to_destroyed_qp(env, pairs):
    """The responder QP is gone: IBV_WC_RETRY_EXC_ERR."""
    p = pairs()
    p.b.close()
    p.ends.remove(p.b)
    p.a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 8)]))
    expect_wcs(p.a.scq, [(1, e.IBV_WC_RETRY_EXC_ERR)], 'send to nobody')


# --------------------------------------------------------------------------
# UD address handles of another PD
# --------------------------------------------------------------------------

def _ud_other_pd_ah(env, pairs):
    p = pairs(qp_type=e.IBV_QPT_UD)
    ah = AH(env.pd2, attr=h.ah_attr_for(env.gid, env.gid_index))
    p.b.qp.post_recv(recv_wr(9, [sge(env.mr_b, 0, 256)]))
    w = send_wr(1, e.IBV_WR_SEND, [sge(env.mr_a, 0, 64)])
    w.set_wr_ud(ah, p.b.qpn, h.UD_QKEY)
    try:
        p.a.qp.post_send(w)
        posted = True
    except PyverbsRDMAError as ex:
        assert ex.error_code == errno.EINVAL, str(ex)
        posted = False
    wcs = h.poll_cq(p.a.scq, 1) if posted else []
    delivered = h.drain_cq(p.b.rcq, 0.2)
    ah.close()
    return posted, wcs, delivered


def test_ud_ah_of_other_pd_not_delivered(env, pairs):
    """A UD SEND through an AH of another PD never reaches the target."""
    _, _, delivered = _ud_other_pd_ah(env, pairs)
    assert not delivered, 'delivered through an AH of another PD: ' + \
        '; '.join(h.wc_str(w) for w in delivered)


def test_ud_ah_of_other_pd_is_an_error(env, pairs):
    """... and the sender is told: post_send fails with EINVAL or the WR
    completes in error (rxe: IBV_WC_LOC_QP_OP_ERR), not successfully."""
    posted, wcs, _ = _ud_other_pd_ah(env, pairs)
    if posted:
        assert wcs[0].status in (e.IBV_WC_LOC_QP_OP_ERR,
                                 e.IBV_WC_LOC_PROT_ERR), \
            f'UD send with an AH of another PD: {h.wc_str(wcs[0])}'


# --------------------------------------------------------------------------
# A key from another process
# --------------------------------------------------------------------------

def test_rkey_of_another_process(env, pairs):
    """A child process registers memory and hands us its address and
    rkey: our RDMA WRITE and READ with them fail with
    IBV_WC_REM_ACCESS_ERR, the child's memory is unchanged and nothing of
    it reaches our buffer."""
    to_parent, from_child = os.pipe()
    to_child, from_parent = os.pipe()
    secret = pattern(4096, 'child secret')
    pid = os.fork()
    if pid == 0:                                        # the child
        code = 1
        try:
            os.close(to_parent)
            os.close(from_parent)
            cctx = d.Context(name=h.DEV)
            cpd = PD(cctx)
            cmr = MR(cpd, 4096, h.access_all())
            cmr.write(secret, 4096, 0)
            os.write(from_child, f'{cmr.buf} {cmr.rkey}\n'.encode())
            os.read(to_child, 1)
            digest = hashlib.sha256(cmr.read(4096, 0)).hexdigest()
            os.write(from_child, digest.encode() + b'\n')
            code = 0
        finally:
            os._exit(code)
    os.close(from_child)
    os.close(to_child)
    try:
        if not select.select([to_parent], [], [], 60)[0]:
            raise AssertionError('child did not register its MR in 60 s')
        line = os.read(to_parent, 100).decode().split()
        assert len(line) == 2, f'child said {line!r}'
        addr, rkey = int(line[0]), int(line[1])
        env.mr_a.write(pattern(4096, 'mine'), 4096, 0)
        mine = env.mr_a.read(4096, 0)
        p = pairs()
        p.a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE,
                                 [sge(env.mr_a, 0, 4096)], rkey, addr))
        expect_wcs(p.a.scq, [(1, e.IBV_WC_REM_ACCESS_ERR)],
                   "write to another process's MR")
        q = pairs()
        q.a.qp.post_send(rdma_wr(2, e.IBV_WR_RDMA_READ,
                                 [sge(env.mr_a, 0, 4096)], rkey, addr))
        expect_wcs(q.a.scq, [(2, e.IBV_WC_REM_ACCESS_ERR)],
                   "read of another process's MR")
        assert env.mr_a.read(4096, 0) == mine, 'our buffer changed'
        os.write(from_parent, b'x')
        if not select.select([to_parent], [], [], 60)[0]:
            raise AssertionError('child did not answer in 60 s')
        digest = os.read(to_parent, 100).decode().strip()
        assert digest == hashlib.sha256(secret).hexdigest(), \
            "the child's memory changed"
    finally:
        os.close(from_parent)
        os.close(to_parent)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f'child failed: status {status:#x}'
