# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""ctypes binding of libbzc.so.1 (<infiniband/bzcdv.h>) for the tests, with
the few libibverbs calls the bulk tests need (context, PD, CQ, MR, poll,
and a self-connected RC QP with ibv_post_send for RDMA WRITE / READ).

Everything goes through ctypes rather than pyverbs so that the raw
ibv_context / ibv_pd / ibv_cq pointers can be handed to bzcdv_* calls.
The library is the one in the build tree ($BZC_BUILD/providers/bzc/
libbzc.so.1); RDMAV_DRIVERS makes libibverbs load the same file (through
the libbzc-rdmav34.so symlink), so bzcdv_is_supported() recognises its
devices.  Layouts are those of rdma-core 44 on x86-64 and of bzcdv.h.
"""

import ctypes
import errno
import mmap
import os
import time

BUILD = os.environ.get('BZC_BUILD') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', 'build')
LIB_PATH = os.path.join(BUILD, 'providers', 'bzc', 'libbzc.so.1')

NO_BULK_REASON = 'kernel bzc without BZC_CAP_BULK (bulk channels)'

_ibv = ctypes.CDLL('libibverbs.so.1', use_errno=True)
_libc = ctypes.CDLL(None, use_errno=True)
lib = ctypes.CDLL(LIB_PATH, use_errno=True)

# enum ibv_wc_status / ibv_wc_opcode / flags (verbs.h)
WC_SUCCESS = 0
WC_LOC_LEN_ERR = 1
WC_LOC_QP_OP_ERR = 2
WC_LOC_PROT_ERR = 4
WC_WR_FLUSH_ERR = 5
WC_REM_INV_REQ_ERR = 9
WC_REM_ACCESS_ERR = 10
WC_RDMA_WRITE = 1
WC_RDMA_READ = 2
WC_RECV_RDMA_WITH_IMM = 129
WC_DRIVER1 = 135
WC_BULK_COPY = WC_DRIVER1           # BZCDV_WC_BULK_COPY
WC_WITH_IMM = 1 << 1

ACCESS_LOCAL_WRITE = 1
ACCESS_REMOTE_WRITE = 2
ACCESS_REMOTE_READ = 4
ACCESS_ALL = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ
ACCESS_ZERO_BASED = 1 << 5

# bzcdv.h
BULK_WRITE = 0
BULK_WRITE_WITH_IMM = 1
BULK_READ = 2
BULK_COPY = 3
BULK_FENCE = 1 << 0
CHAN_INIT_ATTR_MASK_RECV_CQ = 1 << 0
DEVICE_ATTR_MASK_MAX_CHANS = 1 << 0
DEVICE_ATTR_MASK_CAPS = 1 << 1
DEVICE_CAP_EXPORT_DM = 1 << 0
DEVICE_CAP_BULK_ODP = 1 << 1
GID_TBL_LEN = 128                   # port 1 of a bzc device
MR_CACHED_HIT = 1 << 0
BYTE_LEN_SATURATED = 0xffffffff
OP_WC = {BULK_WRITE: WC_RDMA_WRITE, BULK_WRITE_WITH_IMM: WC_RDMA_WRITE,
         BULK_READ: WC_RDMA_READ, BULK_COPY: WC_BULK_COPY}


class IbvCq(ctypes.Structure):
    _fields_ = [('context', ctypes.c_void_p), ('channel', ctypes.c_void_p),
                ('cq_context', ctypes.c_void_p), ('handle', ctypes.c_uint32),
                ('cqe', ctypes.c_int)]


class IbvMr(ctypes.Structure):
    _fields_ = [('context', ctypes.c_void_p), ('pd', ctypes.c_void_p),
                ('addr', ctypes.c_void_p), ('length', ctypes.c_size_t),
                ('handle', ctypes.c_uint32), ('lkey', ctypes.c_uint32),
                ('rkey', ctypes.c_uint32)]


class IbvAllocDmAttr(ctypes.Structure):
    _fields_ = [('length', ctypes.c_size_t), ('log_align_req', ctypes.c_uint32),
                ('comp_mask', ctypes.c_uint32)]


# struct ibv_dm: context, memcpy_to_dm, memcpy_from_dm, comp_mask, handle
_DM_TO_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                             ctypes.c_void_p, ctypes.c_size_t)
_DM_FROM_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_uint64, ctypes.c_size_t)


class IbvDm(ctypes.Structure):
    _fields_ = [('context', ctypes.c_void_p), ('memcpy_to_dm', _DM_TO_FN),
                ('memcpy_from_dm', _DM_FROM_FN),
                ('comp_mask', ctypes.c_uint32), ('handle', ctypes.c_uint32)]


class ExportDmAttr(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint64), ('fd', ctypes.c_int)]


class IbvWc(ctypes.Structure):
    _fields_ = [('wr_id', ctypes.c_uint64), ('status', ctypes.c_int),
                ('opcode', ctypes.c_int), ('vendor_err', ctypes.c_uint32),
                ('byte_len', ctypes.c_uint32), ('imm_data', ctypes.c_uint32),
                ('qp_num', ctypes.c_uint32), ('src_qp', ctypes.c_uint32),
                ('wc_flags', ctypes.c_uint), ('pkey_index', ctypes.c_uint16),
                ('slid', ctypes.c_uint16), ('sl', ctypes.c_uint8),
                ('dlid_path_bits', ctypes.c_uint8)]


assert ctypes.sizeof(IbvWc) == 48


class DeviceAttr(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint64),
                ('max_bulk_len', ctypes.c_uint64),
                ('mr_cache_max_bytes', ctypes.c_uint64),
                ('max_bulk_sge', ctypes.c_uint32),
                ('max_chan_depth', ctypes.c_uint32),
                ('seg_bytes', ctypes.c_uint32),
                ('workers', ctypes.c_uint32),
                ('max_chans', ctypes.c_uint32),
                ('pad', ctypes.c_uint32),
                ('caps', ctypes.c_uint64)]


class ChanInitAttr(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint64), ('pd', ctypes.c_void_p),
                ('cq', ctypes.c_void_p), ('depth', ctypes.c_uint32),
                ('recv_cq', ctypes.c_void_p)]


class BulkChan(ctypes.Structure):
    _fields_ = [('context', ctypes.c_void_p), ('pd', ctypes.c_void_p),
                ('cq', ctypes.c_void_p), ('recv_cq', ctypes.c_void_p),
                ('chan_num', ctypes.c_uint32), ('depth', ctypes.c_uint32),
                ('max_sge', ctypes.c_uint32)]


class ConnAttr(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint64),
                ('remote_gid', ctypes.c_uint8 * 16),
                ('remote_chan', ctypes.c_uint32),
                ('sgid_index', ctypes.c_uint8)]


assert ctypes.sizeof(ConnAttr) == 32 and ConnAttr.remote_chan.offset == 24


class Sge(ctypes.Structure):
    _fields_ = [('addr', ctypes.c_uint64), ('length', ctypes.c_uint64),
                ('lkey', ctypes.c_uint32)]


class BulkWr(ctypes.Structure):
    pass


BulkWr._fields_ = [('wr_id', ctypes.c_uint64),
                   ('next', ctypes.POINTER(BulkWr)),
                   ('sg_list', ctypes.POINTER(Sge)),
                   ('num_sge', ctypes.c_uint32),
                   ('opcode', ctypes.c_int),
                   ('flags', ctypes.c_uint32),
                   ('imm_data', ctypes.c_uint32),     # __be32
                   ('remote_addr', ctypes.c_uint64),
                   ('rkey', ctypes.c_uint32),
                   ('remote_chan', ctypes.c_uint32)]


class MrCached(ctypes.Structure):
    _fields_ = [('pd', ctypes.c_void_p), ('addr', ctypes.c_void_p),
                ('length', ctypes.c_size_t), ('lkey', ctypes.c_uint32),
                ('rkey', ctypes.c_uint32), ('flags', ctypes.c_uint32)]


class MrCacheStats(ctypes.Structure):
    _fields_ = [('comp_mask', ctypes.c_uint64), ('hits', ctypes.c_uint64),
                ('misses', ctypes.c_uint64), ('evictions', ctypes.c_uint64),
                ('invalidations', ctypes.c_uint64),
                ('pinned_bytes', ctypes.c_uint64),
                ('entries', ctypes.c_uint64)]

    def as_dict(self):
        return {f: getattr(self, f) for f, _ in self._fields_}


VP = ctypes.c_void_p
lib.bzcdv_is_supported.restype = ctypes.c_bool
lib.bzcdv_is_supported.argtypes = [VP]
lib.bzcdv_query_device.restype = ctypes.c_int
lib.bzcdv_query_device.argtypes = [VP, ctypes.POINTER(DeviceAttr)]
lib.bzcdv_create_bulk_chan.restype = ctypes.POINTER(BulkChan)
lib.bzcdv_create_bulk_chan.argtypes = [VP, ctypes.POINTER(ChanInitAttr)]
lib.bzcdv_destroy_bulk_chan.restype = ctypes.c_int
lib.bzcdv_destroy_bulk_chan.argtypes = [ctypes.POINTER(BulkChan)]
lib.bzcdv_connect_bulk_chan.restype = ctypes.c_int
# Optional: libbzc from before BZC_1.3 has no bzcdv_connect_bulk_chan_qp.
if hasattr(lib, 'bzcdv_connect_bulk_chan_qp'):
    lib.bzcdv_connect_bulk_chan_qp.restype = ctypes.c_int
    lib.bzcdv_connect_bulk_chan_qp.argtypes = [ctypes.POINTER(BulkChan),
                                               ctypes.c_void_p]
lib.bzcdv_connect_bulk_chan.argtypes = [ctypes.POINTER(BulkChan),
                                        ctypes.POINTER(ConnAttr)]
lib.bzcdv_post_bulk.restype = ctypes.c_int
lib.bzcdv_post_bulk.argtypes = [ctypes.POINTER(BulkChan),
                                ctypes.POINTER(BulkWr),
                                ctypes.POINTER(ctypes.POINTER(BulkWr))]
lib.bzcdv_reg_mr_cached.restype = ctypes.POINTER(MrCached)
lib.bzcdv_reg_mr_cached.argtypes = [VP, VP, ctypes.c_size_t, ctypes.c_uint]
lib.bzcdv_release_mr_cached.restype = ctypes.c_int
lib.bzcdv_release_mr_cached.argtypes = [ctypes.POINTER(MrCached)]
lib.bzcdv_query_mr_cache.restype = ctypes.c_int
lib.bzcdv_query_mr_cache.argtypes = [VP, ctypes.POINTER(MrCacheStats)]
lib.bzcdv_export_dm.restype = ctypes.c_int
lib.bzcdv_export_dm.argtypes = [VP, ctypes.POINTER(ExportDmAttr)]

_ibv.ibv_get_device_list.restype = ctypes.POINTER(VP)
_ibv.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
_ibv.ibv_free_device_list.argtypes = [ctypes.POINTER(VP)]
_ibv.ibv_get_device_name.restype = ctypes.c_char_p
_ibv.ibv_get_device_name.argtypes = [VP]
_ibv.ibv_open_device.restype = VP
_ibv.ibv_open_device.argtypes = [VP]
_ibv.ibv_close_device.restype = ctypes.c_int
_ibv.ibv_close_device.argtypes = [VP]
_ibv.ibv_alloc_pd.restype = VP
_ibv.ibv_alloc_pd.argtypes = [VP]
_ibv.ibv_dealloc_pd.restype = ctypes.c_int
_ibv.ibv_dealloc_pd.argtypes = [VP]
_ibv.ibv_create_cq.restype = ctypes.POINTER(IbvCq)
_ibv.ibv_create_cq.argtypes = [VP, ctypes.c_int, VP, VP, ctypes.c_int]
_ibv.ibv_destroy_cq.restype = ctypes.c_int
_ibv.ibv_destroy_cq.argtypes = [VP]
_ibv.ibv_reg_mr.restype = ctypes.POINTER(IbvMr)
_ibv.ibv_reg_mr.argtypes = [VP, VP, ctypes.c_size_t, ctypes.c_int]
_ibv.ibv_reg_dmabuf_mr.restype = ctypes.POINTER(IbvMr)
_ibv.ibv_reg_dmabuf_mr.argtypes = [VP, ctypes.c_uint64, ctypes.c_size_t,
                                   ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
_ibv.ibv_dereg_mr.restype = ctypes.c_int
_ibv.ibv_dereg_mr.argtypes = [VP]

_POLL_FN = ctypes.CFUNCTYPE(ctypes.c_int, VP, ctypes.c_int,
                            ctypes.POINTER(IbvWc))
# ibv_poll_cq() is inline: context->ops.poll_cq, ops[11] of struct
# ibv_context_ops (rdma-core 44), right after the device pointer.
_POLL_CQ_SLOT = 11

_libc.mmap.restype = VP
_libc.mmap.argtypes = [VP, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [VP, ctypes.c_size_t]
_libc.memcmp.restype = ctypes.c_int
_libc.memcmp.argtypes = [VP, VP, ctypes.c_size_t]
_libc.memset.restype = VP
_libc.memset.argtypes = [VP, ctypes.c_int, ctypes.c_size_t]
_libc.madvise.restype = ctypes.c_int
_libc.madvise.argtypes = [VP, ctypes.c_size_t, ctypes.c_int]

PROT_NONE = 0
PROT_RW = mmap.PROT_READ | mmap.PROT_WRITE
MAP_SHARED = mmap.MAP_SHARED
MAP_PRIVATE = mmap.MAP_PRIVATE
MAP_ANONYMOUS = mmap.MAP_ANONYMOUS
MAP_FIXED = 0x10
MAP_NORESERVE = 0x4000
MAP_FAILED = ctypes.c_void_p(-1).value


class DvError(OSError):
    pass


def _raise(rc, what):
    raise DvError(rc, f'{what}: {os.strerror(rc)}')


def _errno_raise(what):
    _raise(ctypes.get_errno(), what)


# --------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------

def mmap_anon(length, addr=None, fixed=False):
    flags = MAP_PRIVATE | MAP_ANONYMOUS | (MAP_FIXED if fixed else 0)
    p = _libc.mmap(addr, length, PROT_RW, flags, -1, 0)
    if p in (None, MAP_FAILED):
        _errno_raise('mmap')
    return p


def mmap_fd(length, fd, addr, prot=PROT_RW, flags=MAP_SHARED | MAP_FIXED):
    p = _libc.mmap(addr, length, prot, flags, fd, 0)
    if p in (None, MAP_FAILED):
        _errno_raise('mmap')
    return p


def reserve(length):
    """Address space only (PROT_NONE), to map other things into."""
    p = _libc.mmap(None, length, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if p in (None, MAP_FAILED):
        _errno_raise('mmap')
    return p


def reserve_rw(length):
    """Writable address space that nothing backs yet (MAP_NORESERVE): as
    large as the caller likes, as long as nobody touches it."""
    p = _libc.mmap(None, length, PROT_RW,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if p in (None, MAP_FAILED):
        _errno_raise('mmap')
    return p


class _CapHeader(ctypes.Structure):
    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [('effective', ctypes.c_uint32), ('permitted', ctypes.c_uint32),
                ('inheritable', ctypes.c_uint32)]


_CAP_V3 = 0x20080522
CAP_IPC_LOCK = 14


def drop_cap_ipc_lock():
    """Drop CAP_IPC_LOCK from this process (root stays root otherwise), so
    that RLIMIT_MEMLOCK binds it."""
    hdr = _CapHeader(_CAP_V3, 0)
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(hdr), data):
        _errno_raise('capget')
    data[0].effective &= ~(1 << CAP_IPC_LOCK)
    data[0].permitted &= ~(1 << CAP_IPC_LOCK)
    if _libc.capset(ctypes.byref(hdr), data):
        _errno_raise('capset')


def munmap(addr, length):
    if _libc.munmap(addr, length):
        _errno_raise('munmap')


MADV_DONTNEED = 4


def madvise(addr, length, advice):
    if _libc.madvise(addr, length, advice):
        _errno_raise('madvise')


def memcmp(a, b, n):
    return _libc.memcmp(a, b, n)


def write(addr, data):
    ctypes.memmove(addr, data, len(data))


def read(addr, n):
    return ctypes.string_at(addr, n)


def fill(addr, length, block, start=0):
    """Tile @block over [addr, addr+length), beginning at block[start]:
    fast, and with a block length that is not a power of two every page
    gets different contents."""
    done = 0
    pos = start % len(block)
    while done < length:
        n = min(len(block) - pos, length - done)
        ctypes.memmove(addr + done, block[pos:pos + n] if pos else block, n)
        done += n
        pos = 0


def pattern(seed, length=(1 << 20) + 4099):
    """A reproducible random block (see fill())."""
    import random
    return random.Random(seed).randbytes(length)


def zero(addr, length, byte=0):
    _libc.memset(addr, byte, length)


def expected(block, offset, length):
    """What fill(…, block) put at [offset, offset+length)."""
    out = bytearray()
    pos = offset % len(block)
    while len(out) < length:
        take = min(len(block) - pos, length - len(out))
        out += block[pos:pos + take]
        pos = 0
    return bytes(out)


class Buffer:
    """Anonymous private memory (page aligned), unmapped on close()."""

    def __init__(self, length, addr=None, fixed=False):
        self.length = length
        self.addr = mmap_anon(length, addr, fixed)

    def close(self):
        if self.addr:
            munmap(self.addr, self.length)
            self.addr = None


# --------------------------------------------------------------------------
# Verbs objects through ctypes
# --------------------------------------------------------------------------

def device_names():
    n = ctypes.c_int(0)
    lst = _ibv.ibv_get_device_list(ctypes.byref(n))
    if not lst:
        _errno_raise('ibv_get_device_list')
    try:
        return [_ibv.ibv_get_device_name(lst[i]).decode()
                for i in range(n.value)]
    finally:
        _ibv.ibv_free_device_list(lst)


def is_supported(name):
    n = ctypes.c_int(0)
    lst = _ibv.ibv_get_device_list(ctypes.byref(n))
    try:
        for i in range(n.value):
            if _ibv.ibv_get_device_name(lst[i]).decode() == name:
                return bool(lib.bzcdv_is_supported(lst[i]))
        raise DvError(errno.ENODEV, f'no device {name}')
    finally:
        _ibv.ibv_free_device_list(lst)


class Mr:
    def __init__(self, pd, addr, length, access=ACCESS_ALL):
        self.p = _ibv.ibv_reg_mr(pd, addr, length, access)
        if not self.p:
            _errno_raise('ibv_reg_mr')
        self.addr, self.length = addr, length
        self.lkey = self.p.contents.lkey
        self.rkey = self.p.contents.rkey

    def close(self):
        if self.p:
            rc = _ibv.ibv_dereg_mr(self.p)
            self.p = None
            if rc:
                _raise(rc, 'ibv_dereg_mr')


class DmabufMr(Mr):
    """ibv_reg_dmabuf_mr(): @length bytes at @offset of dma-buf @fd,
    addressed from @iova."""

    def __init__(self, pd, offset, length, iova, fd, access=ACCESS_ALL):
        self.p = _ibv.ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access)
        if not self.p:
            _errno_raise('ibv_reg_dmabuf_mr')
        self.addr, self.length = iova, length
        self.lkey = self.p.contents.lkey
        self.rkey = self.p.contents.rkey


# ibv_alloc_dm(), ibv_free_dm() and ibv_reg_dm_mr() are inline in verbs.h:
# they call ops of struct verbs_context, which ends with struct ibv_context
# and grows only at its start, so the ops sit at fixed negative offsets
# from the ibv_context (rdma-core 44 to 56).
_VCTX_REG_DM_MR, _VCTX_ALLOC_DM, _VCTX_FREE_DM = -264, -256, -248
_ALLOC_DM_FN = ctypes.CFUNCTYPE(ctypes.POINTER(IbvDm), VP,
                                ctypes.POINTER(IbvAllocDmAttr))
_FREE_DM_FN = ctypes.CFUNCTYPE(ctypes.c_int, VP)
_REG_DM_MR_FN = ctypes.CFUNCTYPE(ctypes.POINTER(IbvMr), VP, VP,
                                 ctypes.c_uint64, ctypes.c_size_t,
                                 ctypes.c_uint)


def _vctx_op(ctx_p, off, proto):
    fn = ctypes.c_void_p.from_address(ctx_p + off).value
    if not fn:
        raise DvError(errno.EOPNOTSUPP, 'op not in verbs_context')
    return proto(fn)


class Dm:
    """ibv_alloc_dm() of @length bytes; to()/frm() copy in and out,
    mr() registers a (zero-based) DM MR, export() makes a dma-buf fd
    (bzcdv_export_dm)."""

    def __init__(self, ctx, length):
        attr = IbvAllocDmAttr(length=length)
        self.ctx = ctx
        self.p = _vctx_op(ctx.p, _VCTX_ALLOC_DM, _ALLOC_DM_FN)(
            ctx.p, ctypes.byref(attr))
        if not self.p:
            _errno_raise('ibv_alloc_dm')
        assert self.p.contents.context == ctx.p
        self.length = length

    def to(self, off, data):
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        rc = self.p.contents.memcpy_to_dm(ctypes.cast(self.p, VP), off, buf,
                                          len(data))
        if rc:
            _raise(rc, 'ibv_memcpy_to_dm')

    def frm(self, off, n):
        buf = ctypes.create_string_buffer(n)
        rc = self.p.contents.memcpy_from_dm(buf, ctypes.cast(self.p, VP),
                                            off, n)
        if rc:
            _raise(rc, 'ibv_memcpy_from_dm')
        return buf.raw

    def mr(self, pd, off, length, access):
        return self.ctx.track(DmMr(self, pd, off, length, access))

    def export(self, comp_mask=0):
        """bzcdv_export_dm(): the dma-buf fd (the caller closes it)."""
        a = ExportDmAttr(comp_mask=comp_mask, fd=-1)
        rc = lib.bzcdv_export_dm(ctypes.cast(self.p, VP), ctypes.byref(a))
        if rc:
            _raise(rc, 'bzcdv_export_dm')
        return a.fd

    def close(self):
        if self.p:
            rc = _vctx_op(self.ctx.p, _VCTX_FREE_DM, _FREE_DM_FN)(
                ctypes.cast(self.p, VP))
            if rc:
                _raise(rc, 'ibv_free_dm')
            self.p = None


class DmMr(Mr):
    def __init__(self, dm, pd, off, length, access):
        self.p = _vctx_op(dm.ctx.p, _VCTX_REG_DM_MR, _REG_DM_MR_FN)(
            pd, ctypes.cast(dm.p, VP), off, length, access)
        if not self.p:
            _errno_raise('ibv_reg_dm_mr')
        self.addr, self.length = 0, length
        self.lkey = self.p.contents.lkey
        self.rkey = self.p.contents.rkey


class Cq:
    def __init__(self, ctx, cqe):
        self.ctx = ctx
        self.p = _ibv.ibv_create_cq(ctx.p, cqe, None, None, 0)
        if not self.p:
            _errno_raise('ibv_create_cq')
        ops = ctypes.cast(ctx.p + 8, ctypes.POINTER(VP * 32)).contents
        self._poll = _POLL_FN(ops[_POLL_CQ_SLOT])

    def poll(self, n=16):
        wcs = (IbvWc * n)()
        got = self._poll(ctypes.cast(self.p, VP), n, wcs)
        if got < 0:
            raise DvError(-got if got < 0 else 0, 'ibv_poll_cq failed')
        return list(wcs[:got])

    def wait(self, count, timeout=120.0):
        """Exactly @count completions, or AssertionError after @timeout."""
        out = []
        end = time.monotonic() + timeout
        while len(out) < count:
            out += self.poll(min(64, count - len(out)))
            if len(out) < count:
                if time.monotonic() > end:
                    raise AssertionError(
                        f'{len(out)} of {count} completions after {timeout}s')
                time.sleep(0.0005)
        return out

    def assert_empty(self, settle=0.2):
        time.sleep(settle)
        extra = self.poll(16)
        assert not extra, f'unexpected completions: {[wc_str(w) for w in extra]}'

    def close(self):
        if self.p:
            rc = _ibv.ibv_destroy_cq(self.p)
            self.p = None
            if rc:
                _raise(rc, 'ibv_destroy_cq')


def wc_imm(wc):
    """ibv_wc.imm_data (network order in memory) as a number."""
    return int.from_bytes(wc.imm_data.to_bytes(4, 'little'), 'big')


def wc_str(wc):
    return (f'wr_id={wc.wr_id} status={wc.status} opcode={wc.opcode} '
            f'byte_len={wc.byte_len} qp_num={wc.qp_num} src_qp={wc.src_qp} '
            f'flags={wc.wc_flags:#x} imm={wc.imm_data:#x}')


class Chan:
    def __init__(self, ctx, pd, cq, depth=16, recv_cq=None, comp_mask=None):
        attr = ChanInitAttr()
        attr.pd = pd
        attr.cq = ctypes.cast(cq.p, VP) if cq else None
        attr.depth = depth
        if recv_cq is not None:
            attr.recv_cq = ctypes.cast(recv_cq.p, VP)
            attr.comp_mask = CHAN_INIT_ATTR_MASK_RECV_CQ
        if comp_mask is not None:
            attr.comp_mask = comp_mask
        self.p = lib.bzcdv_create_bulk_chan(ctx.p, ctypes.byref(attr))
        if not self.p:
            _errno_raise('bzcdv_create_bulk_chan')
        self.ctx, self.cq, self.recv_cq = ctx, cq, recv_cq
        c = self.p.contents
        self.num, self.depth, self.max_sge = c.chan_num, c.depth, c.max_sge

    def connect(self, remote_gid, remote_chan, sgid_index=None, comp_mask=0):
        """bzcdv_connect_bulk_chan(); the errno (0 when connected).
        sgid_index defaults to the context's ::ffff:$BZC_IPV4 GID."""
        a = ConnAttr(comp_mask=comp_mask, remote_chan=remote_chan,
                     sgid_index=self.ctx.loopback_gid()[0]
                     if sgid_index is None else sgid_index)
        ctypes.memmove(a.remote_gid, bytes(remote_gid), 16)
        return lib.bzcdv_connect_bulk_chan(self.p, ctypes.byref(a))

    def connect_qp(self, qp):
        """bzcdv_connect_bulk_chan_qp() with RcQp @qp; the errno."""
        return lib.bzcdv_connect_bulk_chan_qp(self.p,
                                              ctypes.cast(qp.p, VP))

    def connect_to(self, other):
        """Connect to channel @other (another Chan, maybe of another
        context of the same device), raising on failure."""
        rc = self.connect(other.ctx.loopback_gid()[1], other.num)
        if rc:
            _raise(rc, f'bzcdv_connect_bulk_chan({self.num} -> {other.num})')

    def post(self, wrs):
        """Post the list of dicts @wrs as one chain.  Returns (rc, index of
        *bad_wr or None)."""
        keep = []
        arr = (BulkWr * len(wrs))()
        for i, w in enumerate(wrs):
            sges = w.get('sges', [])
            sarr = (Sge * max(1, len(sges)))()
            for j, (a, ln, k) in enumerate(sges):
                sarr[j].addr, sarr[j].length, sarr[j].lkey = a, ln, k
            keep.append(sarr)
            arr[i].wr_id = w.get('wr_id', i)
            arr[i].sg_list = sarr
            arr[i].num_sge = w.get('num_sge', len(sges))
            arr[i].opcode = w['op']
            arr[i].flags = w.get('flags', 0)
            arr[i].imm_data = int.from_bytes(
                w.get('imm', 0).to_bytes(4, 'big'), 'little')
            arr[i].remote_addr = w.get('raddr', 0)
            arr[i].rkey = w.get('rkey', 0)
            arr[i].remote_chan = w.get('rchan', 0)
            if i + 1 < len(wrs):
                arr[i].next = ctypes.pointer(arr[i + 1])
        bad = ctypes.POINTER(BulkWr)()
        rc = lib.bzcdv_post_bulk(self.p, ctypes.cast(arr, ctypes.POINTER(BulkWr)),
                                 ctypes.byref(bad))
        idx = None
        if rc and bad:
            base = ctypes.addressof(arr[0])
            idx = (ctypes.addressof(bad.contents) - base) // ctypes.sizeof(BulkWr)
        return rc, idx

    def run(self, wrs, timeout=300.0):
        """Post and wait for one completion per WR."""
        rc, idx = self.post(wrs)
        if rc:
            _raise(rc, f'bzcdv_post_bulk (bad_wr #{idx})')
        return self.cq.wait(len(wrs), timeout)

    def close(self):
        if self.p:
            rc = lib.bzcdv_destroy_bulk_chan(self.p)
            if rc:
                _raise(rc, 'bzcdv_destroy_bulk_chan')
            self.p = None


