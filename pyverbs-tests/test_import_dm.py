# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Shared device memory: ibv_import_dm() on a context imported from a dup
of the owner's command fd (ibv_import_device()), as rdma-core's
test_device.SharedDMTest uses it.

The imported DM is the owner's memory: the provider asks the kernel its
length and mmap offset (BZC_METHOD_DM_QUERY) and maps the same pages, so
bytes written through one are read through the other, in this process or
in another one the fd was passed to, and a DM MR over the imported DM
carries RDMA traffic into them.  A handle that names nothing is ENOENT,
one that names another kind of object EINVAL (the kernel's lookup).
ibv_unimport_dm() unmaps it and leaves the DM to its owner, before or
after the owner frees it; nothing stays mapped or allocated.
"""

import errno
import os
import subprocess
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.mr import DMMR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
import pytest

import bzc_helpers as h
from bzc_helpers import expect_wcs, rdma_wr, sge
from test_dm import ALL, PAGE, alloc, dm_areas

pytestmark = pytest.mark.keeps_netdev

# Not a whole number of pages: the import must learn the exact length.
SIZE = 3 * PAGE + 12


def uverbs_maps():
    """How many mappings of a uverbs device this process has."""
    with open('/proc/self/maps') as f:
        return sum('/dev/infiniband/uverbs' in line for line in f)


@pytest.fixture
def env():
    with h.VerbsEnv(second_pd=False) as en:
        yield en


@pytest.fixture
def imp(env):
    """A context imported from a dup of env.ctx's command fd."""
    ctx = Context(cmd_fd=os.dup(env.ctx.cmd_fd))
    yield ctx
    ctx.close()


def test_import_sees_owner_bytes_and_back(env, imp):
    """Bytes written through the original DM are read through the
    imported one, and the other way round; the imported DM has the
    original's handle and exact length (a copy past it is EINVAL)."""
    areas, maps = dm_areas(), uverbs_maps()
    with alloc(env.ctx, SIZE) as dm:
        idm = d.DM(imp, handle=dm.handle)
        try:
            assert idm.handle == dm.handle
            assert dm_areas() == areas + 1, 'the import allocated memory'
            assert uverbs_maps() == maps + 2
            data = os.urandom(SIZE)
            dm.copy_to_dm(0, data, SIZE)
            assert idm.copy_from_dm(0, SIZE) == data
            part = os.urandom(PAGE + 8)
            idm.copy_to_dm(PAGE - 4, part, len(part))
            want = data[:PAGE - 4] + part + data[2 * PAGE + 4:]
            assert dm.copy_from_dm(0, SIZE) == want
            assert idm.copy_from_dm(SIZE - 4, 4) == want[-4:]
            for bad_off, bad_len in ((SIZE, 4), (SIZE - 4, 8)):
                with pytest.raises(PyverbsRDMAError) as ex:
                    idm.copy_from_dm(bad_off, bad_len)
                assert ex.value.error_code == errno.EINVAL
        finally:
            idm.unimport()
        assert uverbs_maps() == maps + 1, 'unimport left the mapping'
        # The owner's DM is untouched by the unimport.
        assert dm.copy_from_dm(0, SIZE) == want
    assert uverbs_maps() == maps
    assert dm_areas() == areas, 'the DM outlived its free'


def test_reg_dm_mr_on_imported_dm(env, imp):
    """A DM MR registered over the imported DM (on the imported PD)
    carries an RDMA WRITE from the owner's QP into the DM: the owner
    reads the bytes there."""
    before = h.rdma_res_summary()
    dm = alloc(env.ctx, SIZE)
    ipd = PD(imp, handle=env.pd.handle)
    idm = d.DM(imp, handle=dm.handle)
    host = env.reg(2 * PAGE, h.access_all())
    pair = h.QPPair(env)
    mr = None
    try:
        dm.copy_to_dm(0, b'\xee' * SIZE, SIZE)
        off, length = PAGE + 64, 2 * PAGE - 128
        mr = DMMR(ipd, length, ALL, idm, off)
        assert h.rdma_res_summary()['mr'] == before['mr'] + 2
        data = os.urandom(PAGE + 100)
        host.write(data, len(data), 0)
        pair.a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE,
                                    [sge(host, 0, len(data))], mr.rkey, 100))
        expect_wcs(pair.a.scq, [(1, e.IBV_WC_SUCCESS)],
                   'write into imported DM MR')
        want = (b'\xee' * (off + 100) + data +
                b'\xee' * (SIZE - off - 100 - len(data)))
        assert dm.copy_from_dm(0, SIZE) == want
        assert idm.copy_from_dm(0, SIZE) == want
        # And back out: an RDMA READ from the DM MR into host memory.
        pair.a.qp.post_send(rdma_wr(2, e.IBV_WR_RDMA_READ,
                                    [sge(host, PAGE, 256)], mr.rkey, 100))
        expect_wcs(pair.a.scq, [(2, e.IBV_WC_SUCCESS)],
                   'read from imported DM MR')
        assert host.read(256, PAGE) == data[:256]
    finally:
        pair.close()
        if mr is not None:
            mr.close()
        idm.unimport()
        ipd.unimport()
        ipd.close()
        dm.close()
    assert h.rdma_res_summary()['mr'] == before['mr'] + 1   # host MR


