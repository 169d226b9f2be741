# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Device memory on bzc0 (ibv_alloc_dm, ibv_memcpy_to/from_dm,
ibv_reg_dm_mr).

The device has max_dm_size bytes of memory (module parameter max_dm_kb)
for all processes together; an allocation counts whole pages, and one that
does not fit is ENOMEM, a length of 0, an alignment over a page or an
unknown comp_mask EINVAL.  Copies to and from it go in 4-byte units inside
the allocation (EINVAL otherwise).  DM MRs are zero-based, lie inside the
DM, and carry RDMA WRITE, READ, SEND, receive and atomics like any MR.  A
process killed with DMs and DM MRs live gives all of it back, and so does
a device removed while a process has device memory mapped.
"""

import errno
import os
import random
import signal
import struct
import subprocess
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.mr import DMMR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE
import pytest

import bzc_helpers as h
from bzc_helpers import expect_wcs, rdma_wr, recv_wr, send_wr, sge

pytestmark = pytest.mark.keeps_netdev

PAGE = os.sysconf('SC_PAGESIZE')
ZB = e.IBV_ACCESS_ZERO_BASED
LW = e.IBV_ACCESS_LOCAL_WRITE
ALL = (ZB | LW | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
       e.IBV_ACCESS_REMOTE_ATOMIC)


def max_dm_size(ctx):
    return ctx.query_device_ex().max_dm_size


def alloc(ctx, length, log_align=0, comp_mask=0):
    return d.DM(ctx, d.AllocDmAttr(length=length, log_align_req=log_align,
                                   comp_mask=comp_mask))


def alloc_errno(ctx, length, **kw):
    with pytest.raises(PyverbsRDMAError) as ex:
        alloc(ctx, length, **kw).close()
    return ex.value.error_code


@pytest.fixture(scope='module')
def env():
    with h.VerbsEnv() as en:
        en.rng = random.Random(13)
        yield en


def test_device_advertises_dm(env):
    assert max_dm_size(env.ctx) == h.module_param('max_dm_kb') * 1024 > 0


def test_copy_roundtrip(env):
    """A new DM reads as zeros; what is copied in is read back, at any
    4-byte aligned offset, across pages."""
    size = 2 * PAGE + 12
    with alloc(env.ctx, size) as dm:
        assert dm.copy_from_dm(0, size) == bytes(size)
        data = env.rng.randbytes(size)
        dm.copy_to_dm(0, data, size)
        assert dm.copy_from_dm(0, size) == data
        part = env.rng.randbytes(PAGE + 8)
        dm.copy_to_dm(PAGE - 4, part, len(part))
        want = data[:PAGE - 4] + part + data[2 * PAGE + 4:]
        assert dm.copy_from_dm(0, size) == want
        assert dm.copy_from_dm(size - 4, 4) == want[-4:]


@pytest.mark.parametrize('offset,length', [
    (2, 4),             # offset not a multiple of 4
    (4, 6),             # length not a multiple of 4
    (100 + 4, 4),       # beyond the allocation
    (96, 8),            # ends beyond it
    (0, 104),           # longer than it
])
def test_copy_bad_range_einval(env, offset, length):
    with alloc(env.ctx, 100) as dm:
        dm.copy_to_dm(0, b'\x11' * 100, 100)
        with pytest.raises(PyverbsRDMAError) as ex:
            dm.copy_to_dm(offset, b'x' * length, length)
        assert ex.value.error_code == errno.EINVAL, ex.value
        with pytest.raises(PyverbsRDMAError) as ex:
            dm.copy_from_dm(offset, length)
        assert ex.value.error_code == errno.EINVAL, ex.value
        assert dm.copy_from_dm(0, 100) == b'\x11' * 100, 'a refused copy wrote'


def test_alloc_bad_input(env):
    ctx = env.ctx
    assert alloc_errno(ctx, 0) == errno.EINVAL
    assert alloc_errno(ctx, PAGE, log_align=PAGE.bit_length()) == errno.EINVAL
    assert alloc_errno(ctx, PAGE, comp_mask=1) == errno.EINVAL
    assert alloc_errno(ctx, max_dm_size(ctx) + 1) == errno.ENOMEM
    assert alloc_errno(ctx, (1 << 64) - 1) == errno.ENOMEM
    # Any alignment up to a page is granted.
    for log_align in (0, 3, PAGE.bit_length() - 1):
        alloc(ctx, 64, log_align=log_align).close()


def test_total_limit_enomem():
    """The device's memory is shared by every allocation, of every
    process, in whole pages: beyond max_dm_size ENOMEM, until one is
    freed."""
    dev, netdev, addr = 'bzctmp0', 'bzctmpnet0', '198.18.7.1'
    with h.limited_device(dev, netdev, addr, {'max_dm_kb': 16 * PAGE // 1024}):
        ctx1, ctx2 = d.Context(name=dev), d.Context(name=dev)
        try:
            assert max_dm_size(ctx1) == 16 * PAGE
            dms = [alloc(ctx1 if i % 2 else ctx2, 1 if i % 3 else PAGE)
                   for i in range(16)]
            assert alloc_errno(ctx1, 1) == errno.ENOMEM
            assert alloc_errno(ctx2, 4) == errno.ENOMEM
            dms.pop().close()
            dms.append(alloc(ctx1, PAGE))
            assert alloc_errno(ctx2, 1) == errno.ENOMEM
            for dm in dms:
                dm.close()
            alloc(ctx2, 16 * PAGE).close()
        finally:
            ctx1.close()
            ctx2.close()


def test_reg_dm_mr_rules(env):
    """Zero-based only (EINVAL), inside the DM (EINVAL)."""
    with alloc(env.ctx, 2 * PAGE) as dm:
        for length, access, offset, err in [
                (PAGE, LW, 0, errno.EINVAL),
                (2 * PAGE + 4, ALL, 0, errno.EINVAL),
                (PAGE + 4, ALL, PAGE, errno.EINVAL)]:
            with pytest.raises(PyverbsRDMAError) as ex:
                DMMR(env.pd, length, access, dm, offset).close()
            assert ex.value.error_code == err, (length, access, offset)
        DMMR(env.pd, PAGE, ALL, dm, 64).close()
    # Zero length registers, as on hardware.
    with alloc(env.ctx, 4) as dm:
        DMMR(env.pd, 0, ZB | LW, dm, 0).close()


class DmRig:
    """A DM of 3 pages with an MR over [OFF, OFF + LEN) (crossing a page
    boundary, not page aligned), a host MR, and an RC pair a -> b."""
    OFF, LEN = PAGE + 64, 2 * PAGE - 128

    def __init__(self, env):
        self.env = env
        self.dm = alloc(env.ctx, 3 * PAGE)
        self.mr = DMMR(env.pd, self.LEN, ALL, self.dm, self.OFF)
        self.host = env.reg(2 * PAGE, h.access_all())
        self.pair = h.QPPair(env)
        self.a, self.b = self.pair

    def dm_bytes(self, off, n):
        """Bytes at offset `off` of the MR, read through the DM."""
        return self.dm.copy_from_dm(self.OFF + off, n)

    def close(self):
        self.pair.close()
        self.mr.close()
        self.dm.close()


@pytest.fixture
def rig(env):
    r = DmRig(env)
    yield r
    r.close()


def test_rdma_write_into_dm(env, rig):
    data = env.rng.randbytes(PAGE + 100)
    rig.host.write(data, len(data), 0)
    rig.dm.copy_to_dm(0, b'\xee' * 3 * PAGE, 3 * PAGE)
    rig.a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE,
                               [sge(rig.host, 0, len(data))],
                               rig.mr.rkey, 100))
    expect_wcs(rig.a.scq, [(1, e.IBV_WC_SUCCESS)], 'write into DM')
    assert rig.dm_bytes(100, len(data)) == data
    # Nothing beside the target range changed.
    assert rig.dm.copy_from_dm(0, rig.OFF + 100) == \
        b'\xee' * (rig.OFF + 100)
    end = rig.OFF + 100 + len(data)
    assert rig.dm.copy_from_dm(end, 3 * PAGE - end) == \
        b'\xee' * (3 * PAGE - end)


def test_rdma_read_from_dm(env, rig):
    data = env.rng.randbytes(rig.LEN)
    rig.dm.copy_to_dm(rig.OFF, data, rig.LEN)
    rig.a.qp.post_send(rdma_wr(2, e.IBV_WR_RDMA_READ,
                               [sge(rig.host, 8, rig.LEN)],
                               rig.mr.rkey, 0))
    expect_wcs(rig.a.scq, [(2, e.IBV_WC_SUCCESS)], 'read from DM')
    assert rig.host.read(rig.LEN, 8) == data


def test_send_from_and_into_dm(env, rig):
    """A SEND gathers from a DM MR (zero-based lkey addresses) into a
    receive posted in another range of the same DM MR."""
    data = env.rng.randbytes(3000)
    rig.dm.copy_to_dm(rig.OFF + 0, data, len(data))
    rig.b.qp.post_recv(recv_wr(5, [SGE(4096 - 64, 3000, rig.mr.lkey)]))
    rig.a.qp.post_send(send_wr(6, e.IBV_WR_SEND,
                               [SGE(0, 3000, rig.mr.lkey)]))
    expect_wcs(rig.a.scq, [(6, e.IBV_WC_SUCCESS)], 'send from DM')
    wc = expect_wcs(rig.b.rcq, [(5, e.IBV_WC_SUCCESS)], 'recv into DM')[0]
    assert wc.byte_len == 3000
    assert rig.dm_bytes(4096 - 64, 3000) == data


def test_atomics_on_dm(env, rig):
    rig.dm.copy_to_dm(rig.OFF + 64, struct.pack('<QQ', 40, 7), 16)
    w = send_wr(7, e.IBV_WR_ATOMIC_FETCH_AND_ADD, [sge(rig.host, 0, 8)])
    w.set_wr_atomic(rig.mr.rkey, 64, 2, 0)
    rig.a.qp.post_send(w)
    w = send_wr(8, e.IBV_WR_ATOMIC_CMP_AND_SWP, [sge(rig.host, 8, 8)])
    w.set_wr_atomic(rig.mr.rkey, 72, 7, 99)
    rig.a.qp.post_send(w)
    expect_wcs(rig.a.scq, [(7, e.IBV_WC_SUCCESS), (8, e.IBV_WC_SUCCESS)],
               'atomics on DM')
    assert struct.unpack('<QQ', rig.host.read(16, 0)) == (40, 7)
    assert struct.unpack('<QQ', rig.dm_bytes(64, 16)) == (42, 99)


def test_access_outside_dm_mr(env, rig):
    """The MR ends where it was registered: the DM beyond it is not
    reachable through it (remote access error, nothing written)."""
    rig.dm.copy_to_dm(0, b'\x77' * 3 * PAGE, 3 * PAGE)
    rig.a.qp.post_send(rdma_wr(9, e.IBV_WR_RDMA_WRITE,
                               [sge(rig.host, 0, 16)], rig.mr.rkey,
                               rig.LEN - 8))
    expect_wcs(rig.a.scq, [(9, e.IBV_WC_REM_ACCESS_ERR)], 'write past MR')
    assert rig.dm.copy_from_dm(0, 3 * PAGE) == b'\x77' * 3 * PAGE


CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import pyverbs.device as d
from pyverbs.mr import DMMR
from pyverbs.pd import PD
import test_dm as t
ctx = d.Context(name=sys.argv[2])
pd = PD(ctx)
dms = [t.alloc(ctx, int(sys.argv[3])) for _ in range(2)]
mrs = [DMMR(pd, 4096, t.ALL, dm, 0) for dm in dms]
dms[0].copy_to_dm(0, b'x' * 4096, 4096)
print('ready', flush=True)
sys.stdin.read()
"""


