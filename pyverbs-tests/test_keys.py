# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""MR and MW keys on bzc0: a key is the object's index in the device's
key table (key >> 8) and a byte the device picks at random, different
from the byte of the index's previous object.  A stale key, kept after
its MR was deregistered, does not resolve to the MR that reuses its
index later (remote access: IBV_WC_REM_ACCESS_ERR, local access:
IBV_WC_LOC_PROT_ERR, memory untouched either way), and the byte of a
key is not a function of its index (two devices differ).

The reuse is reached on a device made with small max_mr and max_mw, whose
key table has max_mr + max_mw indexes (emu/README.md): a few hundred
allocations instead of bzc0's 256 Ki."""

import ctypes
import os

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
import pytest

import bzc_helpers as h
import bzcdv as dv
from bzc_helpers import expect_wcs, rdma_wr, sge

SZ = 4096
VP = ctypes.c_void_p


class IbvMw(ctypes.Structure):
    _fields_ = [('context', VP), ('pd', VP), ('rkey', ctypes.c_uint32),
                ('handle', ctypes.c_uint32), ('type', ctypes.c_int)]


# ibv_alloc_mw()/ibv_dealloc_mw() are inline: context->ops.alloc_mw (slot
# 7) and .dealloc_mw (slot 9) of struct ibv_context_ops, rdma-core 44.
_ALLOC_MW = ctypes.CFUNCTYPE(ctypes.POINTER(IbvMw), VP, ctypes.c_int)
_DEALLOC_MW = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(IbvMw))
# The device of the reuse test: its key table has max_mr + max_mw indexes.
KEYS_DEV, KEYS_NETDEV, KEYS_ADDR = 'bzctmp', 'bzctmp0', '198.18.8.1'
KEYS_LIMITS = {'max_mr': 64, 'max_mw': 64}
# At most this many allocations before the cyclic allocator comes back
# to an index, with room to spare.
CHURN_LIMIT = 2 * sum(KEYS_LIMITS.values())


class MwChurn:
    """Allocates and frees type 1 windows through ctypes (cheap: no
    pinning, and pyverbs' object overhead is not paid) to move the
    device's cyclic key allocator along."""

    def __init__(self, name=KEYS_DEV):
        self.c = dv.Ctx(name)
        ops = ctypes.cast(self.c.p + 8, ctypes.POINTER(VP * 32)).contents
        self._alloc = _ALLOC_MW(ops[7])
        self._dealloc = _DEALLOC_MW(ops[9])

    def step(self):
        """The index (key >> 8) a window allocated and freed now got."""
        mw = self._alloc(self.c.pd, e.IBV_MW_TYPE_1)
        assert mw, f'ibv_alloc_mw: errno {ctypes.get_errno()}'
        index = mw.contents.rkey >> 8
        assert self._dealloc(mw) == 0, 'ibv_dealloc_mw failed'
        return index

    def until_next_is(self, index):
        """Churn until the allocator's next index is `index` (free, as is
        index - 1): a window lands on index - 1 and is freed again."""
        for _ in range(CHURN_LIMIT):
            if self.step() == index - 1:
                return
        raise AssertionError(f'no window landed on index {index - 1} in '
                             f'{CHURN_LIMIT} allocations')

    def close(self):
        self.c.close()


@pytest.fixture
def env():
    """VerbsEnv on KEYS_DEV, made with KEYS_LIMITS."""
    with h.limited_device(KEYS_DEV, KEYS_NETDEV, KEYS_ADDR, KEYS_LIMITS), \
            h.VerbsEnv(second_pd=False, dev=KEYS_DEV, ipv4=KEYS_ADDR) as en:
        assert en.ctx.query_device().max_mr == KEYS_LIMITS['max_mr']
        en.mr_a = en.reg(SZ, h.access_all())
        yield en


@pytest.fixture
def pairs(env):
    with h.ClosingFactory(h.QPPair, env) as make:
        yield make


