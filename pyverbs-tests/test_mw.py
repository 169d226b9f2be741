# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Memory windows on bzc0 (loopback RC QPs a -> b, b owns the windows):
type 1 (ibv_bind_mw) and type 2B (IBV_WR_BIND_MW, ibv_wr_bind_mw) binds,
remote access through a window checked for key, PD, QP, bounds and rights,
LOCAL_INV and SEND_WITH_INV (the receiver's completion carries
IBV_WC_WITH_INV and the rkey), dealloc, and the bind errors of the IB
spec.  Registered MRs cannot be invalidated (IBA allows it for
fast-register MRs only, which user space cannot create)."""

import errno
import os
import subprocess
import sys
import textwrap

import pyverbs.enums as e
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap
from pyverbs.wr import SendWR
import pytest

import bzc_helpers as h
from bzc_helpers import expect_wcs, rdma_wr, recv_wr, send_wr, sge

pytestmark = pytest.mark.keeps_netdev

SZ = 64 * 1024
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
RA = e.IBV_ACCESS_REMOTE_ATOMIC
BIND = e.IBV_ACCESS_MW_BIND
SIG = e.IBV_SEND_SIGNALED
WIN_OFF, WIN_LEN = 4096, 8192     # the window: b's MR bytes [4096, 12288)


@pytest.fixture(scope='module')
def env():
    with h.VerbsEnv() as en:
        en.mr_a = en.reg(SZ, h.access_all())
        # b's memory is reachable only through windows: no remote rights
        en.mr_b = en.reg(SZ, LW | BIND)
        en.mr_b_nobind = en.reg(SZ, LW | RW | RR)
        en.mr_b_ro = en.reg(SZ, BIND)                 # no local write
        en.mr_pd2 = en.reg(SZ, LW | BIND, pd=en.pd2)
        yield en


@pytest.fixture
def pair(env):
    """make(send_ops=None) -> (a, b), connected RC QPs; with send_ops
    both are extended QPs (ibv_wr_*)."""
    with h.ClosingFactory(h.QPPair, env) as make:
        yield make


@pytest.fixture
def mws(env):
    """alloc(type, pd=None) -> MW, deallocated after the test."""
    with h.ClosingFactory(lambda t, pd=None: MW(pd or env.pd, t)) as alloc:
        yield alloc


def rdma(end, wr_id, opcode, local, rkey, addr):
    end.qp.post_send(rdma_wr(wr_id, opcode, [local], rkey, addr))


def bind1(b, mw, mr, off, length, access, wr_id=0x10):
    """ibv_bind_mw() on b's QP; returns the bind completion."""
    old = mw.rkey
    b.qp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf + off, length, access),
                            SIG, wr_id))
    assert mw.rkey != old and mw.rkey >> 8 == old >> 8, \
        f'ibv_bind_mw: rkey {old:#x} -> {mw.rkey:#x}'
    return expect_wcs(b.scq, [(wr_id, e.IBV_WC_SUCCESS)], 'type 1 bind')[0]


def bind2_wr(mw, mr, off, length, access, wr_id=0x20):
    w = send_wr(wr_id, e.IBV_WR_BIND_MW)
    w.set_bind_wr(mw, MWBindInfo(mr, mr.buf + off, length, access))
    return w


def bind2(b, mw, mr, off, length, access, wr_id=0x20):
    """IBV_WR_BIND_MW on b's QP; returns the window's new rkey."""
    w = bind2_wr(mw, mr, off, length, access, wr_id)
    b.qp.post_send(w)
    wc = expect_wcs(b.scq, [(wr_id, e.IBV_WC_SUCCESS)], 'type 2 bind')[0]
    assert wc.opcode == e.IBV_WC_BIND_MW
    return w.rkey


def write_ok(env, a, b, rkey, off, data, wr_id=1):
    env.mr_a.write(data, len(data), 0)
    rdma(a, wr_id, e.IBV_WR_RDMA_WRITE, sge(env.mr_a, 0, len(data)), rkey,
         env.mr_b.buf + off)
    expect_wcs(a.scq, [(wr_id, e.IBV_WC_SUCCESS)], 'write through the window')
    assert env.mr_b.read(len(data), off) == data


