# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Protection domains, kernel-side handle checking and cleanup, and the
verbs that do not exist yet."""

import errno
import os
import subprocess
import sys
import textwrap

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
import pytest

import bzc_helpers as h
from verbs_ctypes import RawContext, raw_dealloc_pd


def pd_count():
    s = h.rdma_res_summary()
    assert s is not None, f'{h.DEV} missing from `rdma resource show`'
    return s.get('pd', 0)


def test_alloc_dealloc_repeatedly(ctx):
    base = pd_count()
    for _ in range(500):
        pd = PD(ctx)
        pd.close()
    assert pd_count() == base


def test_many_pds_at_once(ctx):
    base = pd_count()
    pds = [PD(ctx) for _ in range(1000)]
    try:
        handles = [p.handle for p in pds]
        assert len(set(handles)) == len(handles), 'PD handles not unique'
        assert pd_count() == base + len(pds)
    finally:
        # free in an interleaved order
        for p in pds[1::2] + pds[::2]:
            p.close()
    assert pd_count() == base


def test_pds_on_several_contexts():
    base = pd_count()
    ctxs = [d.Context(name=h.DEV) for _ in range(8)]
    try:
        pds = [PD(c) for c in ctxs for _ in range(16)]
        assert pd_count() == base + len(pds)
        # handles are per-context (per uverbs file): closing one context
        # frees exactly its own PDs
        ctxs[0].close()
        assert pd_count() == base + len(pds) - 16
    finally:
        for c in ctxs:
            c.close()
    assert pd_count() == base


def test_raw_dealloc_positive_control(raw_ctx):
    """The raw uverbs DEALLOC_PD write used below works on a live handle
    (otherwise the stale-handle test could pass for the wrong reason)."""
    base = pd_count()
    pd = raw_ctx.alloc_pd()
    handle = RawContext.pd_handle(pd)
    assert pd_count() == base + 1
    assert raw_dealloc_pd(raw_ctx.cmd_fd, handle) == 0
    assert pd_count() == base
    # the library's own dealloc now finds the handle gone and says so
    rc = RawContext.dealloc_pd(pd)
    assert rc in (errno.EINVAL, errno.ENOENT), \
        f'ibv_dealloc_pd of a kernel-freed PD returned {rc}'


def test_dealloc_stale_handle(raw_ctx):
    base = pd_count()
    pd = raw_ctx.alloc_pd()
    handle = RawContext.pd_handle(pd)
    assert RawContext.dealloc_pd(pd) == 0
    assert pd_count() == base
    rc = raw_dealloc_pd(raw_ctx.cmd_fd, handle)
    assert rc in (errno.EINVAL, errno.ENOENT), \
        f'DEALLOC_PD of a freed handle: {os.strerror(rc) if rc else "success"}'
    # never-allocated handles too
    for bogus in (handle + 1000, 0x7fffffff, 0xffffffff):
        rc = raw_dealloc_pd(raw_ctx.cmd_fd, bogus)
        assert rc in (errno.EINVAL, errno.ENOENT), (bogus, rc)
    # and the context still works afterwards
    pd2 = raw_ctx.alloc_pd()
    assert RawContext.dealloc_pd(pd2) == 0


def test_dealloc_other_contexts_handle():
    """A PD handle is only meaningful on its own uverbs file."""
    a = RawContext(h.DEV)
    b = RawContext(h.DEV)
    try:
        base = pd_count()
        pda = a.alloc_pd()
        ha = RawContext.pd_handle(pda)
        # b has no PD with that handle (it has none at all)
        rc = raw_dealloc_pd(b.cmd_fd, ha)
        assert rc in (errno.EINVAL, errno.ENOENT), rc
        assert pd_count() == base + 1, "another context freed a's PD"
        assert RawContext.dealloc_pd(pda) == 0
    finally:
        b.close()
        a.close()


def test_pd_freed_on_context_close():
    """ibv_close_device() with PDs still allocated: the kernel frees them."""
    base = pd_count()
    c = RawContext(h.DEV)
    for _ in range(10):
        c.alloc_pd()                        # deliberately not deallocated
    assert pd_count() == base + 10
    c.close()
    assert h.wait_until(lambda: pd_count() == base, 5), \
        f'PDs left after context close: {pd_count() - base}'
    assert h.rdma_res_summary().get('ctx', 0) == 0


def test_pd_freed_on_process_exit():
    """A process that dies holding a context and PDs leaves nothing behind."""
    base = pd_count()
    here = os.path.dirname(os.path.abspath(__file__))
    code = textwrap.dedent(f'''
        import os, sys, signal
        sys.path.insert(0, {here!r})
        from verbs_ctypes import RawContext
        c = RawContext({h.DEV!r})
        for _ in range(20):
            c.alloc_pd()
        print('HELD', flush=True)
        sys.stdin.readline()
        os.kill(os.getpid(), signal.SIGKILL)
    ''')
    p = subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == 'HELD', p.stderr.read()
        assert pd_count() == base + 20
        p.stdin.write('go\n')
        p.stdin.flush()
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -9
    assert h.wait_until(lambda: pd_count() == base, 10), \
        f'PDs left after process exit: {pd_count() - base}'
    assert h.wait_until(lambda: h.rdma_res_summary().get('ctx', 0) == 0, 10)


def test_pyverbs_context_close_closes_pds():
    base = pd_count()
    c = d.Context(name=h.DEV)
    pds = [PD(c) for _ in range(5)]
    c.close()
    assert pd_count() == base
    for p in pds:
        p.close()                           # idempotent after the context


def test_parent_domain(ctx):
    """ibv_alloc_parent_domain over a PD: MRs and extended CQs can be made
    on it (rdma-core's test_parent_domain runs traffic through it); it
    does not nest (EINVAL), and once it is closed its PD is whole and
    releases in the kernel."""
    from pyverbs.cq import CQEX, CqInitAttrEx
    from pyverbs.mr import MR
    from pyverbs.pd import ParentDomain, ParentDomainInitAttr
    base = pd_count()
    pd = PD(ctx)
    parent = ParentDomain(ctx, attr=ParentDomainInitAttr(pd=pd))
    assert pd_count() == base + 1, 'a parent domain is no kernel PD'
    with pytest.raises(PyverbsRDMAError) as ex:
        ParentDomain(ctx, attr=ParentDomainInitAttr(pd=parent))
    assert ex.value.error_code == errno.EINVAL, str(ex.value)

    def cq_on(domain):
        return CQEX(ctx, CqInitAttrEx(
            cqe=16, parent_domain=domain,
            comp_mask=e.IBV_CQ_INIT_ATTR_MASK_PD))
    # (a plain PD as a CQ's parent domain: pyverbs refuses it itself)
    cq = cq_on(parent)
    mr = MR(parent, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    assert mr.lkey
    mr.close()
    cq.close()
    parent.close()
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    mr.close()
    pd.close()
    assert pd_count() == base

