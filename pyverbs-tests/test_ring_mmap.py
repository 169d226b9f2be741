# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Ring mappings (SQ, RQ, SRQ, CQ rings mapped from the uverbs fd): a ring
lives as long as any mapping of it, its mmap offset is not handed out
again while it is mapped, and a forked child does not inherit it.
Revocation on hot unplug is in test_hotunplug.py."""

import ctypes
import errno
import mmap
import os
import resource
import signal

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.pd import PD
import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_DOFORK = 11
TAIL = 64


def new_ring(before):
    """The one uverbs mapping that is not in `before`: (start, length,
    offset)."""
    new = {a: v for a, v in h.uverbs_ring_maps().items()
           if a not in before}
    assert len(new) == 1, f'expected one new ring mapping, found {new}'
    (start, (length, off)), = new.items()
    return start, length, off


def vmalloc_rings():
    """How many ring allocations (vmalloc areas of bzc_ring_alloc) exist."""
    with open('/proc/vmallocinfo') as f:
        return sum('bzc_ring_alloc' in line for line in f)


def open_with_cmd_fd():
    """A pyverbs Context on the device and its command fd."""
    before = h.uverbs_cmd_fds()
    ctx = d.Context(name=h.DEV)
    fds = h.uverbs_cmd_fds() - before
    if len(fds) != 1:
        ctx.close()
        raise AssertionError(f'cannot tell the command fd: new fds {fds}')
    return ctx, fds.pop()


def map_again(fd, length, off):
    return mmap.mmap(fd, length, mmap.MAP_SHARED,
                     mmap.PROT_READ | mmap.PROT_WRITE, offset=off)


def test_ring_offset_not_reused_while_mapped():
    """A destroyed CQ's ring stays allocated while a second mapping of it
    exists, and its offset is not given to a new ring until that mapping
    is gone: a process never sees another ring through an old offset."""
    ctx, fd = open_with_cmd_fd()
    extra = None
    try:
        before = h.uverbs_ring_maps()
        cq1 = CQ(ctx, 64)
        start, length, off = new_ring(before)
        pattern = os.urandom(TAIL)
        ctypes.memmove(start + length - TAIL, pattern, TAIL)
        extra = map_again(fd, length, off)
        assert extra[-TAIL:] == pattern, 'second mapping shows other memory'
        rings = vmalloc_rings()

        cq1.close()
        assert start not in h.uverbs_ring_maps(), \
            'provider kept the destroyed ring'
        with pytest.raises(OSError) as ex:
            map_again(fd, length, off)
        assert ex.value.errno == errno.EINVAL
        before = h.uverbs_ring_maps()
        cq2 = CQ(ctx, 64)
        _, _, off2 = new_ring(before)
        assert off2 != off, \
            f'offset {off:#x} handed out again while still mapped'
        assert extra[-TAIL:] == pattern, \
            'the destroyed ring changed under its mapping'
        assert vmalloc_rings() == rings + 1, \
            'a destroyed ring was freed while still mapped'

        extra.close()
        extra = None
        assert vmalloc_rings() == rings, \
            'the ring was not freed when its last mapping went'
        cq2.close()
    finally:
        if extra is not None:
            extra.close()
        ctx.close()


def _in_child(fn):
    """Run fn() in a forked child (no core dump); return its wait status."""
    pid = os.fork()
    if pid == 0:
        code = 100
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            code = fn()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def _segv(status):
    return os.WIFSIGNALED(status) and \
        os.WTERMSIG(status) in (signal.SIGSEGV, signal.SIGBUS)


def _describe(status):
    if os.WIFSIGNALED(status):
        return f'killed by signal {os.WTERMSIG(status)}'
    return f'exit {os.WEXITSTATUS(status)}'


def test_fork_child_has_no_ring_mappings():
    """A forked child inherits none of the parent's rings: they are not in
    its address space, reading or writing there faults, the parent's rings
    and traffic are untouched, and MADV_DOFORK cannot undo it."""
    with h.VerbsEnv(second_pd=False) as env:
        end = h.self_connected_qp(env.ctx, env.pd, e.IBV_QPT_RC,
                                  env.gid_index)
        try:
            before = h.uverbs_ring_maps()
            cq = CQ(env.ctx, 64)
            start, length, _ = new_ring(before)
            tail = start + length - TAIL
            pattern = os.urandom(TAIL)
            ctypes.memmove(tail, pattern, TAIL)
            # the QP's SQ and RQ, its two CQs, cq
            assert len(h.uverbs_ring_maps()) >= 5

            st = _in_child(lambda: 3 if h.uverbs_ring_maps() else 0)
            assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, \
                f'child has ring mappings ({_describe(st)})'
            st = _in_child(lambda: 5 if ctypes.string_at(tail, TAIL) ==
                           pattern else 6)
            assert _segv(st), f'child read the parent\'s ring: {_describe(st)}'
            st = _in_child(lambda: ctypes.memset(tail, 0xa5, TAIL) and 7)
            assert _segv(st), \
                f'child wrote where the parent\'s ring is: {_describe(st)}'
            assert ctypes.string_at(tail, TAIL) == pattern, \
                'a child changed the parent\'s ring'

            assert _libc.madvise(start, length, MADV_DOFORK) == -1
            assert ctypes.get_errno() == errno.EINVAL

            # the parent's queues work after the forks
            mr = env.reg(4096, e.IBV_ACCESS_LOCAL_WRITE)
            mr.write(b'x' * 64, 64)
            end.qp.post_recv(h.recv_wr(1, [h.sge(mr, 2048, 64)]))
            end.qp.post_send(h.send_wr(2, e.IBV_WR_SEND, [h.sge(mr, 0, 64)]))
            h.expect_wcs(end.scq, [(2, e.IBV_WC_SUCCESS)], 'send after fork')
            h.expect_wcs(end.rcq, [(1, e.IBV_WC_SUCCESS)], 'recv after fork')
            assert mr.read(64, 2048) == b'x' * 64
            cq.close()
        finally:
            end.close()


def test_ring_pages_not_pinnable():
    """Ring memory is device memory to the process: it cannot be registered
    as an MR (the pages are not the process's to pin)."""
    from pyverbs.mr import MR
    from pyverbs.pyverbs_error import PyverbsRDMAError
    ctx = d.Context(name=h.DEV)
    pd = PD(ctx)
    try:
        before = h.uverbs_ring_maps()
        cq = CQ(ctx, 64)
        start, length, _ = new_ring(before)
        with pytest.raises(PyverbsRDMAError) as ex:
            MR(pd, length, e.IBV_ACCESS_LOCAL_WRITE, address=start)
        assert ex.value.error_code == errno.EFAULT, ex.value
        cq.close()
    finally:
        pd.close()
        ctx.close()