class CachedMr:
    def __init__(self, pd, addr, length, access=ACCESS_ALL):
        self.p = lib.bzcdv_reg_mr_cached(pd, addr, length, access)
        if not self.p:
            _errno_raise('bzcdv_reg_mr_cached')
        c = self.p.contents
        self.lkey, self.rkey, self.flags = c.lkey, c.rkey, c.flags
        self.hit = bool(c.flags & MR_CACHED_HIT)

    def close(self):
        if self.p:
            rc = lib.bzcdv_release_mr_cached(self.p)
            if rc:
                _raise(rc, 'bzcdv_release_mr_cached')
            self.p = None


# --------------------------------------------------------------------------
# A standard RC QP through ctypes (ibv_create_qp / ibv_modify_qp /
# ibv_query_qp, and ibv_post_send through the context's ops table), for
# tests that hand bzcdv keys to ordinary WQEs on the same PD.
# --------------------------------------------------------------------------

QPT_RC = 2
QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD, QPS_ERR = 0, 1, 2, 3, 4, 6
MTU_1024 = 3
WR_RDMA_WRITE = 0
WR_RDMA_READ = 4
SEND_SIGNALED = 1 << 1
QP_STATE = 1 << 0
QP_ACCESS_FLAGS = 1 << 3
QP_PKEY_INDEX = 1 << 4
QP_PORT = 1 << 5
QP_AV = 1 << 7
QP_PATH_MTU = 1 << 8
QP_TIMEOUT = 1 << 9
QP_RETRY_CNT = 1 << 10
QP_RNR_RETRY = 1 << 11
QP_RQ_PSN = 1 << 12
QP_MAX_QP_RD_ATOMIC = 1 << 13
QP_MIN_RNR_TIMER = 1 << 15
QP_SQ_PSN = 1 << 16
QP_MAX_DEST_RD_ATOMIC = 1 << 17
QP_DEST_QPN = 1 << 20


