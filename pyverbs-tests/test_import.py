# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Shared objects: ibv_import_device() on a dup of a context's command fd,
ibv_import_pd() and ibv_import_mr() on it, as rdma-core's test_shared_pd
uses them. The imported context is the same kernel ucontext: it learns
the capabilities through bzc's attribute on QUERY_CONTEXT, its queues
use the imported PD, and the imported MR's keys are the original's."""

import errno
import os

import pytest

import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SendWR

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev


@pytest.fixture
def shared():
    """An owner context with a PD and an MR, and a context imported from
    a dup of its command fd with both imported."""
    owner = Context(name=h.DEV)
    pd = PD(owner)
    mr = MR(pd, 8192, h.access_all())
    imp = Context(cmd_fd=os.dup(owner.cmd_fd))
    ipd = PD(imp, handle=pd.handle)
    imr = MR(ipd, handle=mr.handle, address=mr.buf)
    yield owner, pd, mr, imp, ipd, imr
    imr.unimport()
    ipd.unimport()
    ipd.close()
    imp.close()
    mr.close()
    pd.close()
    owner.close()


def test_imported_keys_and_device(shared):
    """The imported MR has the original's keys and length; the imported
    context answers queries like the original."""
    owner, _, mr, imp, _, imr = shared
    assert (imr.lkey, imr.rkey, imr.length) == (mr.lkey, mr.rkey, 8192)
    assert imp.query_device().max_qp == owner.query_device().max_qp
    assert imp.num_comp_vectors == owner.num_comp_vectors


def test_traffic_on_imported_pd(shared):
    """An RC pair created on the imported context and PD writes with the
    imported MR's keys into the owner's memory: the bytes arrive there."""
    _, _, mr, imp, ipd, imr = shared
    gid_index = h.find_ipv4_gid_index(imp)
    a = h.QPEnd(imp, ipd, e.IBV_QPT_RC)
    b = h.QPEnd(imp, ipd, e.IBV_QPT_RC)
    try:
        h.connect_qps(a, b, gid_index)
        payload = bytes((7 * i + 3) & 0xff for i in range(1000))
        mr.write(payload, len(payload), 0)
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[h.sge(mr, 0, len(payload), lkey=imr.lkey)])
        wr.set_wr_rdma(imr.rkey, mr.buf + 4096)
        a.qp.post_send(wr)
        h.expect_wcs(a.scq, [(1, e.IBV_WC_SUCCESS)], 'write')
        assert mr.read(len(payload), 4096) == payload
    finally:
        a.close()
        b.close()


def test_import_unknown_mr(shared):
    """A handle that names no MR is refused by the kernel's QUERY_MR."""
    _, _, _, _, ipd, imr = shared
    with pytest.raises(PyverbsRDMAError) as ex:
        MR(ipd, handle=imr.handle + 1000)
    assert ex.value.error_code in (errno.ENOENT, errno.EINVAL)
