# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""ibv_rereg_mr on bzc0 (loopback RC QPs a -> b, b's MR re-registered):
new access rights, new PD and new translation take effect for remote and
local access; the old ones stop working; write rights on memory first
pinned read-only re-pin it (the data lands in the process's pages); bad
requests fail cleanly and leave the MR as it was; a re-registration while
a long transfer uses the MR is safe."""

import ctypes
import errno
import os
import time

import pyverbs.enums as e
from pyverbs.mem_alloc import free, posix_memalign
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
import pytest

import bzc_helpers as h
import bzcdv as dv
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
        # a hint bzc takes only with ON_DEMAND (ODP itself is supported)
        'unsupported-access-bit': (ACCESS, LW | RW | e.IBV_ACCESS_HUGETLB),
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


# ---------------------------------------------------------------------------
# ibv_rereg_mr against a concurrent bind (ctypes: both calls drop the GIL)
# ---------------------------------------------------------------------------

class IbvMw(ctypes.Structure):
    _fields_ = [('context', ctypes.c_void_p), ('pd', ctypes.c_void_p),
                ('rkey', ctypes.c_uint32), ('handle', ctypes.c_uint32),
                ('type', ctypes.c_int)]


class IbvMwBind(ctypes.Structure):
    _fields_ = [('wr_id', ctypes.c_uint64), ('send_flags', ctypes.c_uint),
                ('mr', ctypes.c_void_p), ('addr', ctypes.c_uint64),
                ('length', ctypes.c_uint64),
                ('mw_access_flags', ctypes.c_uint)]


assert IbvMwBind.mr.offset == 16 and ctypes.sizeof(IbvMwBind) == 48

# Inline in verbs.h: context->ops.alloc_mw / bind_mw / dealloc_mw (slots
# 7, 8, 9 of struct ibv_context_ops, rdma-core 44).
_ALLOC_MW = ctypes.CFUNCTYPE(ctypes.POINTER(IbvMw), ctypes.c_void_p,
                             ctypes.c_int)
_BIND_MW = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                            ctypes.POINTER(IbvMw), ctypes.POINTER(IbvMwBind))
_DEALLOC_MW = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(IbvMw))
RACE_SECONDS = 5


class BindRace:
    """A type 1 window, an MR (LW | RR | MW_BIND) and a self-connected RC
    QP through ctypes; bind() and rereg() run in two threads at once,
    released together, as often as RACE_SECONDS allow."""

    def __init__(self, c, gid_index):
        self.c, self.gid_index = c, gid_index
        ops = ctypes.cast(c.p + 8, ctypes.POINTER(ctypes.c_void_p * 32))
        self._bind = _BIND_MW(ops.contents[8])
        self._dealloc = _DEALLOC_MW(ops.contents[9])
        self.pd2 = c.alloc_pd()
        self.cq = c.cq(64)
        self.buf = c.buf(SZ)
        self.mr = c.mr(self.buf.addr, SZ, LW | RR | e.IBV_ACCESS_MW_BIND)
        self.mw = _ALLOC_MW(ops.contents[7])(c.pd, e.IBV_MW_TYPE_1)
        assert self.mw, f'ibv_alloc_mw: errno {ctypes.get_errno()}'
        self.qp = dv.RcQp(c, c.pd, self.cq, gid_index)

    def bind(self, length=SZ):
        """Bind the window over the MR (length 0: unbind); the status of
        the bind's completion, or -errno if it could not be posted."""
        b = IbvMwBind(wr_id=7, send_flags=dv.SEND_SIGNALED,
                      mr=ctypes.cast(self.mr.p, ctypes.c_void_p).value
                      if length else None,
                      addr=self.buf.addr if length else 0, length=length,
                      mw_access_flags=RR if length else 0)
        rc = self._bind(ctypes.cast(self.qp.p, ctypes.c_void_p), self.mw,
                        ctypes.byref(b))
        if rc:
            return -rc
        return self.cq.wait(1, 60)[0].status

    def rereg(self, flags, pd=None, access=0, addr=None):
        """ibv_rereg_mr(): 0 or the errno it failed with."""
        rc = dv._ibv.ibv_rereg_mr(self.mr.p, flags, pd, addr,
                                  SZ if addr else 0, access)
        return ctypes.get_errno() or -1 if rc else 0

    def new_qp(self):
        """The QP a failed bind left in ERR is replaced."""
        self.qp.close()
        self.qp = dv.RcQp(self.c, self.c.pd, self.cq, self.gid_index)

    def close(self):
        self.qp.close()
        if self.mw:
            assert self._dealloc(self.mw) == 0
            self.mw = None


dv._ibv.ibv_rereg_mr.restype = ctypes.c_int
dv._ibv.ibv_rereg_mr.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_size_t, ctypes.c_int]