class IbvQpCap(ctypes.Structure):
    _fields_ = [('max_send_wr', ctypes.c_uint32),
                ('max_recv_wr', ctypes.c_uint32),
                ('max_send_sge', ctypes.c_uint32),
                ('max_recv_sge', ctypes.c_uint32),
                ('max_inline_data', ctypes.c_uint32)]


class IbvQpInitAttr(ctypes.Structure):
    _fields_ = [('qp_context', VP), ('send_cq', VP), ('recv_cq', VP),
                ('srq', VP), ('cap', IbvQpCap), ('qp_type', ctypes.c_int),
                ('sq_sig_all', ctypes.c_int)]


class IbvGlobalRoute(ctypes.Structure):
    # union ibv_gid has __be64 members: 8-byte aligned
    _fields_ = [('dgid', ctypes.c_uint64 * 2), ('flow_label', ctypes.c_uint32),
                ('sgid_index', ctypes.c_uint8), ('hop_limit', ctypes.c_uint8),
                ('traffic_class', ctypes.c_uint8)]


class IbvAhAttr(ctypes.Structure):
    _fields_ = [('grh', IbvGlobalRoute), ('dlid', ctypes.c_uint16),
                ('sl', ctypes.c_uint8), ('src_path_bits', ctypes.c_uint8),
                ('static_rate', ctypes.c_uint8), ('is_global', ctypes.c_uint8),
                ('port_num', ctypes.c_uint8)]