def dm_areas():
    """How many device memory allocations (their kernel mappings, made in
    bzc_dm_alloc_pages(), maybe inlined into bzc_alloc_dm()) exist."""
    with open('/proc/vmallocinfo') as f:
        return sum('bzc_dm_alloc_pages' in line or 'bzc_alloc_dm' in line
                   for line in f)


def test_killed_process_gives_back_dm(env):
    """A process killed with DMs (a quarter of the device's memory each)
    and DM MRs live: its memory and MRs come back, and the whole of the
    device's memory can be allocated again."""
    total = max_dm_size(env.ctx)
    before_mr = h.rdma_res_summary()['mr']
    areas = dm_areas()
    child = subprocess.Popen(
        [sys.executable, '-c', CHILD,
         os.path.dirname(os.path.abspath(__file__)), h.DEV, str(total // 4)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == 'ready'
        assert h.rdma_res_summary()['mr'] == before_mr + 2
        assert dm_areas() == areas + 2
        assert alloc_errno(env.ctx, total // 2 + PAGE) == errno.ENOMEM
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert h.wait_until(lambda: h.rdma_res_summary()['mr'] == before_mr, 10)
    assert h.wait_until(lambda: dm_areas() == areas, 10), \
        'device memory of the dead process still allocated'
    alloc(env.ctx, total).close()


def test_device_removed_with_dm_mapped():
    """`rdma link delete` while the process has a DM and a DM MR: the
    removal completes, the DM's mapping is revoked (reads give the core's
    zero page) and the memory is freed while the process still has the
    mapping."""
    dev, netdev, addr = 'bzctmp0', 'bzctmpnet0', '198.18.7.1'
    with h.limited_device(dev, netdev, addr, {}):
        areas = dm_areas()
        ctx = d.Context(name=dev)
        try:
            pd = PD(ctx)
            dm = alloc(ctx, 2 * PAGE)
            mr = DMMR(pd, PAGE, ALL, dm, 0)
            dm.copy_to_dm(0, b'\x5a' * 2 * PAGE, 2 * PAGE)
            assert dm_areas() == areas + 1
            cp = h.link_delete(dev, check=False, timeout=30)
            assert cp.returncode == 0, cp.stderr
            assert dm.copy_from_dm(0, 2 * PAGE) == bytes(2 * PAGE), \
                'device memory still reachable after the removal'
            assert h.wait_until(lambda: dm_areas() == areas, 10), \
                'device memory of the removed device not freed'
            # Destroying on a removed device may fail (EIO); the kernel
            # already released everything.
            for obj in (mr, dm, pd):
                try:
                    obj.close()
                except PyverbsRDMAError:
                    pass
        finally:
            ctx.close()
