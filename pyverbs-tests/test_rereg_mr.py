# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""ibv_rereg_mr on bzc0 (loopback RC QPs a -> b, b's MR re-registered):
new access rights, new PD and new translation take effect for remote and
local access; the old ones stop working; write rights on memory first
pinned read-only re-pin it (the data lands in the process's pages); bad
requests fail cleanly and leave the MR as it was; a re-registration while
a long transfer uses the MR is safe."""

import errno
import os

import pyverbs.enums as e
from pyverbs.mem_alloc import free, posix_memalign
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
import pytest

import bzc_helpers as h
from bzc_helpers import rdma_wr, recv_wr, send_wr, sge

pytestmark = pytest.mark.keeps_netdev

SZ = 64 * 1024
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
ACCESS = e.IBV_REREG_MR_CHANGE_ACCESS
PDFLAG = e.IBV_REREG_MR_CHANGE_PD
TRANS = e.IBV_REREG_MR_CHANGE_TRANSLATION


@pytest.fixture(scope='module')
def env():
    with h.VerbsEnv() as en:
        en.mr_a = en.reg(8 << 20, h.access_all())
        yield en


@pytest.fixture
def pair(env):
    """make() -> (a, b), connected RC QPs, closed after the test."""
    with h.ClosingFactory(h.QPPair, env) as make:
        yield make


@pytest.fixture
def mrs(env):
    """reg(length, access, pd=None) -> MR, deregistered after the test."""
    with h.ClosingFactory(lambda length, access, pd=None:
                          MR(pd or env.pd, length, access)) as reg:
        yield reg


def write(env, a, rkey, addr, data, wr_id=1):
    """RDMA WRITE of `data` from a; returns the completion status."""
    env.mr_a.write(data, len(data), 0)
    a.qp.post_send(rdma_wr(wr_id, e.IBV_WR_RDMA_WRITE,
                           [sge(env.mr_a, 0, len(data))], rkey, addr))
    wc = h.poll_cq(a.scq, 1)[0]
    assert wc.wr_id == wr_id, h.wc_str(wc)
    return wc.status


def check_write(env, a, mr, off, ok, what):
    data = os.urandom(256)
    before = mr.read(256, off)
    st = write(env, a, mr.rkey, mr.buf + off, data)
    if ok:
        assert st == e.IBV_WC_SUCCESS, f'{what}: {h.wc_status_str(st)}'
        assert mr.read(256, off) == data, f'{what}: data not there'
    else:
        assert st == e.IBV_WC_REM_ACCESS_ERR, f'{what}: {h.wc_status_str(st)}'
        assert mr.read(256, off) == before, f'{what}: memory changed'


def test_add_remote_write(env, pair, mrs):
    a, b = pair()
    mr = mrs(SZ, LW)
    check_write(env, a, mr, 0, False, 'before rereg')
    a2, _ = pair()
    mr.rereg(ACCESS, env.pd, 0, 0, LW | RW)
    check_write(env, a2, mr, 128, True, 'after adding remote write')


def test_remove_remote_write(env, pair, mrs):
    a, b = pair()
    mr = mrs(SZ, LW | RW)
    check_write(env, a, mr, 0, True, 'before rereg')
    mr.rereg(ACCESS, env.pd, 0, 0, LW)
    check_write(env, a, mr, 0, False, 'after removing remote write')


def test_write_rights_on_read_only_pinned_memory(env, pair, mrs):
    """Registered without any write right, the pages are pinned read-only
    (untouched memory may even be the shared zero page).  Adding write
    rights must re-pin them: what is written shows in the process."""
    a, b = pair()
    mr = mrs(SZ, 0)
    mr.rereg(ACCESS, env.pd, 0, 0, LW | RW)
    check_write(env, a, mr, 4096 * 3, True, 'write after upgrade')
    # and the zero page stayed zero: a fresh read-only MR reads zeros
    other = mrs(SZ, 0)
    assert other.read(SZ, 0) == bytes(SZ)


def test_change_pd(env, pair, mrs):
    a, b = pair()
    mr = mrs(SZ, LW | RW | RR)
    check_write(env, a, mr, 0, True, 'before rereg')
    mr.rereg(PDFLAG, env.pd2, 0, 0, 0)
    check_write(env, a, mr, 0, False, 'MR moved to another PD')
    # local use by a QP of the old PD fails too
    a2, b2 = pair()
    b2.qp.post_recv(recv_wr(7, [sge(mr, 0, 64)]))
    a2.qp.post_send(send_wr(8, e.IBV_WR_SEND, [sge(env.mr_a, 0, 16)]))
    wc = h.poll_cq(b2.rcq, 1)[0]
    assert wc.status == e.IBV_WC_LOC_PROT_ERR, h.wc_str(wc)
    # back to the first PD: works again
    mr.rereg(PDFLAG, env.pd, 0, 0, 0)
    a3, _ = pair()
    check_write(env, a3, mr, 0, True, 'MR back in its PD')


def test_change_translation(env, pair, mrs):
    a, b = pair()
    mr = mrs(SZ, LW | RW)
    old_buf, old_rkey = mr.buf, mr.rkey
    check_write(env, a, mr, 0, True, 'before rereg')
    new = posix_memalign(2 * SZ)
    try:
        mr.rereg(TRANS, env.pd, new, 2 * SZ, 0)
        assert mr.buf == new
        # the new range, all of it, including beyond the old length
        check_write(env, a, mr, SZ + 512, True, 'write to the new range')
        # the old keys, if they changed, no longer reach anything
        if old_rkey != mr.rkey:
            st = write(env, a, old_rkey, old_buf, os.urandom(64), wr_id=2)
            assert st == e.IBV_WC_REM_ACCESS_ERR, h.wc_status_str(st)
            a, b = pair()
        # an address of the old range is outside the new one
        st = write(env, a, mr.rkey, old_buf, os.urandom(64), wr_id=3)
        assert st == e.IBV_WC_REM_ACCESS_ERR, h.wc_status_str(st)
    finally:
        # the MR must not point at `new` when the fixture closes it
        mr.close()
        free(new)


def test_translation_and_access_together(env, pair, mrs):
    a, b = pair()
    mr = mrs(SZ, LW)
    new = posix_memalign(SZ)
    try:
        mr.rereg(TRANS | ACCESS, env.pd, new, SZ, LW | RW)
        check_write(env, a, mr, 100, True, 'new range, new rights')
    finally:
        mr.close()
        free(new)


@pytest.mark.parametrize('case', ['remote-write-without-local-write',
                                  'unsupported-access-bit', 'no-flags',
                                  'unknown-flag'])
def test_bad_rereg_leaves_mr_alone(env, pair, mrs, case):
    a, b = pair()
    mr = mrs(SZ, LW | RW)
    flags, access = {
        'remote-write-without-local-write': (ACCESS, RW),
        'unsupported-access-bit': (ACCESS, LW | RW | e.IBV_ACCESS_ON_DEMAND),
        'no-flags': (0, LW),
        'unknown-flag': (1 << 7, LW),
    }[case]
    with pytest.raises((PyverbsRDMAError, PyverbsError)) as ex:
        mr.rereg(flags, env.pd, 0, 0, access)
    code = getattr(ex.value, 'error_code', None)
    assert code in (errno.EINVAL, errno.EOPNOTSUPP), str(ex.value)
    check_write(env, a, mr, 0, True, 'MR after a refused rereg')


def test_rereg_while_transfer_in_flight(env, pair, mrs):
    """Re-register the target of long writes while they run: the writes
    complete (into the old or the new registration, or with an access
    error once the old keys are gone), nothing else breaks."""
    length = 4 << 20
    for i in range(6):
        a, b = pair()
        mr = mrs(length, LW | RW)
        env.mr_a.write(os.urandom(4096) * (length // 4096), length, 0)
        a.qp.post_send(rdma_wr(i, e.IBV_WR_RDMA_WRITE,
                               [sge(env.mr_a, 0, length)], mr.rkey, mr.buf))
        new = None
        if i % 2:
            mr.rereg(ACCESS, env.pd, 0, 0, LW | RW | RR)
        else:
            new = posix_memalign(length)
            mr.rereg(TRANS, env.pd, new, length, 0)
        wc = h.poll_cq(a.scq, 1, timeout=120)[0]
        assert wc.status in (e.IBV_WC_SUCCESS, e.IBV_WC_REM_ACCESS_ERR), \
            h.wc_str(wc)
        # the MR works afterwards with whatever keys it has now
        a2, _ = pair()
        check_write(env, a2, mr, 0, True, f'after in-flight rereg {i}')
        mr.close()
        if new is not None:
            free(new)