class IbvQpAttr(ctypes.Structure):
    _fields_ = [('qp_state', ctypes.c_int), ('cur_qp_state', ctypes.c_int),
                ('path_mtu', ctypes.c_int), ('path_mig_state', ctypes.c_int),
                ('qkey', ctypes.c_uint32), ('rq_psn', ctypes.c_uint32),
                ('sq_psn', ctypes.c_uint32), ('dest_qp_num', ctypes.c_uint32),
                ('qp_access_flags', ctypes.c_uint), ('cap', IbvQpCap),
                ('ah_attr', IbvAhAttr), ('alt_ah_attr', IbvAhAttr),
                ('pkey_index', ctypes.c_uint16),
                ('alt_pkey_index', ctypes.c_uint16),
                ('en_sqd_async_notify', ctypes.c_uint8),
                ('sq_draining', ctypes.c_uint8),
                ('max_rd_atomic', ctypes.c_uint8),
                ('max_dest_rd_atomic', ctypes.c_uint8),
                ('min_rnr_timer', ctypes.c_uint8), ('port_num', ctypes.c_uint8),
                ('timeout', ctypes.c_uint8), ('retry_cnt', ctypes.c_uint8),
                ('rnr_retry', ctypes.c_uint8), ('alt_port_num', ctypes.c_uint8),
                ('alt_timeout', ctypes.c_uint8), ('rate_limit', ctypes.c_uint32)]


