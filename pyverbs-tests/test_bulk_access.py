# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""What the MR cache may pin, and for whom (bzcdv_reg_mr_cached(3);
emu/README.md "Bulk transfers").

* Cached MRs are registered only by the process whose memory the PD's
  cache pins (EPERM for a forked child).
* Pinning checks its limits before it allocates: huge requests fail with a
  clean errno and a quiet kernel log.
"""

import ctypes
import errno
import os

import pytest

import bzc_helpers as h
import bzcdv as dv
from test_bulk import Peer, bulk, c, caps, pinned_pages  # noqa: F401

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40

pytestmark = pytest.mark.keeps_netdev


@pytest.fixture
def cache_on(c, caps):
    if not caps.mr_cache_max_bytes:
        pytest.skip('MR cache disabled (mr_cache_max_mb=0)')


# --------------------------------------------------------------------------
# The MR cache
# --------------------------------------------------------------------------

def test_cached_mr_reg_in_forked_child_eperm(c, cache_on):
    """A forked child holds the parent's uverbs fd and PD but not its
    memory: bzcdv_reg_mr_cached() on the parent's PD fails with EPERM and
    pins nothing."""
    n = 1 * MiB
    buf = c.buf(n)
    dv.zero(buf.addr, n, 1)
    s0 = c.cache_stats()
    pins0 = pinned_pages()
    pid = os.fork()
    if pid == 0:
        code = 255
        try:
            m = dv.lib.bzcdv_reg_mr_cached(c.pd, buf.addr, n, dv.ACCESS_ALL)
            code = 0 if m else ctypes.get_errno()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), status
    assert os.WEXITSTATUS(status) == errno.EPERM, \
        f'child got {os.strerror(os.WEXITSTATUS(status))}, not EPERM'
    s1 = c.cache_stats()
    assert (s1.misses, s1.pinned_bytes, s1.entries) == \
        (s0.misses, s0.pinned_bytes, s0.entries), (s0.as_dict(), s1.as_dict())
    assert pinned_pages() <= pins0, (pins0, pinned_pages())
    # the parent still registers
    assert c.cached(buf.addr, n).lkey


@pytest.mark.parametrize('backing', ['prot_none', 'noreserve_rw'])
def test_cached_mr_2tib_enomem(c, cache_on, backing):
    """2 TiB through the MR cache, over address space nothing backs: ENOMEM
    at once (more pages than one registration holds), no kernel warning,
    nothing pinned."""
    size = 2 * TiB
    addr = dv.reserve(size) if backing == 'prot_none' else dv.reserve_rw(size)
    try:
        pins0 = pinned_pages()
        with pytest.raises(OSError) as e:
            dv.CachedMr(c.pd, addr, size)
        assert e.value.errno == errno.ENOMEM, e.value
        assert pinned_pages() <= pins0
        assert c.cache_stats().pinned_bytes == 0
    finally:
        dv.munmap(addr, size)


def test_cached_mr_unmapped_efault(c, cache_on):
    """512 GiB of PROT_NONE address space: EFAULT, found before any page
    array is allocated or anything pinned."""
    size = 512 * GiB
    addr = dv.reserve(size)
    try:
        with pytest.raises(OSError) as e:
            dv.CachedMr(c.pd, addr, size)
        assert e.value.errno == errno.EFAULT, e.value
    finally:
        dv.munmap(addr, size)


@pytest.mark.parametrize('backing', ['prot_none', 'noreserve_rw'])
def test_reg_mr_2tib_einval(c, backing):
    """ibv_reg_mr of 2 TiB (above max_mr_size, 1 TiB): EINVAL before
    anything is pinned, whatever backs the range."""
    size = 2 * TiB
    addr = dv.reserve(size) if backing == 'prot_none' else dv.reserve_rw(size)
    try:
        pins0 = pinned_pages()
        with pytest.raises(OSError) as e:
            dv.Mr(c.pd, addr, size)
        assert e.value.errno == errno.EINVAL, e.value
        assert pinned_pages() <= pins0
    finally:
        dv.munmap(addr, size)


def test_reg_mr_unmapped_efault(c):
    """ibv_reg_mr of 512 GiB of PROT_NONE address space: EFAULT."""
    size = 512 * GiB
    addr = dv.reserve(size)
    try:
        with pytest.raises(OSError) as e:
            dv.Mr(c.pd, addr, size)
        assert e.value.errno == errno.EFAULT, e.value
    finally:
        dv.munmap(addr, size)


def test_over_memlock_enomem(bulk):
    """A process without CAP_IPC_LOCK and RLIMIT_MEMLOCK of 256 KiB: a
    cached MR within the limit works; over it (1 MiB, and 2 TiB of
    unbacked address space) both the cache and ibv_reg_mr fail with
    ENOMEM before allocating or pinning anything."""
    limit = 256 * KiB
    pins0 = pinned_pages()
    p = Peer('memlock', limit)
    try:
        got = p.read(120)
    finally:
        p.close()
    assert got == {'cached_within': 0, 'cached_over': errno.ENOMEM,
                   'cached_2tib': errno.ENOMEM, 'reg_over': errno.ENOMEM,
                   'pinned_bytes': limit // 2}, got
    assert h.wait_until(lambda: pinned_pages() <= pins0, timeout=30), \
        (pins0, pinned_pages())
