# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""dma-buf MRs on bzc0 (ibv_reg_dmabuf_mr), over buffers of a real
exporter this project did not write: vgem's, through DRM PRIME
(vgem.py).

The MR covers [offset, offset + length) of the buffer, addressed from an
iova in the same place within a page; RDMA WRITE and READ on an RC QP and
bulk WRITE and READ move data into and out of it, which the buffer's own
mapping shows.  The MR holds the buffer: it works after every other
reference (fd, mapping, GEM handle) is gone.  A range outside the buffer,
a length of 0, an fd that is not a dma-buf, or an iova in another place
within a page than the offset are refused.  A process killed with
dma-buf MRs gives them back.
"""

import errno
import mmap
import os
import random
import signal
import subprocess
import sys

import pytest

import bzc_helpers as h
import bzcdv as dv
import vgem

pytestmark = pytest.mark.keeps_netdev

PAGE = os.sysconf('SC_PAGESIZE')
IOVA = 0x7e5a_0000_0000


@pytest.fixture(scope='module')
def card():
    path, reason = vgem.card()
    if not path:
        pytest.skip(reason)
    return path


@pytest.fixture
def c(card):
    ctx = dv.Ctx(h.DEV)
    yield ctx
    ctx.close()


def test_rdma_write_read_vgem(c):
    """RDMA WRITE into and READ out of a vgem buffer through a dma-buf MR
    that starts one page and 100 bytes into it."""
    rnd = random.Random(1)
    size, off, ln = 8 * PAGE, PAGE + 100, 5 * PAGE + 7
    with vgem.Buffer(size) as vb:
        mr = c.dmabuf_mr(off, ln, IOVA + 100, vb.fd)
        host = c.buf(2 * ln)
        hmr = c.mr(host.addr, 2 * ln)
        qp = c.rc_qp(c.loopback_gid()[0])
        vb.map[:] = b'\xa5' * size

        data = rnd.randbytes(ln - 64)
        dv.write(host.addr, data)
        wc = qp.run_rdma(1, dv.WR_RDMA_WRITE, host.addr, len(data),
                         hmr.lkey, IOVA + 100 + 32, mr.rkey)
        assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
        assert vb.map[off + 32:off + 32 + len(data)] == data
        assert vb.map[:off + 32] == b'\xa5' * (off + 32), 'wrote before'
        end = off + 32 + len(data)
        assert vb.map[end:] == b'\xa5' * (size - end), 'wrote after'

        back = rnd.randbytes(ln)
        vb.map[off:off + ln] = back
        wc = qp.run_rdma(2, dv.WR_RDMA_READ, host.addr + ln, ln, hmr.lkey,
                         IOVA + 100, mr.rkey)
        assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
        assert dv.read(host.addr + ln, ln) == back

        # Past the MR's end: a remote access error, nothing written.
        wc = qp.run_rdma(3, dv.WR_RDMA_WRITE, host.addr, 16, hmr.lkey,
                         IOVA + 100 + ln - 8, mr.rkey)
        assert wc.status == dv.WC_REM_ACCESS_ERR, dv.wc_str(wc)
        assert vb.map[off:off + ln] == back


@pytest.mark.parametrize('op', [dv.BULK_WRITE, dv.BULK_READ])
def test_bulk_vgem(c, op):
    """A bulk WRITE into and a bulk READ out of a vgem buffer (the far
    range), 2 MiB at an offset that is not page aligned."""
    n, off = 2 << 20, 4096 + 12
    with vgem.Buffer(n + 2 * PAGE) as vb:
        pd2 = c.alloc_pd()
        a = c.chan(c.cq(16))
        b = c.chan(c.cq(16), pd=pd2)
        dv.connect_pair(a, b)
        far = c.dmabuf_mr(0, vb.size, IOVA, vb.fd, pd=pd2)
        local = c.buf(n)
        lmr = c.mr(local.addr, n)
        block = dv.pattern(op + 5)
        if op == dv.BULK_WRITE:
            dv.fill(local.addr, n, block)
            vb.map[:] = b'\xa5' * vb.size
        else:
            dv.zero(local.addr, n, 0xa5)
            vb.map[off:off + n] = dv.expected(block, 0, n)
        wc = a.run([{'op': op, 'wr_id': 9, 'sges': [(local.addr, n, lmr.lkey)],
                     'raddr': IOVA + off, 'rkey': far.rkey, 'rchan': b.num}])[0]
        assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
        assert vb.map[off:off + n] == dv.read(local.addr, n)
        assert dv.read(local.addr, n) == dv.expected(block, 0, n)
        if op == dv.BULK_WRITE:
            assert vb.map[:off] == b'\xa5' * off
            assert vb.map[off + n:] == b'\xa5' * (vb.size - off - n)


def test_mr_holds_the_buffer(c):
    """With the dma-buf fd, its mapping and the GEM handle gone, the MR
    still reaches the buffer."""
    size = 4 * PAGE
    vb = vgem.Buffer(size)
    vb.map[:] = b'\x3c' * size
    mr = c.dmabuf_mr(0, size, IOVA, vb.fd)
    vb.close()
    host = c.buf(size)
    hmr = c.mr(host.addr, size)
    qp = c.rc_qp(c.loopback_gid()[0])
    dv.write(host.addr, b'\x5a' * 64)
    wc = qp.run_rdma(1, dv.WR_RDMA_WRITE, host.addr, 64, hmr.lkey,
                     IOVA + size - 64, mr.rkey)
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    dv.zero(host.addr, size)
    wc = qp.run_rdma(2, dv.WR_RDMA_READ, host.addr, size, hmr.lkey, IOVA,
                     mr.rkey)
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    assert dv.read(host.addr, size) == b'\x3c' * (size - 64) + b'\x5a' * 64


def reg_errno(c, offset, length, iova, fd):
    with pytest.raises(dv.DvError) as ex:
        c.dmabuf_mr(offset, length, iova, fd)
    return ex.value.errno


def test_bad_registrations(c):
    size = 4 * PAGE
    with vgem.Buffer(size) as vb:
        assert reg_errno(c, 0, size + 1, IOVA, vb.fd) == errno.EINVAL
        assert reg_errno(c, PAGE, size, IOVA, vb.fd) == errno.EINVAL
        assert reg_errno(c, 1 << 63, PAGE, IOVA, vb.fd) == errno.EINVAL
        assert reg_errno(c, 0, 0, IOVA, vb.fd) == errno.EINVAL
        assert reg_errno(c, 8, PAGE, IOVA + 16, vb.fd) == errno.EINVAL
        with open('/dev/null') as f:
            assert reg_errno(c, 0, PAGE, IOVA, f.fileno()) == errno.EINVAL
        fd = os.dup(vb.fd)
        os.close(fd)
        assert reg_errno(c, 0, PAGE, IOVA, fd) == errno.EBADF
        # The buffer is fine for a good registration afterwards.
        c.dmabuf_mr(8, size - 8, IOVA + 8, vb.fd).close()


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import bzcdv as dv, vgem
c = dv.Ctx(sys.argv[2])
bufs = [vgem.Buffer(1 << 20) for _ in range(3)]
mrs = [c.dmabuf_mr(0, 1 << 20, 0, b.fd) for b in bufs]
print('ready', flush=True)
sys.stdin.read()
"""