class IbvQp(ctypes.Structure):
    _fields_ = [('context', VP), ('qp_context', VP), ('pd', VP),
                ('send_cq', VP), ('recv_cq', VP), ('srq', VP),
                ('handle', ctypes.c_uint32), ('qp_num', ctypes.c_uint32)]


class IbvSge(ctypes.Structure):
    _fields_ = [('addr', ctypes.c_uint64), ('length', ctypes.c_uint32),
                ('lkey', ctypes.c_uint32)]


class IbvSendWr(ctypes.Structure):
    pass


IbvSendWr._fields_ = [('wr_id', ctypes.c_uint64),
                      ('next', ctypes.POINTER(IbvSendWr)),
                      ('sg_list', ctypes.POINTER(IbvSge)),
                      ('num_sge', ctypes.c_int), ('opcode', ctypes.c_int),
                      ('send_flags', ctypes.c_uint),
                      ('imm_data', ctypes.c_uint32),
                      ('remote_addr', ctypes.c_uint64),     # wr.rdma
                      ('rkey', ctypes.c_uint32),
                      ('_rest', ctypes.c_uint8 * 76)]   # the rest of the unions


# rdma-core 44 x86-64 layouts (checked against <infiniband/verbs.h>)
assert ctypes.sizeof(IbvQpAttr) == 144 and IbvQpAttr.ah_attr.offset == 56
assert IbvQpAttr.port_num.offset == 129 and IbvQpAttr.rate_limit.offset == 136
assert ctypes.sizeof(IbvQpInitAttr) == 64
assert IbvQpInitAttr.qp_type.offset == 52
assert ctypes.sizeof(IbvSendWr) == 128 and IbvSendWr.rkey.offset == 48
assert IbvQp.qp_num.offset == 52