def access_fails(env, a, b, rkey, off, length=64,
                 opcode=e.IBV_WR_RDMA_WRITE, what='access'):
    """An access by rkey fails with REM_ACCESS_ERR and changes nothing;
    the responder refused it (IBA class C): both QPs are in ERR."""
    before = env.mr_b.read(SZ, 0)
    env.mr_a.write(os.urandom(length), length, 0)
    rdma(a, 0xbad, opcode, sge(env.mr_a, 0, length), rkey,
         env.mr_b.buf + off)
    expect_wcs(a.scq, [(0xbad, e.IBV_WC_REM_ACCESS_ERR)], what)
    assert a.state() == e.IBV_QPS_ERR
    assert b.state() == e.IBV_QPS_ERR, f'{what}: the responder is not in ERR'
    assert env.mr_b.read(SZ, 0) == before, f'{what}: memory changed'


# ---------------------------------------------------------------------------
# Device attributes, allocation
# ---------------------------------------------------------------------------

def test_device_advertises_windows(ctx):
    a = ctx.query_device()
    assert a.max_mw > 0
    assert a.device_cap_flags & e.IBV_DEVICE_MEM_WINDOW
    assert a.device_cap_flags & e.IBV_DEVICE_MEM_WINDOW_TYPE_2B


def test_alloc_dealloc_types(env):
    keys = set()
    for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2) * 4:
        mw = MW(env.pd, t)
        assert mw.rkey not in keys, f'rkey {mw.rkey:#x} handed out twice'
        assert mw.rkey not in [m.rkey for m in env.registered]
        keys.add(mw.rkey)
        mw.close()
    for bad in (0, 3):
        with pytest.raises(PyverbsRDMAError) as ex:
            MW(env.pd, bad)
        assert ex.value.error_code == errno.EINVAL, str(ex.value)


# ---------------------------------------------------------------------------
# Type 1: ibv_bind_mw
# ---------------------------------------------------------------------------

def test_type1_write_and_read_through_window(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    wc = bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW | RR)
    assert wc.opcode == e.IBV_WC_BIND_MW
    data = os.urandom(WIN_LEN)
    write_ok(env, a, b, mw.rkey, WIN_OFF, data)
    # and read it back through the window into a
    env.mr_a.write(bytes(WIN_LEN), WIN_LEN, 0)
    rdma(a, 2, e.IBV_WR_RDMA_READ, sge(env.mr_a, 0, WIN_LEN), mw.rkey,
         env.mr_b.buf + WIN_OFF)
    expect_wcs(a.scq, [(2, e.IBV_WC_SUCCESS)], 'read through the window')
    assert env.mr_a.read(WIN_LEN, 0) == data


@pytest.mark.parametrize('where', ['before', 'past-end', 'straddling-end'])
def test_type1_out_of_window(env, pair, mws, where):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW | RR)
    off = {'before': WIN_OFF - 64, 'past-end': WIN_OFF + WIN_LEN,
           'straddling-end': WIN_OFF + WIN_LEN - 32}[where]
    access_fails(env, a, b, mw.rkey, off, what=f'write {where} the window')


def test_window_rights_are_its_own(env, pair, mws):
    """A read-only window over a locally writable MR refuses writes."""
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RR)
    rdma(a, 3, e.IBV_WR_RDMA_READ, sge(env.mr_a, 0, 64), mw.rkey,
         env.mr_b.buf + WIN_OFF)
    expect_wcs(a.scq, [(3, e.IBV_WC_SUCCESS)], 'read through a read window')
    access_fails(env, a, b, mw.rkey, WIN_OFF, what='write to a read window')