def test_rereg_races_bind(ctx):
    """Bind a type 1 window and re-register its MR at the same moment,
    over and over: the outcome is always one the two calls give in some
    order.  Dropping MW_BIND or moving the MR to another PD: exactly one
    of bind and rereg succeeds (rereg after bind: EBUSY; bind after
    rereg: IBV_WC_MW_BIND_ERR), never both.  A new translation may follow
    the bind too (the bind then names the new MR) but never takes the MR
    from under a bound window.  The kernel log stays clean (checked by
    the fixture)."""
    import threading
    gid_index = h.find_ipv4_gid_index(ctx)
    with dv.Ctx(h.DEV) as c:
        r = BindRace(c, gid_index)
        try:
            kinds = {
                'access': (lambda: r.rereg(ACCESS, access=LW | RR),
                           lambda: r.rereg(ACCESS, access=LW | RR |
                                           e.IBV_ACCESS_MW_BIND)),
                'pd': (lambda: r.rereg(PDFLAG, pd=r.pd2),
                       lambda: r.rereg(PDFLAG, pd=c.pd)),
                'trans': (lambda: r.rereg(TRANS, addr=r.buf.addr), None),
            }
            start = threading.Barrier(3, timeout=120)
            done = threading.Barrier(3, timeout=120)
            res = {}
            round_kind = ['access']
            stop = [False]

            def worker(name, op):
                while True:
                    start.wait()
                    if stop[0]:
                        return
                    try:
                        res[name] = op()
                    except Exception as ex:     # reported by the main loop
                        res[name] = ex
                    done.wait()
            threads = [
                threading.Thread(target=worker, daemon=True,
                                 args=('bind', r.bind)),
                threading.Thread(target=worker, daemon=True, args=(
                    'rereg', lambda: kinds[round_kind[0]][0]()))]
            for t in threads:
                t.start()
            seen = {}
            end = time.monotonic() + RACE_SECONDS
            i = 0
            try:
                while time.monotonic() < end:
                    kind = round_kind[0] = ('access', 'pd', 'trans')[i % 3]
                    i += 1
                    start.wait()
                    done.wait()
                    for name in ('bind', 'rereg'):
                        if isinstance(res[name], Exception):
                            raise res[name]
                    bound = res['bind'] == e.IBV_WC_SUCCESS
                    rereg = res['rereg']
                    assert res['bind'] in (e.IBV_WC_SUCCESS,
                                           e.IBV_WC_MW_BIND_ERR), res
                    assert rereg in (0, errno.EBUSY), \
                        f'{kind}: rereg: {os.strerror(rereg)}'
                    if kind == 'trans':
                        assert bound or rereg == 0, f'{kind}: both failed'
                    else:
                        assert bound != (rereg == 0), \
                            f'{kind}: bind {"and" if bound else "nor"} ' \
                            f'rereg succeeded ({seen})'
                    seen[(kind, bound, rereg)] = \
                        seen.get((kind, bound, rereg), 0) + 1
                    if bound:
                        assert r.bind(0) == e.IBV_WC_SUCCESS, 'unbind'
                    else:
                        r.new_qp()
                    undo = kinds[kind][1]
                    if rereg == 0 and undo is not None:
                        assert undo() == 0, f'{kind}: undo failed'
            finally:
                stop[0] = True
                try:
                    start.wait()
                except threading.BrokenBarrierError:
                    pass
                for t in threads:
                    t.join(60)
            # both orders happened, or the race was not a race
            assert i >= 30, f'only {i} rounds in {RACE_SECONDS}s'
            print(f'{i} rounds: {seen}')
        finally:
            r.close()