_ibv.ibv_create_qp.restype = ctypes.POINTER(IbvQp)
_ibv.ibv_create_qp.argtypes = [VP, ctypes.POINTER(IbvQpInitAttr)]
_ibv.ibv_destroy_qp.restype = ctypes.c_int
_ibv.ibv_destroy_qp.argtypes = [VP]
_ibv.ibv_modify_qp.restype = ctypes.c_int
_ibv.ibv_modify_qp.argtypes = [VP, ctypes.POINTER(IbvQpAttr), ctypes.c_int]
_ibv.ibv_query_qp.restype = ctypes.c_int
_ibv.ibv_query_qp.argtypes = [VP, ctypes.POINTER(IbvQpAttr), ctypes.c_int,
                              ctypes.POINTER(IbvQpInitAttr)]
_ibv.ibv_query_gid.restype = ctypes.c_int
_ibv.ibv_query_gid.argtypes = [VP, ctypes.c_uint8, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_uint8 * 16)]

class IbvRecvWr(ctypes.Structure):
    pass


IbvRecvWr._fields_ = [('wr_id', ctypes.c_uint64),
                      ('next', ctypes.POINTER(IbvRecvWr)),
                      ('sg_list', ctypes.POINTER(IbvSge)),
                      ('num_sge', ctypes.c_int)]
