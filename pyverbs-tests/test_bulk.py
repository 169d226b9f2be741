# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Bulk channels and the MR cache through libbzc.so.1 (bzcdv.h), by ctypes
(bzcdv.py); the other process of the two-process tests is bulk_peer.py.

Semantics under test (bzcdv_post_bulk(3)): one completion per bulk WR, in
posting order, with the bytes moved; WRITE / WRITE_WITH_IMM / READ between
channels (also of two processes), COPY inside a PD; lkey 0 served by the
PD's MR cache; error completions that leave the channel working; flush on
destroy; nothing pinned after a process is killed mid-transfer.

Tests that need the kernel's bulk objects skip with the reason
"kernel bzc without BZC_CAP_BULK (bulk channels)" exactly when
bzcdv_query_device() answers EOPNOTSUPP on bzc0; test_bulk_cap_or_clean_
eopnotsupp checks that the library then fails every call cleanly.
"""

import ctypes
import errno
import os
import random
import signal
import time

import pytest

import bzc_helpers as h
import bzcdv as dv

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
PARAMS = '/sys/module/bzc/parameters'

# Nothing here touches module, netdev or addresses.
pytestmark = pytest.mark.keeps_netdev

_no_bulk = None


def no_bulk_reason():
    global _no_bulk
    if _no_bulk is None:
        _no_bulk = dv.bulk_available(h.DEV) or ''
    return _no_bulk


@pytest.fixture
def bulk():
    reason = no_bulk_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def c(bulk):
    ctx = dv.Ctx(h.DEV)
    yield ctx
    ctx.close()


@pytest.fixture
def caps(c):
    return c.query_device()


def pair(c, depth=16, recv=False):
    """Two channels on two PDs of one context, connected to each other:
    (local chan, far chan, far pd)."""
    pd2 = c.alloc_pd()
    a = c.chan(c.cq(256), depth=depth)
    b = c.chan(c.cq(256), depth=depth, pd=pd2,
               recv_cq=c.cq(256) if recv else None)
    dv.connect_pair(a, b)
    return a, b, pd2


def split(rnd, total, nsge):
    """nsge lengths (>= 0 each, >= 1 when possible) summing to total."""
    if nsge == 1 or total < nsge:
        return [total] + [0] * (nsge - 1) if total < nsge else [total]
    cuts = sorted(rnd.sample(range(1, total), nsge - 1))
    return [b - a for a, b in zip([0] + cuts, cuts + [total])]


def scatter(rnd, base, lengths, room):
    """Non-overlapping, unordered, randomly placed pieces in [base, base+room)
    (room >= sum(lengths) + 64 * len(lengths))."""
    slack = room - sum(lengths)
    gaps = split(rnd, slack, len(lengths) + 1) if len(lengths) > 1 else \
        [rnd.randint(0, slack), 0]
    order = list(range(len(lengths)))
    rnd.shuffle(order)
    pos, addrs = base, [0] * len(lengths)
    for k, i in enumerate(order):
        pos += gaps[k]
        addrs[i] = pos
        pos += lengths[i]
    return addrs


def guard_ok(addr, off, length, size, byte):
    """The 16 bytes around [off, off+length) of a buffer of @size still hold
    @byte."""
    lo = max(0, off - 16)
    hi = min(size, off + length + 16)
    return dv.read(addr + lo, off - lo) == bytes([byte]) * (off - lo) and \
        dv.read(addr + off + length, hi - off - length) == \
        bytes([byte]) * (hi - off - length)


def expect_wc(wc, wr_id, status, opcode=None, byte_len=None, qp_num=None):
    assert wc.wr_id == wr_id, dv.wc_str(wc)
    assert wc.status == status, dv.wc_str(wc)
    if status == dv.WC_SUCCESS:
        if opcode is not None:
            assert wc.opcode == opcode, dv.wc_str(wc)
        if byte_len is not None:
            assert wc.byte_len == min(byte_len, dv.BYTE_LEN_SATURATED), \
                dv.wc_str(wc)
    if qp_num is not None:
        assert wc.qp_num == qp_num, dv.wc_str(wc)


# --------------------------------------------------------------------------
# Device, library and argument checks
# --------------------------------------------------------------------------

def test_is_supported():
    assert dv.is_supported(h.DEV) is True
    others = [n for n in dv.device_names() if n != h.DEV and
              not n.startswith('bzc')]
    for name in others:             # rxe0 on the test machine
        assert dv.is_supported(name) is False, name


def test_other_device_eopnotsupp():
    rxe = os.environ.get('RXE_DEV', 'rxe0')
    if rxe not in dv.device_names():
        pytest.skip(f'no second (non-bzc) RDMA device {rxe}')
    with dv.Ctx(rxe) as c:
        a = dv.DeviceAttr()
        assert dv.lib.bzcdv_query_device(c.p, ctypes.byref(a)) == \
            errno.EOPNOTSUPP
        s = dv.MrCacheStats()
        assert dv.lib.bzcdv_query_mr_cache(c.pd, ctypes.byref(s)) == \
            errno.EOPNOTSUPP
        buf = c.buf(4096)
        with pytest.raises(OSError) as e:
            dv.CachedMr(c.pd, buf.addr, 4096)
        assert e.value.errno == errno.EOPNOTSUPP
        cq = c.cq(16)
        with pytest.raises(OSError) as e:
            dv.Chan(c, c.pd, cq)
        assert e.value.errno == errno.EOPNOTSUPP


def test_bulk_cap_or_clean_eopnotsupp():
    """With BZC_CAP_BULK every call works; without it every call fails with
    EOPNOTSUPP (never a crash or another errno)."""
    with dv.Ctx(h.DEV) as c:
        a = dv.DeviceAttr()
        rc = dv.lib.bzcdv_query_device(c.p, ctypes.byref(a))
        buf = c.buf(4096)
        cq = c.cq(16)
        if rc == errno.EOPNOTSUPP:
            s = dv.MrCacheStats()
            assert dv.lib.bzcdv_query_mr_cache(c.pd, ctypes.byref(s)) == \
                errno.EOPNOTSUPP
            for make in (lambda: dv.CachedMr(c.pd, buf.addr, 4096),
                         lambda: dv.Chan(c, c.pd, cq)):
                with pytest.raises(OSError) as e:
                    make()
                assert e.value.errno == errno.EOPNOTSUPP
        else:
            assert rc == 0
            ch = c.chan(cq, depth=4)
            mr = c.cached(buf.addr, 4096)
            assert ch.depth >= 4 and ch.max_sge >= 1
            assert mr.lkey != 0 and mr.rkey != 0
            c.cache_stats()


def test_query_device(caps):
    assert caps.max_bulk_len >= 1 << 40          # at least 1 TiB
    assert caps.max_bulk_sge >= 1
    assert caps.max_chan_depth >= 1
    assert caps.seg_bytes >= 4096
    assert caps.workers >= 1
    if os.path.exists(f'{PARAMS}/bulk_workers'):
        assert caps.workers == int(h.read_file(f'{PARAMS}/bulk_workers'))
    if os.path.exists(f'{PARAMS}/bulk_seg_kb'):
        assert caps.seg_bytes == int(h.read_file(f'{PARAMS}/bulk_seg_kb')) * KiB
    if os.path.exists(f'{PARAMS}/mr_cache_max_mb'):
        assert caps.mr_cache_max_bytes == \
            int(h.read_file(f'{PARAMS}/mr_cache_max_mb')) * MiB


def test_query_unknown_comp_mask_cleared(c):
    """Output structs: comp_mask in/out; unknown bits cleared, not refused."""
    a = c.query_device(comp_mask=1 << 63 | 1 << 31)
    assert a.comp_mask == 0 and a.max_bulk_len >= 1 << 40
    # a known bit next to unknown ones stays
    a = c.query_device(comp_mask=1 << 63 | dv.DEVICE_ATTR_MASK_MAX_CHANS)
    assert a.comp_mask == dv.DEVICE_ATTR_MASK_MAX_CHANS
    s = c.cache_stats(comp_mask=1 << 62)
    assert s.comp_mask == 0


def test_query_caps(c):
    """BZCDV_DEVICE_ATTR_MASK_CAPS: bzc0 exports device memory and takes
    ODP MRs in bulk WRs, and says so; without the bit, caps is left as
    the caller had it."""
    a = c.query_device(comp_mask=dv.DEVICE_ATTR_MASK_CAPS)
    assert a.comp_mask == dv.DEVICE_ATTR_MASK_CAPS
    assert a.caps == dv.DEVICE_CAP_EXPORT_DM | dv.DEVICE_CAP_BULK_ODP, \
        hex(a.caps)
    a = dv.DeviceAttr(comp_mask=0, caps=0xdead)
    assert dv.lib.bzcdv_query_device(c.p, ctypes.byref(a)) == 0
    assert a.caps == 0xdead and a.comp_mask == 0


def test_create_chan_bad_args(c, caps):
    cq = c.cq(16)
    for kw in ({'comp_mask': 1 << 1}, {'comp_mask': 1 << 63},
               {'depth': 0}, {'depth': caps.max_chan_depth + 1}):
        depth = kw.pop('depth', 4)
        with pytest.raises(OSError) as e:
            dv.Chan(c, c.pd, cq, depth=depth, **kw)
        assert e.value.errno == errno.EINVAL, kw
    # RECV_CQ flagged but NULL
    with pytest.raises(OSError) as e:
        dv.Chan(c, c.pd, cq, comp_mask=dv.CHAN_INIT_ATTR_MASK_RECV_CQ)
    assert e.value.errno == errno.EINVAL
    # a CQ of another context
    with dv.Ctx(h.DEV) as c2:
        cq2 = c2.cq(16)
        with pytest.raises(OSError) as e:
            dv.Chan(c, c.pd, cq2)
        assert e.value.errno == errno.EINVAL
    # still creatable afterwards, at the largest depth too
    ch = c.chan(cq, depth=caps.max_chan_depth)
    assert ch.depth >= caps.max_chan_depth
    assert 1 <= ch.max_sge <= caps.max_bulk_sge


def test_chan_numbers_unique(c):
    chans = [c.chan(depth=2) for _ in range(8)]
    assert len({ch.num for ch in chans}) == 8


# --------------------------------------------------------------------------
# Data integrity
# --------------------------------------------------------------------------

SIZES = [1, 7, 4096, 3 * 4096 + 17, MiB + 777, 16 * MiB + 4095]
OPS = {'write': dv.BULK_WRITE, 'write_imm': dv.BULK_WRITE_WITH_IMM,
       'read': dv.BULK_READ, 'copy': dv.BULK_COPY}


def transfer_and_check(c, op, total, nsge, rnd, cached=False):
    """One WR of @op moving @total bytes in @nsge random local pieces to or
    from a random far offset; checks completion(s), data and guards."""
    room = total + 64 * nsge + 8192
    a, b, pd2 = pair(c, recv=(op == dv.BULK_WRITE_WITH_IMM))
    local = c.buf(room)
    far = c.buf(room)
    block = dv.pattern(rnd.randrange(1 << 30))
    lens = split(rnd, total, nsge)
    laddrs = scatter(rnd, local.addr, lens, room)
    roff = rnd.randint(0, room - total)
    if op == dv.BULK_READ:
        dv.zero(local.addr, room, 0xa5)
        dv.fill(far.addr, room, block, rnd.randrange(len(block)))
    else:
        dv.fill(local.addr, room, block, rnd.randrange(len(block)))
        dv.zero(far.addr, room, 0xa5)

    if op == dv.BULK_COPY:
        # both ranges in a's PD: the far one by lkey, or 0 (MR cache)
        lmr = None if cached else c.mr(local.addr, room)
        fmr = None if cached else c.mr(far.addr, room)
        lkey = 0 if cached else lmr.lkey
        rkey = 0 if cached else fmr.lkey
        rchan = 0xdeadbeef            # ignored for COPY
    else:
        lmr = None if cached else c.mr(local.addr, room)
        fmr = c.mr(far.addr, room, pd=pd2)
        lkey = 0 if cached else lmr.lkey
        rkey, rchan = fmr.rkey, b.num
    imm = rnd.randrange(1 << 32)
    wr = {'op': op, 'wr_id': 0x1234_5678_9abc + total,
          'sges': [(la, ln, lkey) for la, ln in zip(laddrs, lens)],
          'raddr': far.addr + roff, 'rkey': rkey, 'rchan': rchan,
          'imm': imm}
    wc = a.run([wr])[0]
    expect_wc(wc, wr['wr_id'], dv.WC_SUCCESS, dv.OP_WC[op], total, a.num)

    cum = 0
    for la, ln in zip(laddrs, lens):
        if op == dv.BULK_READ:
            assert dv.memcmp(la, far.addr + roff + cum, ln) == 0, \
                f'piece at +{cum} ({ln} B) differs'
            assert guard_ok(local.addr, la - local.addr, ln, room, 0xa5)
        else:
            assert dv.memcmp(far.addr + roff + cum, la, ln) == 0, \
                f'piece at +{cum} ({ln} B) differs'
        cum += ln
    if op != dv.BULK_READ:
        assert guard_ok(far.addr, roff, total, room, 0xa5), 'write overran'

    if op == dv.BULK_WRITE_WITH_IMM:
        r = b.recv_cq.wait(1)[0]
        assert r.status == dv.WC_SUCCESS, dv.wc_str(r)
        assert r.opcode == dv.WC_RECV_RDMA_WITH_IMM, dv.wc_str(r)
        assert r.wc_flags & dv.WC_WITH_IMM, dv.wc_str(r)
        assert dv.wc_imm(r) == imm, dv.wc_str(r)
        assert r.byte_len == min(total, dv.BYTE_LEN_SATURATED)
        assert r.qp_num == b.num and r.src_qp == a.num, dv.wc_str(r)
    a.cq.assert_empty(0)
    b.cq.assert_empty(0)
    if b.recv_cq:
        b.recv_cq.assert_empty(0)


@pytest.mark.parametrize('nsge', [1, 3])
@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('opname', list(OPS))
def test_integrity(c, opname, size, nsge):
    rnd = random.Random(f'{opname}-{size}-{nsge}')
    transfer_and_check(c, OPS[opname], size, min(nsge, size), rnd)


@pytest.mark.parametrize('opname', list(OPS))
def test_integrity_cached_lkey0(c, caps, opname):
    if not caps.mr_cache_max_bytes:
        pytest.skip('MR cache disabled (mr_cache_max_mb=0)')
    rnd = random.Random(f'cached-{opname}')
    transfer_and_check(c, OPS[opname], 5 * MiB + 123, 2, rnd, cached=True)


@pytest.mark.big
@pytest.mark.parametrize('opname', ['write', 'read', 'copy'])
def test_integrity_1gib(c, opname):
    rnd = random.Random(f'1g-{opname}')
    transfer_and_check(c, OPS[opname], GiB, 4, rnd)


def test_counted_in_hw_counters(c):
    """Each bulk WQE that completes successfully counts once in the port's
    bulk_wqes, with its bytes in bulk_bytes; a failed one does not."""
    n = 3 * MiB + 5
    src, dst = c.buf(n), c.buf(n)
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n)
    ch = c.chan(c.cq(16))
    wr = {'op': dv.BULK_COPY, 'sges': [(src.addr, n, smr.lkey)],
          'raddr': dst.addr, 'rkey': dmr.lkey}
    before = h.hw_counters()
    wcs = ch.run([dict(wr, wr_id=1), dict(wr, wr_id=2),
                  dict(wr, wr_id=3, rkey=dmr.lkey ^ 0x80)])
    assert [w.status for w in wcs][:2] == [dv.WC_SUCCESS] * 2
    assert wcs[2].status != dv.WC_SUCCESS
    after = h.hw_counters()
    assert after['bulk_wqes'] - before['bulk_wqes'] == 2
    assert after['bulk_bytes'] - before['bulk_bytes'] == 2 * n


def test_max_sge(c, caps):
    a, b, pd2 = pair(c)
    n = min(a.max_sge, 1024)
    src, dst = c.buf(n * 8192), c.buf(n * 4096)
    dv.fill(src.addr, n * 8192, dv.pattern(7))
    smr, dmr = c.mr(src.addr, n * 8192), c.mr(dst.addr, n * 4096, pd=pd2)
    # every other 4 KiB piece, in reverse, one byte short each
    sges = [(src.addr + (n - 1 - i) * 8192 + 1, 4095, smr.lkey)
            for i in range(n)]
    wc = a.run([{'op': dv.BULK_WRITE, 'sges': sges, 'raddr': dst.addr,
                 'rkey': dmr.rkey, 'rchan': b.num}])[0]
    expect_wc(wc, 0, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, n * 4095)
    for i, (la, ln, _) in enumerate(sges):
        assert dv.memcmp(dst.addr + i * 4095, la, ln) == 0, i


@pytest.mark.big
def test_over_4gib_in_one_wr(c, caps):
    """A WR of more than 4 GiB: 65 SGEs (or one SGE longer than 4 GiB) over
    64 MiB of memory mirrored into 4160 MiB of address space, on both sides
    (mmap of one memfd at consecutive addresses).  Overlapping sources are
    fine for WRITE; every far mirror receives the same bytes."""
    chunk, copies = 64 * MiB, 65
    total = chunk * copies                      # 4160 MiB > 4 GiB
    if caps.max_bulk_len < total:
        pytest.fail(f'max_bulk_len {caps.max_bulk_len} < {total}')

    def mirror():
        fd = os.memfd_create('bzc-mirror')
        os.ftruncate(fd, chunk)
        base = dv.reserve(total)
        for k in range(copies):
            dv.mmap_fd(chunk, fd, base + k * chunk)
        return fd, base

    lfd, lbase = mirror()
    rfd, rbase = mirror()
    try:
        dv.fill(lbase, chunk, dv.pattern(4242))
        dv.zero(rbase, chunk, 0)
        a, b, pd2 = pair(c)
        lmr = c.mr(lbase, total)
        rmr = c.mr(rbase, total, pd=pd2)
        # one SGE of 4160 MiB (64-bit SGE length)
        wc = a.run([{'op': dv.BULK_WRITE, 'wr_id': 1,
                     'sges': [(lbase, total, lmr.lkey)],
                     'raddr': rbase, 'rkey': rmr.rkey, 'rchan': b.num}],
                   timeout=900)[0]
        expect_wc(wc, 1, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, total)
        assert wc.byte_len == dv.BYTE_LEN_SATURATED
        assert dv.memcmp(rbase, lbase, chunk) == 0
        if a.max_sge >= copies:
            # 65 SGEs all naming the first copy of the local memory
            dv.zero(rbase, chunk, 0)
            wc = a.run([{'op': dv.BULK_WRITE, 'wr_id': 2,
                         'sges': [(lbase, chunk, lmr.lkey)] * copies,
                         'raddr': rbase, 'rkey': rmr.rkey, 'rchan': b.num}],
                       timeout=900)[0]
            expect_wc(wc, 2, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, total)
            assert dv.memcmp(rbase, lbase, chunk) == 0
        for obj in (rmr, lmr):
            obj.close()
    finally:
        dv.munmap(lbase, total)
        dv.munmap(rbase, total)
        os.close(lfd)
        os.close(rfd)


def test_order_and_fence(c):
    """Completions come in posting order; a fenced WR sees the data of the
    WRs before it (copy A->B, then fenced copy B->C gives C == A)."""
    n = 8 * MiB
    a_, b_, c_ = c.buf(n), c.buf(n), c.buf(n)
    dv.fill(a_.addr, n, dv.pattern(11))
    mra, mrb, mrc = (c.mr(x.addr, n) for x in (a_, b_, c_))
    ch = c.chan(c.cq(256), depth=32)
    wrs = []
    for i in range(6):
        wrs.append({'op': dv.BULK_COPY, 'wr_id': 100 + i,
                    'sges': [(a_.addr, n, mra.lkey)], 'raddr': b_.addr,
                    'rkey': mrb.lkey})
    wrs.append({'op': dv.BULK_COPY, 'wr_id': 200, 'flags': dv.BULK_FENCE,
                'sges': [(b_.addr, n, mrb.lkey)], 'raddr': c_.addr,
                'rkey': mrc.lkey})
    wcs = ch.run(wrs)
    assert [w.wr_id for w in wcs] == [w['wr_id'] for w in wrs]
    for w in wcs:
        expect_wc(w, w.wr_id, dv.WC_SUCCESS, dv.WC_BULK_COPY, n, ch.num)
    assert dv.memcmp(c_.addr, a_.addr, n) == 0


def test_imm_arrival_after_earlier_data(c):
    """The arrival of a WRITE_WITH_IMM comes after the data of it and of the
    WRITEs posted before it (unfenced) is placed."""
    n = 16 * MiB
    a, b, pd2 = pair(c, depth=16, recv=True)
    src = c.buf(n)
    dst = c.buf(4 * n)
    dv.fill(src.addr, n, dv.pattern(12))
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, 4 * n, pd=pd2)
    wrs = [{'op': dv.BULK_WRITE, 'wr_id': i, 'sges': [(src.addr, n, smr.lkey)],
            'raddr': dst.addr + i * n, 'rkey': dmr.rkey, 'rchan': b.num}
           for i in range(3)]
    wrs.append({'op': dv.BULK_WRITE_WITH_IMM, 'wr_id': 3,
                'sges': [(src.addr, n, smr.lkey)], 'raddr': dst.addr + 3 * n,
                'rkey': dmr.rkey, 'rchan': b.num, 'imm': 0xc0ffee})
    rc, _ = a.post(wrs)
    assert rc == 0
    r = b.recv_cq.wait(1)[0]
    # checked the moment the arrival is seen, before polling the sender
    for i in range(4):
        assert dv.memcmp(dst.addr + i * n, src.addr, n) == 0, i
    assert dv.wc_imm(r) == 0xc0ffee
    wcs = a.cq.wait(4)
    assert [w.status for w in wcs] == [dv.WC_SUCCESS] * 4


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

def test_error_completions_and_recovery(c, caps):
    a, b, pd2 = pair(c, recv=False)
    n = 64 * KiB
    src, dst = c.buf(n), c.buf(n)
    dv.fill(src.addr, n, dv.pattern(3))
    smr = c.mr(src.addr, n)
    dmr = c.mr(dst.addr, n, pd=pd2)
    ro = c.mr(dst.addr, n, access=dv.ACCESS_LOCAL_WRITE, pd=pd2)  # no remote
    good = {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, smr.lkey)],
            'raddr': dst.addr, 'rkey': dmr.rkey, 'rchan': b.num}
    dead = c.chan(c.cq(16), depth=2)
    dead_num = dead.num
    c._objs.remove(dead)
    dead.close()
    cases = [
        ('bad rkey', dict(good, rkey=dmr.rkey ^ 0x5a5a00), dv.WC_REM_ACCESS_ERR),
        ('far past the MR', dict(good, raddr=dst.addr + 1), dv.WC_REM_ACCESS_ERR),
        ('far without remote write', dict(good, rkey=ro.rkey),
         dv.WC_REM_ACCESS_ERR),
        ('rkey of the wrong PD', dict(good, rkey=smr.rkey),
         dv.WC_REM_ACCESS_ERR),
        ('bad lkey', dict(good, sges=[(src.addr, n, smr.lkey ^ 0x5a5a00)]),
         dv.WC_LOC_PROT_ERR),
        ('local past the MR', dict(good, sges=[(src.addr + 1, n, smr.lkey)]),
         dv.WC_LOC_PROT_ERR),
        ('lkey of the far PD', dict(good, sges=[(dst.addr, n, dmr.lkey)]),
         dv.WC_LOC_PROT_ERR),
        ('read into the far side bad rkey',
         dict(good, op=dv.BULK_READ, rkey=0x7ffff0), dv.WC_REM_ACCESS_ERR),
        # COPY's far range is this PD's memory: a local protection error
        ('copy to a bad lkey', dict(good, op=dv.BULK_COPY, rkey=0x7ffff0),
         dv.WC_LOC_PROT_ERR),
        ('copy past the far MR', dict(good, op=dv.BULK_COPY,
                                      raddr=src.addr + 1, rkey=smr.lkey),
         dv.WC_LOC_PROT_ERR),
        ('imm to a channel without recv CQ',
         dict(good, op=dv.BULK_WRITE_WITH_IMM), dv.WC_REM_INV_REQ_ERR),
        # remote_chan names another channel than the connected peer
        ('imm to a destroyed channel',
         dict(good, op=dv.BULK_WRITE_WITH_IMM, rchan=dead_num),
         dv.WC_LOC_QP_OP_ERR),
        ('write to a destroyed channel', dict(good, rchan=dead_num),
         dv.WC_LOC_QP_OP_ERR),
        ('write to a live channel not the peer', dict(good, rchan=a.num),
         dv.WC_LOC_QP_OP_ERR),
        ('longer than max_bulk_len',
         dict(good, sges=[(src.addr, caps.max_bulk_len // 2 + 1, smr.lkey)] * 2),
         dv.WC_LOC_LEN_ERR),
    ]
    for i, (what, wr, status) in enumerate(cases):
        wr = dict(wr, wr_id=i)
        wc = a.run([wr])[0]
        assert (wc.wr_id, wc.status) == (i, status), \
            f'{what}: {dv.wc_str(wc)}'
        assert wc.qp_num == a.num, what
        # the channel keeps working
        dv.zero(dst.addr, n, 0)
        wc = a.run([dict(good, wr_id=1000 + i)])[0]
        expect_wc(wc, 1000 + i, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, n)
        assert dv.memcmp(dst.addr, src.addr, n) == 0, f'after {what}'
    a.cq.assert_empty()


def test_post_einval_sets_bad_wr(c):
    a, b, pd2 = pair(c)
    n = 4096
    src, dst = c.buf(n), c.buf(n)
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n, pd=pd2)
    good = {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, smr.lkey)],
            'raddr': dst.addr, 'rkey': dmr.rkey, 'rchan': b.num}
    bads = [dict(good, op=4), dict(good, op=0x7fffffff),
            dict(good, flags=1 << 1), dict(good, flags=1 << 31),
            dict(good, sges=[(src.addr, 1, smr.lkey)] * (a.max_sge + 1))]
    if a.max_sge < 0xffff:
        bads.append(dict(good, num_sge=0xffff + 1))
    for k, bad in enumerate(bads):
        rc, idx = a.post([dict(good, wr_id=1), dict(bad, wr_id=2),
                          dict(good, wr_id=3)])
        assert (rc, idx) == (errno.EINVAL, 1), (k, rc, idx)
        # the WR before the bad one is queued and completes, alone
        wcs = a.cq.wait(1)
        expect_wc(wcs[0], 1, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, n)
        a.cq.assert_empty(0.05)


def test_ring_full_enomem(c):
    a, b, pd2 = pair(c, depth=4)
    n = 4096
    src, dst = c.buf(n), c.buf(n)
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n, pd=pd2)
    good = {'op': dv.BULK_WRITE, 'sges': [(src.addr, n, smr.lkey)],
            'raddr': dst.addr, 'rkey': dmr.rkey, 'rchan': b.num}
    # one call never rings the doorbell before its end: the ring holds
    # exactly `depth` slots of this chain
    wrs = [dict(good, wr_id=i) for i in range(a.depth + 3)]
    rc, idx = a.post(wrs)
    assert (rc, idx) == (errno.ENOMEM, a.depth)
    wcs = a.cq.wait(a.depth)
    assert [w.wr_id for w in wcs] == list(range(a.depth))
    a.cq.assert_empty(0.1)
    # and posting works again once they completed
    assert a.run([dict(good, wr_id=99)])[0].status == dv.WC_SUCCESS


def test_cq_overflow_stops_channel(c):
    """A channel whose CQ overflows cannot report what it runs: the CQEs
    that fitted stay, in order and successful; the channel stops and its
    next doorbell fails with EIO, rather than moving data unreported."""
    n = 4096
    src, dst = c.buf(n), c.buf(n)
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n)
    cq = c.cq(4)
    room = ctypes.cast(cq.p, ctypes.POINTER(dv.IbvCq)).contents.cqe
    ch = dv.Chan(c, c.pd, cq, depth=64)
    wr = {'op': dv.BULK_COPY, 'sges': [(src.addr, n, smr.lkey)],
          'raddr': dst.addr, 'rkey': dmr.lkey}
    try:
        rc, _ = ch.post([dict(wr, wr_id=i) for i in range(room + 4)])
        assert rc == 0
        # Nothing is polled until the channel stops: a CQ drained while
        # the requests still run would make room for the rest.
        deadline = time.monotonic() + 60
        while True:
            rc, idx = ch.post([dict(wr, wr_id=100)])
            if rc:
                break
            assert time.monotonic() < deadline, 'the channel never stopped'
            time.sleep(0.05)
        assert (rc, idx) == (errno.EIO, 0)
        wcs = cq.wait(room, timeout=60)
        assert [w.wr_id for w in wcs] == list(range(room))
        assert all(w.status == dv.WC_SUCCESS and w.byte_len == n
                   for w in wcs)
        cq.assert_empty(0.2)
    finally:
        ch.close()


def test_recv_cq_overflow_stops_target(c):
    """WRITE_WITH_IMM arrivals that overflow the target's receive CQ: the
    arrivals that fitted stay, in order; the senders still complete; the
    target channel, which can no longer report arrivals, stops (EIO)."""
    n = 4096
    pd2 = c.alloc_pd()
    a = c.chan(c.cq(256), depth=64)
    rcq = c.cq(2)
    room = ctypes.cast(rcq.p, ctypes.POINTER(dv.IbvCq)).contents.cqe
    b = c.chan(c.cq(256), depth=16, pd=pd2, recv_cq=rcq)
    dv.connect_pair(a, b)
    src, dst = c.buf(n), c.buf(n)
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n, pd=pd2)
    wrs = [{'op': dv.BULK_WRITE_WITH_IMM, 'wr_id': i,
            'sges': [(src.addr, n, smr.lkey)], 'raddr': dst.addr,
            'rkey': dmr.rkey, 'rchan': b.num, 'imm': 0x100 + i}
           for i in range(room + 3)]
    rc, _ = a.post(wrs)
    assert rc == 0
    wcs = a.cq.wait(len(wrs), timeout=60)
    assert [w.status for w in wcs] == [dv.WC_SUCCESS] * len(wrs)
    got = rcq.poll(64)
    assert [dv.wc_imm(w) for w in got] == [0x100 + i for i in range(room)]
    own = {'op': dv.BULK_COPY, 'wr_id': 7, 'sges': [(dst.addr, n, dmr.lkey)],
           'raddr': dst.addr, 'rkey': dmr.lkey}
    # the sender's lane stops the target right after its completion
    deadline = time.monotonic() + 30
    posted = 0
    while (res := b.post([own]))[0] == 0:
        posted += 1
        assert time.monotonic() < deadline, 'the target never stopped'
        time.sleep(0.05)
    assert res == (errno.EIO, 0)
    rcq.assert_empty(0.2)
    # every WR reported posted completes once (run, or flushed if the
    # target stopped under it); the refused one never does
    wcs = b.cq.wait(posted, timeout=60)
    assert all(w.wr_id == 7 and w.status in (dv.WC_SUCCESS,
                                             dv.WC_WR_FLUSH_ERR)
               for w in wcs), [dv.wc_str(w) for w in wcs]
    b.cq.assert_empty(0.3)


def test_destroy_flushes(c):
    """Destroying a channel with queued work: every WR completes exactly
    once, successfully or with WR_FLUSH_ERR, by the time destroy returns."""
    n = 64 * MiB
    src, dst = c.buf(n), c.buf(n)
    smr, dmr = c.mr(src.addr, n), c.mr(dst.addr, n)
    cq = c.cq(64)
    ch = dv.Chan(c, c.pd, cq, depth=16)
    wrs = [{'op': dv.BULK_COPY, 'wr_id': i, 'sges': [(src.addr, n, smr.lkey)],
            'raddr': dst.addr, 'rkey': dmr.lkey} for i in range(16)]
    rc, _ = ch.post(wrs)
    assert rc == 0
    ch.close()
    wcs = cq.poll(64)
    assert [w.wr_id for w in wcs] == list(range(16))
    assert all(w.status in (dv.WC_SUCCESS, dv.WC_WR_FLUSH_ERR) for w in wcs)
    # once one is flushed, the rest are too
    cq.assert_empty(0.2)


# --------------------------------------------------------------------------
# MR cache
# --------------------------------------------------------------------------

@pytest.fixture
def cache_on(c, caps):
    if not caps.mr_cache_max_bytes:
        pytest.skip('MR cache disabled (mr_cache_max_mb=0)')


def test_cached_hit_and_stats(c, cache_on):
    n = 8 * MiB
    buf = c.buf(n)
    dv.zero(buf.addr, n, 1)
    s0 = c.cache_stats()
    m1 = c.cached(buf.addr, n)
    assert not m1.hit
    s1 = c.cache_stats()
    assert s1.misses == s0.misses + 1 and s1.hits == s0.hits
    assert s1.pinned_bytes >= s0.pinned_bytes + n
    assert s1.entries >= s0.entries + 1
    m1.close()
    m2 = c.cached(buf.addr, n)
    assert m2.hit
    m3 = c.cached(buf.addr + 4096, n - 8192)       # inside the cached range
    assert m3.hit
    s2 = c.cache_stats()
    assert s2.hits == s1.hits + 2 and s2.misses == s1.misses
    assert s2.pinned_bytes == s1.pinned_bytes      # nothing pinned again
    # another PD has its own cache
    pd2 = c.alloc_pd()
    m4 = c.cached(buf.addr, n, pd=pd2)
    assert not m4.hit
    assert c.cache_stats().hits == s2.hits


def test_cached_keys_in_bulk_wrs(c, cache_on):
    n = 4 * MiB + 5
    src, dst = c.buf(n), c.buf(n)
    dv.fill(src.addr, n, dv.pattern(21))
    ms, md = c.cached(src.addr, n), c.cached(dst.addr, n)
    ch = c.chan(depth=4)
    wc = ch.run([{'op': dv.BULK_COPY, 'sges': [(src.addr, n, ms.lkey)],
                  'raddr': dst.addr, 'rkey': md.lkey}])[0]
    expect_wc(wc, 0, dv.WC_SUCCESS, dv.WC_BULK_COPY, n)
    assert dv.memcmp(dst.addr, src.addr, n) == 0
    # a released key is dead
    ms.close()
    c._objs.remove(ms)
    dv.zero(dst.addr, n, 0)
    wc = ch.run([{'op': dv.BULK_COPY, 'sges': [(src.addr, n, ms.lkey)],
                  'raddr': dst.addr, 'rkey': md.lkey}])[0]
    assert wc.status == dv.WC_LOC_PROT_ERR, dv.wc_str(wc)


def test_invalidation_on_munmap(c, cache_on):
    """munmap, then new memory at the same address (MAP_FIXED): a lkey-0
    transfer sees the new contents, and the cache counted an
    invalidation."""
    n = 4 * MiB
    buf = dv.Buffer(n)
    addr = buf.addr
    dst = c.buf(n)
    dmr = c.mr(dst.addr, n)
    ch = c.chan(depth=4)
    try:
        dv.zero(addr, n, 0x11)
        wr = {'op': dv.BULK_COPY, 'sges': [(addr, n, 0)], 'raddr': dst.addr,
              'rkey': dmr.lkey}
        assert ch.run([wr])[0].status == dv.WC_SUCCESS
        assert dv.read(dst.addr + n // 2, 16) == b'\x11' * 16
        s0 = c.cache_stats()
        dv.munmap(addr, n)
        buf.addr = None
        assert dv.mmap_anon(n, addr, fixed=True) == addr
        buf.addr = addr
        dv.fill(addr, n, dv.pattern(31))
        assert ch.run([wr])[0].status == dv.WC_SUCCESS
        assert dv.memcmp(dst.addr, addr, n) == 0, 'stale pages used'
        s1 = c.cache_stats()
        assert s1.invalidations >= s0.invalidations + 1
        assert s1.misses >= s0.misses + 1
    finally:
        buf.close()


def test_fork_keeps_parent_range(c, cache_on):
    """The pages the cache pinned stay the parent's after fork(): the child
    writes its copy, the parent's transfers see only the parent's data."""
    n = 4 * MiB
    src, dst = c.buf(n), c.buf(n)
    dmr = c.mr(dst.addr, n)
    dv.zero(src.addr, n, 0x22)
    ch = c.chan(depth=4)
    wr = {'op': dv.BULK_COPY, 'sges': [(src.addr, n, 0)], 'raddr': dst.addr,
          'rkey': dmr.lkey}
    assert ch.run([wr])[0].status == dv.WC_SUCCESS     # pinned in the cache
    pid = os.fork()
    if pid == 0:
        try:
            dv.zero(src.addr, n, 0x99)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert dv.read(src.addr, 4) == b'\x22' * 4
    assert ch.run([wr])[0].status == dv.WC_SUCCESS
    assert dv.read(dst.addr + n - 16, 16) == b'\x22' * 16
    # the parent writes after the fork; the cached range follows
    dv.fill(src.addr, n, dv.pattern(41))
    assert ch.run([wr])[0].status == dv.WC_SUCCESS
    assert dv.memcmp(dst.addr, src.addr, n) == 0


_gid_index = None


def loopback_gid_index():
    """The RoCE GID index of bzc0's ::ffff:$BZC_IPV4 (bzc_helpers' choice
    for QP tests), found once through pyverbs."""
    global _gid_index
    if _gid_index is None:
        import pyverbs.device as d
        ctx = d.Context(name=h.DEV)
        try:
            _gid_index = h.find_ipv4_gid_index(ctx)
        finally:
            ctx.close()
    return _gid_index


def test_cached_mr_keys_in_standard_rdma(c, cache_on):
    """A cached MR is an ordinary MR of the PD: ibv_post_send() RDMA WRITE
    and READ on a standard RC QP accept its lkey as the local SGE and its
    rkey as the remote key, and move the data intact."""
    n = 1 * MiB
    ln = n - 4096 - 7                     # not page aligned at either end
    cbuf, nbuf = c.buf(n), c.buf(n)
    cm = c.cached(cbuf.addr, n)
    nm = c.mr(nbuf.addr, n)
    assert cm.lkey and cm.rkey
    assert c.cached(cbuf.addr, n).hit     # it is a cached range
    qp = c.rc_qp(loopback_gid_index())
    cases = [
        # (wr_id, op, local (buf, key), remote (buf, key))
        (1, dv.WR_RDMA_WRITE, (cbuf, cm.lkey), (nbuf, nm.rkey)),
        (2, dv.WR_RDMA_WRITE, (nbuf, nm.lkey), (cbuf, cm.rkey)),
        (3, dv.WR_RDMA_READ, (cbuf, cm.lkey), (nbuf, nm.rkey)),
        (4, dv.WR_RDMA_READ, (nbuf, nm.lkey), (cbuf, cm.rkey)),
    ]
    for wr_id, op, (lb, lkey), (rb, rkey) in cases:
        src, dst = (lb, rb) if op == dv.WR_RDMA_WRITE else (rb, lb)
        block = dv.pattern(100 + wr_id)
        dv.fill(src.addr, n, block)
        dv.zero(dst.addr, n, 0xa5)
        loff, roff = 4103, 1001
        soff, doff = (loff, roff) if op == dv.WR_RDMA_WRITE else (roff, loff)
        wc = qp.run_rdma(wr_id, op, lb.addr + loff, ln, lkey,
                         rb.addr + roff, rkey)
        expect_wc(wc, wr_id, dv.WC_SUCCESS,
                  dv.WC_RDMA_WRITE if op == dv.WR_RDMA_WRITE
                  else dv.WC_RDMA_READ, qp_num=qp.qpn)
        if op == dv.WR_RDMA_READ:
            assert wc.byte_len == ln, dv.wc_str(wc)
        assert dv.read(dst.addr + doff, ln) == \
            dv.expected(block, soff, ln), f'case {wr_id}: data differs'
        assert guard_ok(dst.addr, doff, ln, n, 0xa5), \
            f'case {wr_id}: bytes outside the target range changed'
    assert qp.state() == dv.QPS_RTS


@pytest.mark.parametrize('side', ['local', 'remote'])
@pytest.mark.parametrize('opname', ['write', 'read'])
def test_cached_mr_keys_dead_after_munmap(c, cache_on, side, opname):
    """munmap of a cached MR's range invalidates it: a standard RDMA WQE
    with its old lkey (LOC_PROT_ERR) or rkey (REM_ACCESS_ERR) fails, the
    QP goes to ERR, and neither the old pages (still reachable through a
    second mapping of the same memfd) nor new memory mapped at the address
    receive anything."""
    n = 256 * KiB
    op = dv.WR_RDMA_WRITE if opname == 'write' else dv.WR_RDMA_READ
    fd = os.memfd_create('bzc-cached-mr')
    addr = view = None
    try:
        os.ftruncate(fd, n)
        view = dv.mmap_fd(n, fd, None, flags=dv.MAP_SHARED)
        addr = dv.mmap_fd(n, fd, None, flags=dv.MAP_SHARED)
        other = c.buf(n)
        om = c.mr(other.addr, n)
        cm = c.cached(addr, n)
        qp = c.rc_qp(loopback_gid_index())
        # it works while mapped, and writes land in the memfd's pages
        dv.fill(other.addr, n, dv.pattern(7))
        wc = qp.run_rdma(1, dv.WR_RDMA_WRITE, other.addr, n, om.lkey,
                         addr, cm.rkey)
        expect_wc(wc, 1, dv.WC_SUCCESS, dv.WC_RDMA_WRITE)
        assert dv.memcmp(view, other.addr, n) == 0

        dv.zero(view, n, 0x3c)
        s0 = c.cache_stats()
        dv.munmap(addr, n)
        assert dv.mmap_anon(n, addr, fixed=True) == addr
        dv.zero(addr, n, 0x77)
        s1 = c.cache_stats()
        assert s1.invalidations >= s0.invalidations + 1, \
            (s0.as_dict(), s1.as_dict())
        dv.zero(other.addr, n, 0x5e)

        if side == 'local':
            lkey, laddr, rkey, raddr = cm.lkey, addr, om.rkey, other.addr
            want = dv.WC_LOC_PROT_ERR
        else:
            lkey, laddr, rkey, raddr = om.lkey, other.addr, cm.rkey, addr
            want = dv.WC_REM_ACCESS_ERR
        wc = qp.run_rdma(2, op, laddr, n, lkey, raddr, rkey)
        expect_wc(wc, 2, want)
        assert h.wait_until(lambda: qp.state() == dv.QPS_ERR, 5), \
            f'QP state {qp.state()} after the error'
        # a WQE posted now is flushed (or refused), never executed
        rc = qp.post_rdma(3, dv.WR_RDMA_WRITE, other.addr, n, om.lkey,
                          addr, cm.rkey)
        if rc == 0:
            expect_wc(qp.cq.wait(1)[0], 3, dv.WC_WR_FLUSH_ERR)
        qp.cq.assert_empty()
        assert dv.read(view, n) == b'\x3c' * n, 'old (unmapped) pages changed'
        assert dv.read(addr, n) == b'\x77' * n, \
            'new memory at the address changed'
        assert dv.read(other.addr, n) == b'\x5e' * n, 'the normal MR changed'
    finally:
        for a in (addr, view):
            if a:
                dv.munmap(a, n)
        os.close(fd)


def _set_param(name, value):
    with open(f'{PARAMS}/{name}', 'w') as f:
        f.write(str(value))


def test_lkey0_with_cache_disabled(c):
    """mr_cache_max_mb=0: lkey 0 is a local protection error and
    bzcdv_reg_mr_cached() fails; both work again with the cache on."""
    path = f'{PARAMS}/mr_cache_max_mb'
    if not os.path.exists(path):
        pytest.fail('module parameter mr_cache_max_mb missing')
    if not os.access(path, os.W_OK) or not (os.stat(path).st_mode & 0o200):
        pytest.skip('mr_cache_max_mb is not writable at runtime '
                    '(needs a module reload with the parameter)')
    old = int(h.read_file(path))
    n = 1 * MiB
    src, dst = c.buf(n), c.buf(n)
    try:
        _set_param('mr_cache_max_mb', 0)
        assert c.query_device().mr_cache_max_bytes == 0
        # a PD (and channel) made while the cache is off
        pd2 = c.alloc_pd()
        dmr = c.mr(dst.addr, n, pd=pd2)
        ch = c.chan(depth=4, pd=pd2)
        wr = {'op': dv.BULK_COPY, 'sges': [(src.addr, n, 0)],
              'raddr': dst.addr, 'rkey': dmr.lkey}
        wc = ch.run([wr])[0]
        assert wc.status == dv.WC_LOC_PROT_ERR, dv.wc_str(wc)
        with pytest.raises(OSError) as e:
            dv.CachedMr(pd2, src.addr, n)
        assert e.value.errno == errno.EOPNOTSUPP
    finally:
        _set_param('mr_cache_max_mb', old)
    if old:
        pd3 = c.alloc_pd()
        dmr = c.mr(dst.addr, n, pd=pd3)
        ch = c.chan(depth=4, pd=pd3)
        wr = dict(wr, rkey=dmr.lkey)
        assert ch.run([wr])[0].status == dv.WC_SUCCESS


# --------------------------------------------------------------------------
# Several processes
# --------------------------------------------------------------------------

class Peer(h.LineChild):
    def __init__(self, *args):
        super().__init__('bulk_peer.py', *args, exit_key='cmd', timeout=300)


@pytest.fixture
def peer(bulk):
    p = Peer('serve', 64 * MiB)
    try:
        yield p, p.read()
    finally:
        p.close()


def test_two_processes(c, peer):
    p, info = peer
    size = info['size']
    rnd = random.Random('two')
    buf = c.buf(size)
    mr = c.mr(buf.addr, size)
    recv_cq = c.cq(64)
    ch = c.chan(c.cq(64), depth=16, recv_cq=recv_cq)
    # both processes consent: each names the other
    assert ch.connect(bytes.fromhex(info['gid']), info['chan']) == 0
    assert p.ask(cmd='connect', gid=c.loopback_gid()[1].hex(),
                 chan=ch.num) == {'rc': 0}
    for i in range(4):
        n = rnd.randint(1, size // 2)
        off = rnd.randint(0, size - n)
        seed = rnd.randrange(1 << 30)
        # WRITE into the peer; it checks
        dv.fill(buf.addr, n, dv.pattern(seed))
        wc = ch.run([{'op': dv.BULK_WRITE, 'wr_id': i,
                      'sges': [(buf.addr, n, mr.lkey)],
                      'raddr': info['addr'] + off, 'rkey': info['rkey'],
                      'rchan': info['chan']}])[0]
        expect_wc(wc, i, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, n, ch.num)
        assert p.ask(cmd='check', off=off, len=n, seed=seed)['ok']
        # READ from the peer
        seed2 = seed + 1
        p.ask(cmd='fill', off=off, len=n, seed=seed2)
        dv.zero(buf.addr, size, 0)
        wc = ch.run([{'op': dv.BULK_READ, 'wr_id': 10 + i,
                      'sges': [(buf.addr + 3, n, mr.lkey)],
                      'raddr': info['addr'] + off, 'rkey': info['rkey'],
                      'rchan': info['chan']}])[0]
        expect_wc(wc, 10 + i, dv.WC_SUCCESS, dv.WC_RDMA_READ, n, ch.num)
        exp = dv.Buffer(n)
        dv.fill(exp.addr, n, dv.pattern(seed2))
        assert dv.memcmp(buf.addr + 3, exp.addr, n) == 0
        exp.close()
    # WRITE_WITH_IMM: the peer's receive CQ
    dv.fill(buf.addr, MiB, dv.pattern(5))
    wc = ch.run([{'op': dv.BULK_WRITE_WITH_IMM, 'wr_id': 77,
                  'sges': [(buf.addr, MiB, mr.lkey)], 'raddr': info['addr'],
                  'rkey': info['rkey'], 'rchan': info['chan'],
                  'imm': 0x01020304}])[0]
    expect_wc(wc, 77, dv.WC_SUCCESS, dv.WC_RDMA_WRITE, MiB)
    r = p.ask(cmd='recv', n=1)['wcs'][0]
    assert r['flags'] & dv.WC_WITH_IMM, r
    assert (r['status'], r['opcode'], r['byte_len'], r['imm'], r['qp_num'],
            r['src_qp']) == (dv.WC_SUCCESS, dv.WC_RECV_RDMA_WITH_IMM, MiB,
                             0x01020304, info['chan'], ch.num), r
    assert p.ask(cmd='check', off=0, len=MiB, seed=5)['ok']
    # and the peer writes into this process
    dv.zero(buf.addr, size, 0)
    ans = p.ask(cmd='write_to', len=3 * MiB + 1, seed=6, raddr=buf.addr + 1,
                rkey=mr.rkey, rchan=ch.num)
    assert ans == {'status': dv.WC_SUCCESS, 'byte_len': 3 * MiB + 1}
    exp = dv.Buffer(3 * MiB + 1)
    dv.fill(exp.addr, 3 * MiB + 1, dv.pattern(6))
    assert dv.memcmp(buf.addr + 1, exp.addr, 3 * MiB + 1) == 0
    exp.close()


def test_several_processes_several_channels(bulk):
    peers = [Peer('selftest', 1000 + k, 12) for k in range(3)]
    try:
        for p in peers:
            assert p.read(600) == {'ok': 12}
    finally:
        for p in peers:
            if p.p.poll() is None:
                p.p.kill()
            p.p.wait()


@pytest.mark.big
def test_sigkill_mid_transfer_leaks_nothing(bulk):
    """SIGKILL while 1 GiB transfers run: the kernel flushes the channel,
    unpins everything (MemAvailable comes back) and drops every object."""
    res0 = h.rdma_res_summary()
    mem0 = h.meminfo()['MemAvailable']
    pins0 = h.pinned_pages()
    p = Peer('hold', GiB)
    try:
        ans = p.read(600)
        assert ans['posted'], ans
        assert h.pinned_pages() > pins0, 'the peer pinned nothing?'
        time.sleep(0.3)                 # in the middle of the first copy
        p.p.send_signal(signal.SIGKILL)
        assert p.p.wait(120) == -signal.SIGKILL
    finally:
        if p.p.poll() is None:
            p.p.kill()
            p.p.wait()
    assert h.wait_until(lambda: h.rdma_res_summary() == res0, timeout=120), \
        (res0, h.rdma_res_summary())
    # 2 GiB were pinned; all of it must be free again (slack for caches)
    assert h.wait_until(
        lambda: h.meminfo()['MemAvailable'] > mem0 - 256 * 1024, timeout=120), \
        (mem0, h.meminfo()['MemAvailable'])
    # every page pinned for the process (MRs, MR cache) is unpinned again
    assert h.wait_until(lambda: h.pinned_pages() <= pins0, timeout=60), \
        (pins0, h.pinned_pages())