def test_type1_rebind_and_unbind(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    first = mw.rkey
    # rebinding a type 1 window needs no invalidation; the old rkey dies
    bind1(b, mw, env.mr_b, 0, 4096, RW, wr_id=0x11)
    write_ok(env, a, b, mw.rkey, 0, os.urandom(4096))
    # unbind: zero length
    bind1(b, mw, env.mr_b, 0, 0, 0, wr_id=0x12)
    access_fails(env, a, b, mw.rkey, 0, what='write through an unbound window')
    a2, b2 = pair()
    access_fails(env, a2, b2, first, WIN_OFF, what='write with the first rkey')


def test_type1_old_rkey_dies_on_rebind(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    old = mw.rkey
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW, wr_id=0x11)
    access_fails(env, a, b, old, WIN_OFF, what='write with the old rkey')


def test_type1_window_not_bound_to_a_qp(env, pair, mws):
    """A type 1 window belongs to its PD: any QP of the PD reaches it."""
    a, b = pair()
    c, d2 = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    write_ok(env, c, d2, mw.rkey, WIN_OFF, os.urandom(256))


def test_type1_invalidate_is_refused(env, pair, mws):
    """o10-37.2.26: LOCAL_INV of a type 1 window is an error."""
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    w = send_wr(5, e.IBV_WR_LOCAL_INV)
    w.imm_data = mw.rkey
    b.qp.post_send(w)
    expect_wcs(b.scq, [(5, e.IBV_WC_LOC_QP_OP_ERR)], 'LOCAL_INV of type 1')


def test_type1_bind_by_work_request_is_refused(env, pair, mws):
    """A type 1 window is bound by the verb only, not by a bind WR."""
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_1)
    b.qp.post_send(bind2_wr(mw, env.mr_b, WIN_OFF, WIN_LEN, RW))
    expect_wcs(b.scq, [(0x20, e.IBV_WC_MW_BIND_ERR)], 'BIND_MW WR of type 1')
    assert b.state() == e.IBV_QPS_ERR


# ---------------------------------------------------------------------------
# Type 2B: IBV_WR_BIND_MW
# ---------------------------------------------------------------------------

def test_type2_write_and_read_through_window(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW | RR)
    assert rkey >> 8 == mw.rkey >> 8
    data = os.urandom(WIN_LEN)
    write_ok(env, a, b, rkey, WIN_OFF, data)
    env.mr_a.write(bytes(64), 64, 0)
    rdma(a, 2, e.IBV_WR_RDMA_READ, sge(env.mr_a, 0, 64), rkey,
         env.mr_b.buf + WIN_OFF + WIN_LEN - 64)
    expect_wcs(a.scq, [(2, e.IBV_WC_SUCCESS)], 'read through the window')
    assert env.mr_a.read(64, 0) == data[-64:]


def test_type2_atomic_through_window(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RA)
    env.mr_b.write((40).to_bytes(8, 'little'), 8, WIN_OFF + 8)
    w = send_wr(4, e.IBV_WR_ATOMIC_FETCH_AND_ADD, [sge(env.mr_a, 0, 8)])
    w.set_wr_atomic(rkey, env.mr_b.buf + WIN_OFF + 8, 2, 0)
    a.qp.post_send(w)
    expect_wcs(a.scq, [(4, e.IBV_WC_SUCCESS)], 'fetch-add through the window')
    assert int.from_bytes(env.mr_a.read(8, 0), 'little') == 40
    assert int.from_bytes(env.mr_b.read(8, WIN_OFF + 8), 'little') == 42