assert ctypes.sizeof(IbvRecvWr) == 32

_POST_RECV_FN = ctypes.CFUNCTYPE(ctypes.c_int, VP, ctypes.POINTER(IbvRecvWr),
                                 ctypes.POINTER(ctypes.POINTER(IbvRecvWr)))
# ibv_post_recv(): context->ops.post_recv, ops[26].
_POST_RECV_SLOT = 26

_POST_SEND_FN = ctypes.CFUNCTYPE(ctypes.c_int, VP, ctypes.POINTER(IbvSendWr),
                                 ctypes.POINTER(ctypes.POINTER(IbvSendWr)))
# ibv_post_send() is inline too: context->ops.post_send, ops[25].
_POST_SEND_SLOT = 25


class RcQp:
    """An RC QP on @pd with @cq for both queues, brought to RTS addressed
    at itself (loopback through the port's GID @gid_index), or at
    @remote = {'qpn', 'gid' (16 bytes), 'psn'} with our first PSN @psn;
    the attribute values are bzc_helpers.bring_up_qp()'s."""

    def __init__(self, ctx, pd, cq, gid_index, port=1, depth=16,
                 remote=None, psn=0, path_mtu=MTU_1024):
        self.ctx, self.cq = ctx, cq
        ia = IbvQpInitAttr(send_cq=ctypes.cast(cq.p, VP),
                           recv_cq=ctypes.cast(cq.p, VP), qp_type=QPT_RC)
        ia.cap.max_send_wr = ia.cap.max_recv_wr = depth
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1
        self.p = _ibv.ibv_create_qp(pd, ctypes.byref(ia))
        if not self.p:
            _errno_raise('ibv_create_qp')
        self.qpn = self.p.contents.qp_num
        ops = ctypes.cast(ctx.p + 8, ctypes.POINTER(VP * 32)).contents
        self._post = _POST_SEND_FN(ops[_POST_SEND_SLOT])
        self._post_recv = _POST_RECV_FN(ops[_POST_RECV_SLOT])
        gid = (ctypes.c_uint8 * 16)()
        if _ibv.ibv_query_gid(ctx.p, port, gid_index, ctypes.byref(gid)):
            _errno_raise('ibv_query_gid')
        a = IbvQpAttr(qp_state=QPS_INIT, pkey_index=0, port_num=port,
                      qp_access_flags=ACCESS_ALL)
        self._modify(a, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS)
        self.gid = bytes(gid)
        if remote is None:
            remote = {'qpn': self.qpn, 'gid': self.gid, 'psn': psn}
        a = IbvQpAttr(qp_state=QPS_RTR, path_mtu=path_mtu,
                      dest_qp_num=remote['qpn'], rq_psn=remote['psn'],
                      max_dest_rd_atomic=4, min_rnr_timer=1)
        ctypes.memmove(ctypes.addressof(a.ah_attr.grh.dgid), remote['gid'],
                       16)
        a.ah_attr.grh.sgid_index = gid_index
        a.ah_attr.grh.hop_limit = 64
        a.ah_attr.is_global = 1
        a.ah_attr.port_num = port
        self._modify(a, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN |
                     QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER)
        a = IbvQpAttr(qp_state=QPS_RTS, sq_psn=psn, timeout=14, retry_cnt=7,
                      rnr_retry=7, max_rd_atomic=4)
        self._modify(a, QP_STATE | QP_SQ_PSN | QP_TIMEOUT | QP_RETRY_CNT |
                     QP_RNR_RETRY | QP_MAX_QP_RD_ATOMIC)

    def _modify(self, attr, mask):
        rc = _ibv.ibv_modify_qp(self.p, ctypes.byref(attr), mask)
        if rc:
            _raise(rc, f'ibv_modify_qp(state {attr.qp_state})')

    def to_state(self, state):
        """ibv_modify_qp() to @state alone (SQD with en_sqd_async_notify,
        so the device reports IBV_EVENT_SQ_DRAINED)."""
        self._modify(IbvQpAttr(qp_state=state,
                               en_sqd_async_notify=int(state == QPS_SQD)),
                     QP_STATE)

    def state(self):
        a, ia = IbvQpAttr(), IbvQpInitAttr()
        rc = _ibv.ibv_query_qp(self.p, ctypes.byref(a), QP_STATE,
                               ctypes.byref(ia))
        if rc:
            _raise(rc, 'ibv_query_qp')
        return a.qp_state

    def post_rdma(self, wr_id, opcode, laddr, length, lkey, raddr, rkey):
        """One signaled RDMA WRITE / READ with one SGE; the errno of
        ibv_post_send() (0 when posted)."""
        sge = IbvSge(addr=laddr, length=length, lkey=lkey)
        wr = IbvSendWr(wr_id=wr_id, num_sge=1, opcode=opcode,
                       send_flags=SEND_SIGNALED, remote_addr=raddr, rkey=rkey)
        wr.sg_list = ctypes.pointer(sge)
        bad = ctypes.POINTER(IbvSendWr)()
        return self._post(ctypes.cast(self.p, VP), ctypes.byref(wr),
                          ctypes.byref(bad))

    def post_recv(self, wr_id, addr, length, lkey):
        """One receive with one SGE; the errno of ibv_post_recv()."""
        sge = IbvSge(addr=addr, length=length, lkey=lkey)
        wr = IbvRecvWr(wr_id=wr_id, num_sge=1)
        wr.sg_list = ctypes.pointer(sge)
        bad = ctypes.POINTER(IbvRecvWr)()
        return self._post_recv(ctypes.cast(self.p, VP), ctypes.byref(wr),
                               ctypes.byref(bad))

    def run_rdma(self, *args, timeout=60.0):
        rc = self.post_rdma(*args)
        if rc:
            _raise(rc, 'ibv_post_send')
        return self.cq.wait(1, timeout)[0]

    def close(self):
        if self.p:
            rc = _ibv.ibv_destroy_qp(self.p)
            self.p = None
            if rc:
                _raise(rc, 'ibv_destroy_qp')


class IbvAsyncEvent(ctypes.Structure):
    _fields_ = [('element', VP), ('event_type', ctypes.c_int)]