def _reuse_index(env):
    """Register an MR, deregister it, and register another that lands on
    the same index.  Returns (the stale key, the new MR)."""
    # The index before it is freed too, so that a window can land there.
    for _ in range(8):
        guard = MR(env.pd, SZ, h.access_all())
        old = MR(env.pd, SZ, h.access_all())
        stale, index = old.rkey, old.rkey >> 8
        adjacent = guard.rkey >> 8 == index - 1
        old.close()
        guard.close()
        if adjacent:
            break
    else:
        raise AssertionError('no two registrations on adjacent indexes')
    churn = MwChurn()
    try:
        churn.until_next_is(index)
    finally:
        churn.close()
    new = MR(env.pd, SZ, h.access_all())
    env.registered.append(new)
    assert new.rkey >> 8 == index, \
        f'new MR at index {new.rkey >> 8:#x}, not {index:#x}'
    return stale, new


@pytest.mark.keeps_netdev
def test_stale_keys_do_not_resolve(env, pairs):
    """An MR's index is reused (found deterministically by churning the
    cyclic allocator): the new MR has another key byte, and the old
    rkey and lkey reach nothing: REM_ACCESS_ERR and LOC_PROT_ERR, the
    new MR's memory untouched."""
    stale, new = _reuse_index(env)
    assert new.rkey != stale, f'index reused with the same key {stale:#x}'
    assert new.lkey == new.rkey

    before = os.urandom(SZ)
    new.write(before, SZ, 0)
    env.mr_a.write(os.urandom(SZ), SZ, 0)
    a, b = pairs()
    a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE, [sge(env.mr_a, 0, 256)],
                           stale, new.buf))
    expect_wcs(a.scq, [(1, e.IBV_WC_REM_ACCESS_ERR)], 'write, stale rkey')
    assert new.read(SZ, 0) == before, 'the stale rkey wrote the new MR'

    a, b = pairs()
    a.qp.post_send(rdma_wr(2, e.IBV_WR_RDMA_READ, [sge(new, 0, 256, stale)],
                           env.mr_a.rkey, env.mr_a.buf))
    expect_wcs(a.scq, [(2, e.IBV_WC_LOC_PROT_ERR)], 'read, stale lkey')
    assert new.read(SZ, 0) == before, 'the stale lkey wrote the new MR'

    a, b = pairs()
    a.qp.post_send(rdma_wr(3, e.IBV_WR_RDMA_WRITE, [sge(new, 0, 256)],
                           new.rkey, new.buf + 2048))
    expect_wcs(a.scq, [(3, e.IBV_WC_SUCCESS)], 'the new keys')
    assert new.read(256, 2048) == before[:256]


def _tmp_device(dev, netdev):
    h.ip('link', 'add', netdev, 'type', 'dummy')
    h.link_add(dev, netdev)


@pytest.mark.disruptive
def test_key_bytes_are_not_a_function_of_the_index():
    """The same sequence of registrations on two new devices takes the
    same indexes but, with random key bytes, not the same keys."""
    made = []
    try:
        for dev, netdev in (('bzctmp', 'bzctmp0'), ('bzctmpb', 'bzctmp1')):
            _tmp_device(dev, netdev)
            made.append((dev, netdev))
        keys = []
        for dev, _ in made:
            ctx = d.Context(name=dev)
            pd = PD(ctx)
            mrs = [MR(pd, SZ, e.IBV_ACCESS_LOCAL_WRITE) for _ in range(16)]
            keys.append({mr.lkey >> 8: mr.lkey & 0xff for mr in mrs})
            for mr in mrs:
                mr.close()
            pd.close()
            ctx.close()
        common = sorted(set(keys[0]) & set(keys[1]))
        assert len(common) >= 8, f'indexes differ: {keys}'
        same = [i for i in common if keys[0][i] == keys[1][i]]
        # all equal by chance: 2^-8 per common index
        assert len(same) < len(common), 'both devices gave index -> ' \
            f'byte {[(i, keys[0][i]) for i in same]}'
    finally:
        for dev, netdev in made:
            h.link_delete(dev, check=False)
            h.ip('link', 'del', netdev, check=False)