def test_type2_out_of_window(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    access_fails(env, a, b, rkey, WIN_OFF + WIN_LEN - 8, length=16,
                 what='write past the window end')


def test_type2_is_bound_to_its_qp(env, pair, mws):
    """Type 2B: only the QP that bound the window reaches through it."""
    a, b = pair()
    c, d2 = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    access_fails(env, c, d2, rkey, WIN_OFF, what='write via another QP')
    write_ok(env, a, b, rkey, WIN_OFF, os.urandom(128))


def test_type2_unbound_window_rkey(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    access_fails(env, a, b, mw.rkey, WIN_OFF, what='write via an unbound window')


def test_type2_rebind_needs_invalidation(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    b.qp.post_send(bind2_wr(mw, env.mr_b, 0, 64, RW, wr_id=0x21))
    expect_wcs(b.scq, [(0x21, e.IBV_WC_MW_BIND_ERR)], 'second bind')


def test_type2_local_inv(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    write_ok(env, a, b, rkey, WIN_OFF, os.urandom(64))
    w = send_wr(6, e.IBV_WR_LOCAL_INV)
    w.imm_data = rkey
    b.qp.post_send(w)
    wc = expect_wcs(b.scq, [(6, e.IBV_WC_SUCCESS)], 'LOCAL_INV')[0]
    assert wc.opcode == e.IBV_WC_LOCAL_INV
    # invalidated twice: the key is no longer valid
    b.qp.post_send(w)
    expect_wcs(b.scq, [(6, e.IBV_WC_LOC_QP_OP_ERR)], 'second LOCAL_INV')
    # b is in ERR now; a fresh pair shows the key is dead for everyone
    a2, b2 = pair()
    access_fails(env, a2, b2, rkey, WIN_OFF, what='write after LOCAL_INV')


def test_type2_rebind_after_invalidation(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    first = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    w = send_wr(6, e.IBV_WR_LOCAL_INV)
    w.imm_data = first
    b.qp.post_send(w)
    expect_wcs(b.scq, [(6, e.IBV_WC_SUCCESS)], 'LOCAL_INV')
    # pyverbs derives the new key from mw.rkey; give it a different one
    w2 = SendWR(wr_id=0x22, opcode=e.IBV_WR_BIND_MW, send_flags=SIG)
    w2.set_bind_wr(mw, MWBindInfo(env.mr_b, env.mr_b.buf, 4096, RW))
    assert w2.rkey == first
    # same rkey again is allowed: the window is free
    b.qp.post_send(w2)
    expect_wcs(b.scq, [(0x22, e.IBV_WC_SUCCESS)], 'rebind')
    write_ok(env, a, b, first, 0, os.urandom(4096))


def test_local_inv_of_mr_rkey_is_refused(env, pair):
    a, b = pair()
    w = send_wr(7, e.IBV_WR_LOCAL_INV)
    w.imm_data = env.mr_b.rkey
    b.qp.post_send(w)
    expect_wcs(b.scq, [(7, e.IBV_WC_LOC_QP_OP_ERR)], 'LOCAL_INV of an MR')
    # the MR is still registered and usable locally
    env.mr_b.write(b'still', 5, 0)
    assert env.mr_b.read(5, 0) == b'still'


def self_connected(env, qp_type):
    """A UC or UD QPEnd at RTS (UC: connected to itself)."""
    return h.self_connected_qp(env.ctx, env.pd, qp_type, env.gid_index,
                               QPCap(max_send_wr=4, max_recv_wr=4),
                               cq_depth=8)


def _recv(end, mr, off, length, wr_id=0x100):
    end.qp.post_recv(recv_wr(wr_id, [sge(mr, off, length)]))


def test_send_with_inv(env, pair, mws):
    a, b = pair()
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    _recv(b, env.mr_b, 0, 256)
    data = os.urandom(100)
    env.mr_a.write(data, len(data), 0)
    w = send_wr(8, e.IBV_WR_SEND_WITH_INV, [sge(env.mr_a, 0, len(data))])
    w.imm_data = rkey
    a.qp.post_send(w)
    expect_wcs(a.scq, [(8, e.IBV_WC_SUCCESS)], 'SEND_WITH_INV')
    wc = expect_wcs(b.rcq, [(0x100, e.IBV_WC_SUCCESS)], 'receive')[0]
    assert wc.opcode == e.IBV_WC_RECV
    assert wc.wc_flags & e.IBV_WC_WITH_INV, h.wc_str(wc)
    assert not wc.wc_flags & e.IBV_WC_WITH_IMM
    assert wc.imm_data == rkey, f'invalidated rkey {wc.imm_data:#x} != {rkey:#x}'
    assert wc.byte_len == len(data)
    assert env.mr_b.read(len(data), 0) == data
    access_fails(env, a, b, rkey, WIN_OFF, what='write after SEND_WITH_INV')


@pytest.mark.parametrize('target', ['mr', 'type1', 'other-qps-window'])
def test_send_with_inv_refused(env, pair, mws, target):
    """A key the responder may not invalidate: an invalid request on both
    sides (the receive completes in error, the requester gets a NAK)."""
    a, b = pair()
    if target == 'mr':
        rkey = env.mr_b.rkey
    elif target == 'type1':
        mw = mws(e.IBV_MW_TYPE_1)
        bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
        rkey = mw.rkey
    else:
        c, d2 = pair()
        mw = mws(e.IBV_MW_TYPE_2)
        rkey = bind2(d2, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    _recv(b, env.mr_b, 0, 64)
    w = send_wr(9, e.IBV_WR_SEND_WITH_INV, [sge(env.mr_a, 0, 16)])
    w.imm_data = rkey
    a.qp.post_send(w)
    expect_wcs(a.scq, [(9, e.IBV_WC_REM_INV_REQ_ERR)], 'requester')
    wc = h.poll_cq(b.rcq, 1)[0]
    assert wc.status == e.IBV_WC_REM_INV_REQ_ERR, h.wc_str(wc)
    if target == 'other-qps-window':
        # still valid for its own QP
        write_ok(env, c, d2, rkey, WIN_OFF, os.urandom(32))


def test_send_with_inv_not_on_uc(env):
    """IBA has no UC send with invalidate: the provider refuses to post."""
    end = self_connected(env, e.IBV_QPT_UC)
    try:
        w = send_wr(1, e.IBV_WR_SEND_WITH_INV, [sge(env.mr_a, 0, 8)])
        with pytest.raises(PyverbsRDMAError) as ex:
            end.qp.post_send(w)
        assert ex.value.error_code == errno.EINVAL
    finally:
        end.close()


# ---------------------------------------------------------------------------
# Bind errors (IBA 10.6.7.2): MW_BIND_ERR, the QP goes to ERR
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('mw_type', [e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2])
@pytest.mark.parametrize('case', ['mr-without-mw-bind',
                                  'writable-window-on-read-only-mr',
                                  'past-mr-end', 'mr-of-other-pd',
                                  'zero-based'])
def test_bind_error(env, pair, mws, mw_type, case):
    a, b = pair()
    mw = mws(mw_type)
    mr, off, length, acc = {
        'mr-without-mw-bind': (env.mr_b_nobind, 0, 4096, RW),
        'writable-window-on-read-only-mr': (env.mr_b_ro, 0, 4096, RW),
        'past-mr-end': (env.mr_b, SZ - 4096, 8192, RW),
        'mr-of-other-pd': (env.mr_pd2, 0, 4096, RW),
        'zero-based': (env.mr_b, 0, 4096, RW | e.IBV_ACCESS_ZERO_BASED),
    }[case]
    if mw_type == e.IBV_MW_TYPE_1:
        try:
            b.qp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf + off, length, acc),
                                    SIG, 0x30))
        except PyverbsRDMAError as ex:
            # checked before posting by libibverbs or the provider
            assert case in ('mr-of-other-pd', 'zero-based'), str(ex)
            assert ex.error_code in (errno.EPERM, errno.EINVAL)
            return
    else:
        b.qp.post_send(bind2_wr(mw, mr, off, length, acc, wr_id=0x30))
    expect_wcs(b.scq, [(0x30, e.IBV_WC_MW_BIND_ERR)], case)
    assert b.state() == e.IBV_QPS_ERR


def test_bind_on_ud_is_refused(env):
    end = self_connected(env, e.IBV_QPT_UD)
    mw = MW(env.pd, e.IBV_MW_TYPE_2)
    try:
        with pytest.raises(PyverbsRDMAError) as ex:
            end.qp.post_send(bind2_wr(mw, env.mr_b, 0, 64, RW))
        assert ex.value.error_code == errno.EINVAL
    finally:
        mw.close()
        end.close()


# ---------------------------------------------------------------------------
# Lifetime: dealloc, the MR under a window, process exit
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('mw_type', [e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2])
def test_dealloc_bound_window(env, pair, mw_type):
    a, b = pair()
    mw = MW(env.pd, mw_type)
    if mw_type == e.IBV_MW_TYPE_1:
        bind1(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
        rkey = mw.rkey
    else:
        rkey = bind2(b, mw, env.mr_b, WIN_OFF, WIN_LEN, RW)
    mw.close()
    access_fails(env, a, b, rkey, WIN_OFF, what='write after dealloc')


def test_window_keeps_its_mr(env, pair):
    """An MR with a bound window cannot be deregistered (EBUSY); once the
    window is gone it can."""
    a, b = pair()
    mr = MR(env.pd, SZ, LW | BIND)
    mw = MW(env.pd, e.IBV_MW_TYPE_2)
    w = bind2_wr(mw, mr, 0, 4096, RW)
    b.qp.post_send(w)
    expect_wcs(b.scq, [(0x20, e.IBV_WC_SUCCESS)], 'bind')
    with pytest.raises(PyverbsRDMAError) as ex:
        mr.close()
    assert ex.value.error_code == errno.EBUSY, str(ex.value)
    # still fully usable through the window
    data = os.urandom(512)
    env.mr_a.write(data, len(data), 0)
    rdma(a, 1, e.IBV_WR_RDMA_WRITE, sge(env.mr_a, 0, len(data)), w.rkey,
         mr.buf)
    expect_wcs(a.scq, [(1, e.IBV_WC_SUCCESS)], 'write')
    assert mr.read(len(data), 0) == data
    # rereg is refused too while the window is bound
    with pytest.raises(PyverbsRDMAError):
        mr.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, env.pd, 0, 0, LW | BIND | RR)
    mw.close()
    mr.close()


_EXIT_CHILD = textwrap.dedent('''
    import os, sys
    sys.path.insert(0, sys.argv[1])
    import bzc_helpers as h
    import pyverbs.device as d
    import pyverbs.enums as e
    from pyverbs.mr import MR, MW, MWBindInfo
    from pyverbs.pd import PD
    from pyverbs.qp import QPCap
    from pyverbs.wr import SendWR
    ctx = d.Context(name=h.DEV)
    pd = PD(ctx)
    mw_first = sys.argv[2] == 'mw-first'
    mw = MW(pd, e.IBV_MW_TYPE_2) if mw_first else None
    mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
    if not mw_first:
        mw = MW(pd, e.IBV_MW_TYPE_2)
    end = h.self_connected_qp(ctx, pd, e.IBV_QPT_RC,
                              h.find_ipv4_gid_index(ctx),
                              QPCap(max_send_wr=4), cq_depth=8)
    w = SendWR(wr_id=1, opcode=e.IBV_WR_BIND_MW,
               send_flags=e.IBV_SEND_SIGNALED)
    w.set_bind_wr(mw, MWBindInfo(mr, mr.buf, 1 << 20,
                                 e.IBV_ACCESS_REMOTE_WRITE))
    end.qp.post_send(w)
    wc = h.poll_cq(end.scq, 1)[0]
    assert wc.status == e.IBV_WC_SUCCESS, h.wc_str(wc)
    print('bound', flush=True)
    os._exit(0)          # no cleanup: the kernel tears it all down
''')


@pytest.mark.parametrize('order', ['mr-first', 'mw-first'])
def test_exit_with_bound_window(order):
    """Process exit with a window bound to an MR, whichever was created
    first: everything is released, no pinned pages or objects are left."""
    before = h.rdma_res_summary()
    r = subprocess.run([sys.executable, '-c', _EXIT_CHILD,
                        os.path.dirname(os.path.abspath(__file__)), order],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and 'bound' in r.stdout, r.stderr
    assert h.wait_until(lambda: h.rdma_res_summary() == before, 10), \
        f'resources {h.rdma_res_summary()} != {before} after exit'


# ---------------------------------------------------------------------------
# The ibv_wr_* API
# ---------------------------------------------------------------------------

WR_OPS = (e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_RDMA_WRITE |
          e.IBV_QP_EX_WITH_BIND_MW | e.IBV_QP_EX_WITH_LOCAL_INV |
          e.IBV_QP_EX_WITH_SEND_WITH_INV)


def test_wr_api_bind_write_local_inv(env, pair, mws):
    a, b = pair(send_ops=WR_OPS)
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = (mw.rkey & ~0xff) | ((mw.rkey + 7) & 0xff)
    b.qp.wr_start()
    b.qp.wr_id, b.qp.wr_flags = 0x40, SIG
    b.qp.wr_bind_mw(mw, rkey, MWBindInfo(env.mr_b, env.mr_b.buf + WIN_OFF,
                                         WIN_LEN, RW))
    b.qp.wr_complete()
    wc = expect_wcs(b.scq, [(0x40, e.IBV_WC_SUCCESS)], 'wr_bind_mw')[0]
    assert wc.opcode == e.IBV_WC_BIND_MW
    data = os.urandom(1000)
    env.mr_a.write(data, len(data), 0)
    a.qp.wr_start()
    a.qp.wr_id, a.qp.wr_flags = 0x41, SIG
    a.qp.wr_rdma_write(rkey, env.mr_b.buf + WIN_OFF + 100)
    a.qp.wr_set_sge(sge(env.mr_a, 0, len(data)))
    a.qp.wr_complete()
    expect_wcs(a.scq, [(0x41, e.IBV_WC_SUCCESS)], 'wr_rdma_write')
    assert env.mr_b.read(len(data), WIN_OFF + 100) == data
    b.qp.wr_start()
    b.qp.wr_id, b.qp.wr_flags = 0x42, SIG
    b.qp.wr_local_inv(rkey)
    b.qp.wr_complete()
    wc = expect_wcs(b.scq, [(0x42, e.IBV_WC_SUCCESS)], 'wr_local_inv')[0]
    assert wc.opcode == e.IBV_WC_LOCAL_INV
    a.qp.wr_start()
    a.qp.wr_id, a.qp.wr_flags = 0x43, SIG
    a.qp.wr_rdma_write(rkey, env.mr_b.buf + WIN_OFF)
    a.qp.wr_set_sge(sge(env.mr_a, 0, 8))
    a.qp.wr_complete()
    expect_wcs(a.scq, [(0x43, e.IBV_WC_REM_ACCESS_ERR)],
               'write after invalidation')


def test_wr_api_send_inv(env, pair, mws):
    a, b = pair(send_ops=WR_OPS)
    mw = mws(e.IBV_MW_TYPE_2)
    rkey = (mw.rkey & ~0xff) | ((mw.rkey + 1) & 0xff)
    b.qp.wr_start()
    b.qp.wr_id, b.qp.wr_flags = 0x50, SIG
    b.qp.wr_bind_mw(mw, rkey, MWBindInfo(env.mr_b, env.mr_b.buf, 4096, RW))
    b.qp.wr_complete()
    expect_wcs(b.scq, [(0x50, e.IBV_WC_SUCCESS)], 'wr_bind_mw')
    _recv(b, env.mr_b, 8192, 64)
    a.qp.wr_start()
    a.qp.wr_id, a.qp.wr_flags = 0x51, SIG
    a.qp.wr_send_inv(rkey)
    a.qp.wr_set_sge(sge(env.mr_a, 0, 32))
    a.qp.wr_complete()
    expect_wcs(a.scq, [(0x51, e.IBV_WC_SUCCESS)], 'wr_send_inv')
    wc = expect_wcs(b.rcq, [(0x100, e.IBV_WC_SUCCESS)], 'receive')[0]
    assert wc.wc_flags & e.IBV_WC_WITH_INV and wc.imm_data == rkey, \
        h.wc_str(wc)
