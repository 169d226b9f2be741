# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""RDMA ATOMIC_WRITE and FLUSH (the IBTA Memory Placement Extensions) on
bzc0, RC loopback.

ATOMIC_WRITE: 8 bytes written at an 8-byte aligned remote address as one
store, under remote write rights; from ibv_wr_atomic_write() and from
ibv_post_send() (IBV_WR_ATOMIC_WRITE with an 8-byte gather list).  A
misaligned address is the responder's invalid request, missing rights a
remote access error (both class C: the responder goes to ERR); a gather
list of another length is the requester's length error.  Nothing is
written where it must not be.

FLUSH (rdma-core 45+, Linux 6.2+: the platform must carry the verb and
the MR access bits): placement type global visibility on an MR
registered with IBV_ACCESS_FLUSH_GLOBAL, a range or the whole region; a
type the MR was not registered for, an MR without FLUSH rights, a range
outside the MR or a QP without the FLUSH right is a remote access error.
bzc has no persistent memory: the device advertises no
IBV_DEVICE_FLUSH_PERSISTENT and the core refuses such MRs.  Where the
platform lacks FLUSH, the provider refuses IBV_QP_EX_WITH_FLUSH with
EOPNOTSUPP and the FLUSH tests skip naming what is missing.
"""

import errno
import os
import struct

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pytest

import bzc_helpers as h
from bzc_helpers import expect_wcs, send_wr, sge

pytestmark = pytest.mark.keeps_netdev

SZ = 4096
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
RA = e.IBV_ACCESS_REMOTE_ATOMIC
# uAPI values, spelled out because rdma-core 44's pyverbs does not name
# them: IBV_ACCESS_FLUSH_GLOBAL/_PERSISTENT, IBV_QP_EX_WITH_FLUSH and the
# device capability bits of ibv_query_device_ex().
ACCESS_FLUSH_GLOBAL = 1 << 8
ACCESS_FLUSH_PERSISTENT = 1 << 9
QP_EX_WITH_FLUSH = 1 << 11
DEVICE_FLUSH_GLOBAL = 1 << 38
DEVICE_FLUSH_PERSISTENT = 1 << 39
DEVICE_ATOMIC_WRITE = 1 << 40
# enum ibv_wc_opcode
WC_FLUSH = 8
WC_ATOMIC_WRITE = 9

KERNEL = tuple(int(x) for x in os.uname().release.split('.')[:2])
HAVE_FLUSH_VERB = hasattr(e, 'IBV_WR_FLUSH')
# What the platform needs for FLUSH, in the words of a skip.
NO_FLUSH = ('FLUSH needs ibv_wr_flush (rdma-core 45+; this pyverbs has '
            'none)' if not HAVE_FLUSH_VERB else
            'FLUSH needs MR access IBV_ACCESS_FLUSH_* in the kernel core '
            f'(Linux 6.2+; this is {os.uname().release})'
            if KERNEL < (6, 2) else None)
needs_flush = pytest.mark.skipif(NO_FLUSH is not None, reason=str(NO_FLUSH))


@pytest.fixture(scope='module')
def env():
    with h.VerbsEnv() as en:
        en.local = en.reg(SZ, LW)
        en.target = en.reg(SZ, LW | RW | RR | RA)
        en.no_rw = en.reg(SZ, LW | RR | RA)
        yield en


def pair(env, send_ops, access_b=None):
    return h.QPPair(env, send_ops=send_ops, access_b=access_b)


def prefill(mr, byte=0x5a):
    mr.write(bytes([byte]) * SZ, SZ)


def words(mr, off, n=3):
    return mr.read(8 * n, off)


def assert_responder_err(b):
    assert b.state() == e.IBV_QPS_ERR, 'class C error: responder not in ERR'


# --------------------------------------------------------------------------
# ATOMIC_WRITE
# --------------------------------------------------------------------------

def test_device_advertises_atomic_write(env):
    caps = env.ctx.query_device_ex().device_cap_flags_ex
    assert caps & DEVICE_ATOMIC_WRITE, f'device_cap_flags_ex {caps:#x}'


def wr_atomic_write(end, wr_id, rkey, addr, value):
    qp = end.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_atomic_write(rkey, addr, value)
    qp.wr_complete()


@pytest.mark.parametrize('off', [0, 8, SZ - 8])
def test_atomic_write(env, off):
    p = pair(env, e.IBV_QP_EX_WITH_ATOMIC_WRITE | e.IBV_QP_EX_WITH_RDMA_WRITE)
    try:
        a, _ = p
        prefill(env.target)
        value = struct.pack('<Q', 0x0123456789abcdef + off)
        wr_atomic_write(a, 7, env.target.rkey, env.target.buf + off, value)
        wc = expect_wcs(a.scq, [(7, e.IBV_WC_SUCCESS)], 'atomic write')[0]
        assert wc.opcode == WC_ATOMIC_WRITE, h.wc_str(wc)
        data = env.target.read(SZ, 0)
        assert data[off:off + 8] == value
        assert data[:off] + data[off + 8:] == b'\x5a' * (SZ - 8), \
            'bytes beside the 8 written changed'
    finally:
        p.close()


def test_atomic_write_post_send(env):
    """IBV_WR_ATOMIC_WRITE through ibv_post_send(): the 8 bytes come from
    the gather list (two SGEs here), under its lkeys."""
    p = pair(env, None)
    try:
        a, _ = p
        prefill(env.target)
        env.local.write(b'ABCDEFGH', 8, 64)
        w = send_wr(3, e.IBV_WR_ATOMIC_WRITE,
                    [sge(env.local, 64, 3), sge(env.local, 67, 5)])
        w.set_wr_rdma(env.target.rkey, env.target.buf + 128)
        a.qp.post_send(w)
        wc = expect_wcs(a.scq, [(3, e.IBV_WC_SUCCESS)], 'atomic write')[0]
        assert wc.opcode == WC_ATOMIC_WRITE, h.wc_str(wc)
        assert env.target.read(8, 128) == b'ABCDEFGH'
        assert words(env.target, 120, 1) == b'\x5a' * 8
        assert words(env.target, 136, 1) == b'\x5a' * 8
    finally:
        p.close()


@pytest.mark.parametrize('length', [4, 9, 16])
def test_atomic_write_not_8_bytes(env, length):
    """A gather list of another length than 8 is the requester's
    IBV_WC_LOC_LEN_ERR; the target is untouched."""
    p = pair(env, None)
    try:
        a, b = p
        prefill(env.target)
        w = send_wr(4, e.IBV_WR_ATOMIC_WRITE, [sge(env.local, 0, length)])
        w.set_wr_rdma(env.target.rkey, env.target.buf)
        a.qp.post_send(w)
        expect_wcs(a.scq, [(4, e.IBV_WC_LOC_LEN_ERR)], 'atomic write')
        assert env.target.read(SZ, 0) == b'\x5a' * SZ
        assert b.state() == e.IBV_QPS_RTS, 'responder saw a bad request'
    finally:
        p.close()


def test_atomic_write_misaligned(env):
    """A remote address that is not 8-byte aligned: the responder's
    invalid request (IBV_WC_REM_INV_REQ_ERR), class C."""
    p = pair(env, e.IBV_QP_EX_WITH_ATOMIC_WRITE)
    try:
        a, b = p
        prefill(env.target)
        wr_atomic_write(a, 5, env.target.rkey, env.target.buf + 4,
                        b'misalign')
        expect_wcs(a.scq, [(5, e.IBV_WC_REM_INV_REQ_ERR)], 'misaligned')
        assert env.target.read(SZ, 0) == b'\x5a' * SZ
        assert_responder_err(b)
    finally:
        p.close()


@pytest.mark.parametrize('where', ['mr', 'qp', 'bounds'])
def test_atomic_write_access(env, where):
    """ATOMIC_WRITE needs remote write on the MR and the QP and a range
    inside the MR: otherwise IBV_WC_REM_ACCESS_ERR, class C, nothing
    written."""
    access_b = (LW | RR | RA) if where == 'qp' else None
    p = pair(env, e.IBV_QP_EX_WITH_ATOMIC_WRITE, access_b=access_b)
    try:
        a, b = p
        mr = env.no_rw if where == 'mr' else env.target
        prefill(mr)
        addr = mr.buf + (SZ if where == 'bounds' else 0)
        wr_atomic_write(a, 6, mr.rkey, addr, b'noaccess')
        expect_wcs(a.scq, [(6, e.IBV_WC_REM_ACCESS_ERR)], where)
        assert mr.read(SZ, 0) == b'\x5a' * SZ
        assert_responder_err(b)
    finally:
        p.close()


def test_atomic_write_refused_on_uc(env):
    """ATOMIC_WRITE is an RC operation: a UC QP cannot be created with
    it (EOPNOTSUPP) nor post it (EINVAL)."""
    with pytest.raises(PyverbsRDMAError) as ei:
        h.QPEnd(env.ctx, env.pd, e.IBV_QPT_UC,
                send_ops=e.IBV_QP_EX_WITH_ATOMIC_WRITE)
    assert ei.value.error_code == errno.EOPNOTSUPP, str(ei.value)
    p = h.QPPair(env, qp_type=e.IBV_QPT_UC)
    try:
        w = send_wr(1, e.IBV_WR_ATOMIC_WRITE, [sge(env.local, 0, 8)])
        w.set_wr_rdma(env.target.rkey, env.target.buf)
        with pytest.raises(PyverbsRDMAError) as ei:
            p.a.qp.post_send(w)
        assert ei.value.error_code == errno.EINVAL, str(ei.value)
    finally:
        p.close()


# --------------------------------------------------------------------------
# FLUSH
# --------------------------------------------------------------------------

def test_flush_caps_match_platform(env):
    """FLUSH is advertised exactly where the platform carries it, and
    only to global visibility: bzc has no persistent memory."""
    caps = env.ctx.query_device_ex().device_cap_flags_ex
    assert not caps & DEVICE_FLUSH_PERSISTENT, f'{caps:#x}'
    if KERNEL >= (6, 2):
        assert caps & DEVICE_FLUSH_GLOBAL, f'{caps:#x}'
    else:
        assert not caps & DEVICE_FLUSH_GLOBAL, f'{caps:#x}'


def test_flush_send_op_refused_without_platform(env):
    """Where FLUSH is not carried the provider refuses the send op with
    EOPNOTSUPP (so test suites skip); where it is, the QP is made."""
    if NO_FLUSH is None:
        h.QPEnd(env.ctx, env.pd, e.IBV_QPT_RC,
                send_ops=QP_EX_WITH_FLUSH).close()
        return
    with pytest.raises(PyverbsRDMAError) as ei:
        h.QPEnd(env.ctx, env.pd, e.IBV_QPT_RC, send_ops=QP_EX_WITH_FLUSH)
    assert ei.value.error_code == errno.EOPNOTSUPP, str(ei.value)


def test_flush_persistent_mr_refused(env):
    """No persistence: an MR asking for IBV_ACCESS_FLUSH_PERSISTENT is
    refused (6.2+ core: EOPNOTSUPP; 6.1 knows no such bit: EINVAL)."""
    want = errno.EOPNOTSUPP if KERNEL >= (6, 2) else errno.EINVAL
    with pytest.raises(PyverbsRDMAError) as ei:
        MR(env.pd, SZ, LW | RW | ACCESS_FLUSH_PERSISTENT).close()
    assert ei.value.error_code == want, str(ei.value)


def wr_flush(end, wr_id, rkey, addr, length, ptype, level):
    qp = end.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_flush(rkey, addr, length, ptype, level)
    qp.wr_complete()


FLUSH_QP_RIGHTS = LW | RW | RR | RA | ACCESS_FLUSH_GLOBAL | \
    ACCESS_FLUSH_PERSISTENT


@pytest.fixture
def flush_mr(env):
    mr = MR(env.pd, SZ, LW | RW | ACCESS_FLUSH_GLOBAL)
    yield mr
    mr.close()


@needs_flush
def test_flush_after_write(env, flush_mr):
    """WRITE then FLUSH of the range, of a zero-length range and of the
    whole region (whose length and address are ignored): each succeeds
    with IBV_WC_FLUSH, the written data is in place."""
    p = pair(env, e.IBV_QP_EX_WITH_RDMA_WRITE | QP_EX_WITH_FLUSH,
             access_b=FLUSH_QP_RIGHTS)
    try:
        a, b = p
        env.local.write(b'w' * 256, 256)
        qp = a.qp
        qp.wr_start()
        qp.wr_id = 1
        qp.wr_flags = e.IBV_SEND_SIGNALED
        qp.wr_rdma_write(flush_mr.rkey, flush_mr.buf + 512)
        qp.wr_set_sge(sge(env.local, 0, 256))
        qp.wr_complete()
        expect_wcs(a.scq, [(1, e.IBV_WC_SUCCESS)], 'write')
        cases = [(flush_mr.buf + 512, 256, e.IBV_FLUSH_RANGE),
                 (flush_mr.buf, 0, e.IBV_FLUSH_RANGE),
                 (flush_mr.buf, SZ, e.IBV_FLUSH_RANGE),
                 (0, 0, e.IBV_FLUSH_MR),
                 (0, 12345678, e.IBV_FLUSH_MR)]
        for n, (addr, length, level) in enumerate(cases, 2):
            wr_flush(a, n, flush_mr.rkey, addr, length, e.IBV_FLUSH_GLOBAL,
                     level)
            wc = expect_wcs(a.scq, [(n, e.IBV_WC_SUCCESS)],
                            f'flush {addr:#x}+{length} level {level}')[0]
            assert wc.opcode == WC_FLUSH, h.wc_str(wc)
        assert flush_mr.read(256, 512) == b'w' * 256
        assert b.state() == e.IBV_QPS_RTS
    finally:
        p.close()


@needs_flush
@pytest.mark.parametrize('case', ['persistent', 'mr_no_flush', 'bounds',
                                  'qp_no_flush', 'bad_rkey'])
def test_flush_violations(env, flush_mr, case):
    """A placement type the MR does not grant (persistence here), an MR
    registered without FLUSH rights, a range beyond the MR, a QP without
    the FLUSH right, an rkey that names nothing: the requester gets
    IBV_WC_REM_ACCESS_ERR and the responder goes to ERR (class C)."""
    access_b = (LW | RW | RR | RA) if case == 'qp_no_flush' else \
        FLUSH_QP_RIGHTS
    p = pair(env, QP_EX_WITH_FLUSH, access_b=access_b)
    try:
        a, b = p
        mr, ptype, addr, length = flush_mr, e.IBV_FLUSH_GLOBAL, \
            flush_mr.buf, 64
        rkey = mr.rkey
        if case == 'persistent':
            ptype = e.IBV_FLUSH_PERSISTENT
        elif case == 'mr_no_flush':
            mr = env.target
            rkey, addr = mr.rkey, mr.buf
        elif case == 'bounds':
            addr = flush_mr.buf + SZ - 32
        elif case == 'bad_rkey':
            rkey = flush_mr.rkey ^ 0x5500
        wr_flush(a, 9, rkey, addr, length, ptype, e.IBV_FLUSH_RANGE)
        expect_wcs(a.scq, [(9, e.IBV_WC_REM_ACCESS_ERR)], case)
        assert_responder_err(b)
    finally:
        p.close()