def test_killed_process_gives_back_dmabuf_mrs(card):
    before = h.rdma_res_summary()['mr']
    child = subprocess.Popen(
        [sys.executable, '-c', CHILD,
         os.path.dirname(os.path.abspath(__file__)), h.DEV],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == 'ready'
        assert h.rdma_res_summary()['mr'] == before + 3
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert h.wait_until(lambda: h.rdma_res_summary()['mr'] == before, 10)


# --------------------------------------------------------------------------
# Device memory: bulk transfers, and exported as a dma-buf (bzcdv_export_dm)
# --------------------------------------------------------------------------

DM_ACCESS = dv.ACCESS_ZERO_BASED | dv.ACCESS_ALL


@pytest.mark.parametrize('op', [dv.BULK_WRITE, dv.BULK_READ])
def test_bulk_dm(c, op):
    """A bulk WRITE into and a bulk READ out of a DM MR (the far range)
    that starts 100 bytes into the DM."""
    n = 256 << 10
    pd2 = c.alloc_pd()
    a = c.chan(c.cq(16))
    b = c.chan(c.cq(16), pd=pd2)
    dv.connect_pair(a, b)
    dm = c.dm(n + PAGE)
    far = dm.mr(pd2, 100, n, DM_ACCESS)
    local = c.buf(n)
    lmr = c.mr(local.addr, n)
    block = dv.pattern(op + 11)
    if op == dv.BULK_WRITE:
        dv.fill(local.addr, n, block)
        dm.to(0, b'\xa5' * (n + PAGE))
    else:
        dv.zero(local.addr, n, 0xa5)
        dm.to(100, dv.expected(block, 0, n))
    wc = a.run([{'op': op, 'wr_id': 4, 'sges': [(local.addr, n, lmr.lkey)],
                 'raddr': 0, 'rkey': far.rkey, 'rchan': b.num}])[0]
    assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
    assert dv.read(local.addr, n) == dv.expected(block, 0, n)
    assert dm.frm(100, n) == dv.expected(block, 0, n)
    if op == dv.BULK_WRITE:
        assert dm.frm(0, 100) == b'\xa5' * 100
        assert dm.frm(100 + n, PAGE - 100) == b'\xa5' * (PAGE - 100)


def test_export_dm_import_back(c):
    """bzcdv_export_dm(): the dma-buf shows the DM's bytes (mmap), bzc's
    own ibv_reg_dmabuf_mr imports it, RDMA WRITE and READ through that MR
    reach the DM, and the dma-buf keeps the memory after ibv_free_dm()."""
    rnd = random.Random(3)
    size = 3 * PAGE + 100
    dm = c.dm(size)
    data = rnd.randbytes(size)
    dm.to(0, data)
    fd = dm.export()
    try:
        assert os.lseek(fd, 0, os.SEEK_END) == 4 * PAGE
        m = mmap.mmap(fd, 4 * PAGE)
        assert m[:size] == data
        assert m[size:] == bytes(4 * PAGE - size)
        mr = c.dmabuf_mr(PAGE, 2 * PAGE, IOVA, fd)
        host = c.buf(2 * PAGE)
        hmr = c.mr(host.addr, 2 * PAGE)
        qp = c.rc_qp(c.loopback_gid()[0])
        new = rnd.randbytes(1000)
        dv.write(host.addr, new)
        wc = qp.run_rdma(1, dv.WR_RDMA_WRITE, host.addr, 1000, hmr.lkey,
                         IOVA + 24, mr.rkey)
        assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
        data = data[:PAGE + 24] + new + data[PAGE + 1024:]
        assert dm.frm(0, size) == data
        assert m[:size] == data, 'the dma-buf mapping shows other bytes'

        dm.close()
        # The dma-buf and its MR hold the memory: still readable.
        wc = qp.run_rdma(2, dv.WR_RDMA_READ, host.addr, 2 * PAGE, hmr.lkey,
                         IOVA, mr.rkey)
        assert wc.status == dv.WC_SUCCESS, dv.wc_str(wc)
        assert dv.read(host.addr, 2 * PAGE) == data[PAGE:3 * PAGE]
        m.close()
    finally:
        os.close(fd)


def test_export_dm_bad_input(c):
    dm = c.dm(PAGE)
    with pytest.raises(dv.DvError) as ex:
        dm.export(comp_mask=1)
    assert ex.value.errno == errno.EINVAL
    # Every export is its own dma-buf of the same memory.
    fds = [dm.export(), dm.export()]
    try:
        assert fds[0] != fds[1]
        dm.to(0, b'\x42' * 8)
        for fd in fds:
            m = mmap.mmap(fd, PAGE)
            assert m[:8] == b'\x42' * 8
            m.close()
    finally:
        for fd in fds:
            os.close(fd)