assert ctypes.sizeof(IbvAsyncEvent) == 16
# enum ibv_event_type
EVENT_SQ_DRAINED = 5
# struct ibv_context: the device pointer, the 32 pointers of its ops, then
# cmd_fd and async_fd.
_CTX_ASYNC_FD = 8 + 32 * 8 + 4
_ibv.ibv_get_async_event.argtypes = [VP, ctypes.POINTER(IbvAsyncEvent)]
_ibv.ibv_ack_async_event.argtypes = [ctypes.POINTER(IbvAsyncEvent)]


class Ctx:
    """An opened device with a PD and a cleanup list (closed in reverse)."""

    def __init__(self, name):
        n = ctypes.c_int(0)
        lst = _ibv.ibv_get_device_list(ctypes.byref(n))
        self.p = None
        try:
            for i in range(n.value):
                if _ibv.ibv_get_device_name(lst[i]).decode() == name:
                    self.p = _ibv.ibv_open_device(lst[i])
                    if not self.p:
                        _errno_raise(f'ibv_open_device({name})')
                    break
            else:
                raise DvError(errno.ENODEV, f'no device {name}')
        finally:
            _ibv.ibv_free_device_list(lst)
        self._objs = []
        self._loopback_gid = None
        self.pd = self.alloc_pd()

    def track(self, obj):
        self._objs.append(obj)
        return obj

    def async_event(self, timeout):
        """The next affiliated or unaffiliated event (ibv_get_async_event(),
        acknowledged) as (event_type, element: the QP/CQ/SRQ pointer or the
        port number), or None if none comes within @timeout seconds."""
        import select
        fd = ctypes.c_int.from_address(self.p + _CTX_ASYNC_FD).value
        pl = select.poll()
        pl.register(fd, select.POLLIN)
        if not pl.poll(int(timeout * 1000)):
            return None
        ev = IbvAsyncEvent()
        if _ibv.ibv_get_async_event(self.p, ctypes.byref(ev)):
            _errno_raise('ibv_get_async_event')
        got = (ev.event_type, ev.element)
        _ibv.ibv_ack_async_event(ctypes.byref(ev))
        return got

    def alloc_pd(self):
        pd = _ibv.ibv_alloc_pd(self.p)
        if not pd:
            _errno_raise('ibv_alloc_pd')
        self._objs.append(('pd', pd))
        return pd

    def cq(self, cqe=256):
        return self.track(Cq(self, cqe))

    def mr(self, addr, length, access=ACCESS_ALL, pd=None):
        return self.track(Mr(pd or self.pd, addr, length, access))

    def dmabuf_mr(self, offset, length, iova, fd, access=ACCESS_ALL,
                  pd=None):
        return self.track(DmabufMr(pd or self.pd, offset, length, iova, fd,
                                   access))

    def dm(self, length):
        return self.track(Dm(self, length))

    def buf(self, length):
        return self.track(Buffer(length))

    def chan(self, cq=None, depth=16, recv_cq=None, pd=None, **kw):
        return self.track(Chan(self, pd or self.pd, cq or self.cq(),
                               depth, recv_cq, **kw))

    def rc_qp(self, gid_index, cq=None, pd=None, **kw):
        return self.track(RcQp(self, pd or self.pd, cq or self.cq(),
                               gid_index, **kw))

    def cached(self, addr, length, access=ACCESS_ALL, pd=None):
        return self.track(CachedMr(pd or self.pd, addr, length, access))

    def gid(self, index, port=1):
        """The 16 bytes of GID @index of @port."""
        g = (ctypes.c_uint8 * 16)()
        if _ibv.ibv_query_gid(self.p, port, index, ctypes.byref(g)):
            _errno_raise(f'ibv_query_gid({index})')
        return bytes(g)

    def gid_index(self, gid):
        """The index of GID @gid (16 bytes) in port 1's table."""
        for i in range(GID_TBL_LEN):
            try:
                if self.gid(i) == gid:
                    return i
            except OSError:             # an empty entry
                continue
        raise DvError(errno.ENOENT, f'no GID {gid.hex()}')

    def loopback_gid(self):
        """(index, GID) of ::ffff:$BZC_IPV4 in port 1's GID table: the
        address the tests' channels connect from and to."""
        if self._loopback_gid is None:
            want = ipv4_gid(os.environ.get('BZC_IPV4', '198.18.0.1'))
            self._loopback_gid = (self.gid_index(want), want)
        return self._loopback_gid

    def query_device(self, comp_mask=0):
        a = DeviceAttr(comp_mask=comp_mask)
        rc = lib.bzcdv_query_device(self.p, ctypes.byref(a))
        if rc:
            _raise(rc, 'bzcdv_query_device')
        return a

    def cache_stats(self, pd=None, comp_mask=0):
        s = MrCacheStats(comp_mask=comp_mask)
        rc = lib.bzcdv_query_mr_cache(pd or self.pd, ctypes.byref(s))
        if rc:
            _raise(rc, 'bzcdv_query_mr_cache')
        return s

    def close(self):
        """Destroys everything in reverse order; channels before CQs."""
        while self._objs:
            o = self._objs.pop()
            if isinstance(o, tuple):
                _ibv.ibv_dealloc_pd(o[1])
            else:
                o.close()
        if self.p:
            _ibv.ibv_close_device(self.p)
            self.p = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def ipv4_gid(addr):
    """The RoCE v2 GID of IPv4 address @addr: ::ffff:a.b.c.d, 16 bytes."""
    import ipaddress
    return ipaddress.IPv6Address('::ffff:' + addr).packed


def connect_pair(a, b):
    """Connect channels @a and @b to each other (both sides consent)."""
    a.connect_to(b)
    if b is not a:
        b.connect_to(a)


def bulk_available(name):
    """None if @name's kernel driver has bulk channels, else the reason
    (only EOPNOTSUPP from bzcdv_query_device means "no BZC_CAP_BULK")."""
    with Ctx(name) as c:
        a = DeviceAttr()
        rc = lib.bzcdv_query_device(c.p, ctypes.byref(a))
    if rc == errno.EOPNOTSUPP:
        return NO_BULK_REASON
    if rc:
        _raise(rc, 'bzcdv_query_device')
    return None