def test_import_bad_handle(env, imp):
    """No DM by that handle: ENOENT (no object at all: a handle never
    given out, or a freed DM's); a handle naming another kind of object
    (a PD): EINVAL.  The failed import leaves nothing mapped."""
    maps = uverbs_maps()
    dm = alloc(env.ctx, PAGE)
    gone = dm.handle
    dm.close()
    for handle, err in ((gone, errno.ENOENT),
                        (0x7ffffff0, errno.ENOENT),
                        (env.pd.handle, errno.EINVAL)):
        with pytest.raises(PyverbsRDMAError) as ex:
            d.DM(imp, handle=handle)
        assert ex.value.error_code == err, (handle, ex.value)
    assert uverbs_maps() == maps


def test_free_by_owner_then_unimport(env, imp):
    """The owner frees the DM while it is imported: the count against
    max_dm_size ends at once, the pages live until the import unmaps
    them, and ibv_unimport_dm() after that frees the rest."""
    total = env.ctx.query_device_ex().max_dm_size
    areas, maps = dm_areas(), uverbs_maps()
    dm = alloc(env.ctx, total)
    idm = d.DM(imp, handle=dm.handle)
    dm.close()
    assert dm_areas() == areas + 1, 'the imported mapping holds the pages'
    alloc(env.ctx, total).close()   # the device's memory is free again
    idm.unimport()
    assert uverbs_maps() == maps
    assert dm_areas() == areas, 'device memory still allocated'


CHILD = r"""
import sys
import pyverbs.device as d
fd, handle, n = map(int, sys.argv[1:])
ctx = d.Context(cmd_fd=fd)
dm = d.DM(ctx, handle=handle)
data = dm.copy_from_dm(0, n)
dm.copy_to_dm(0, data[::-1], n)
dm.unimport()
ctx.close()
print(data.hex(), flush=True)
"""


def test_import_in_another_process(env):
    """A process the command fd was passed to imports the device and the
    DM: it reads what the owner wrote, and the owner reads what it
    wrote."""
    n = 2 * PAGE
    data = os.urandom(n)
    fd = os.dup(env.ctx.cmd_fd)
    try:
        with alloc(env.ctx, n) as dm:
            dm.copy_to_dm(0, data, n)
            out = subprocess.run(
                [sys.executable, '-c', CHILD, str(fd), str(dm.handle),
                 str(n)], pass_fds=(fd,), capture_output=True, text=True,
                timeout=120)
            assert out.returncode == 0, out.stderr
            assert bytes.fromhex(out.stdout.strip()) == data
            assert dm.copy_from_dm(0, n) == data[::-1]
    finally:
        os.close(fd)
