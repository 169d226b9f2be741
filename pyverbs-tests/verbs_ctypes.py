# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Minimal ctypes access to libibverbs for what pyverbs does not expose:
the raw ibv_context (cmd_fd/async_fd), PD handles that pyverbs would free
behind our back, the port number of an async event, and raw uverbs write()
commands on the command fd.

Layouts are those of rdma-core 44's <infiniband/verbs.h> on x86-64
(offsetof(struct ibv_context, cmd_fd) == 264, checked below against the
fd actually being /dev/infiniband/uverbsN).
"""

import ctypes
import errno
import os
import select
import struct

_lib = ctypes.CDLL('libibverbs.so.1', use_errno=True)


class IbvContext(ctypes.Structure):
    _fields_ = [('device', ctypes.c_void_p),
                ('ops', ctypes.c_void_p * 32),   # struct ibv_context_ops
                ('cmd_fd', ctypes.c_int),
                ('async_fd', ctypes.c_int),
                ('num_comp_vectors', ctypes.c_int)]


assert IbvContext.cmd_fd.offset == 264 and IbvContext.async_fd.offset == 268


class IbvPd(ctypes.Structure):
    _fields_ = [('context', ctypes.c_void_p),
                ('handle', ctypes.c_uint32)]


class _Element(ctypes.Union):
    _fields_ = [('ptr', ctypes.c_void_p), ('port_num', ctypes.c_int)]


class IbvAsyncEvent(ctypes.Structure):
    _fields_ = [('element', _Element), ('event_type', ctypes.c_int)]


_lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
_lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
_lib.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
_lib.ibv_get_device_name.restype = ctypes.c_char_p
_lib.ibv_get_device_name.argtypes = [ctypes.c_void_p]
_lib.ibv_open_device.restype = ctypes.POINTER(IbvContext)
_lib.ibv_open_device.argtypes = [ctypes.c_void_p]
_lib.ibv_close_device.restype = ctypes.c_int
_lib.ibv_close_device.argtypes = [ctypes.POINTER(IbvContext)]
_lib.ibv_alloc_pd.restype = ctypes.POINTER(IbvPd)
_lib.ibv_alloc_pd.argtypes = [ctypes.POINTER(IbvContext)]
_lib.ibv_dealloc_pd.restype = ctypes.c_int
_lib.ibv_dealloc_pd.argtypes = [ctypes.POINTER(IbvPd)]
_lib.ibv_get_async_event.restype = ctypes.c_int
_lib.ibv_get_async_event.argtypes = [ctypes.POINTER(IbvContext),
                                     ctypes.POINTER(IbvAsyncEvent)]
_lib.ibv_ack_async_event.argtypes = [ctypes.POINTER(IbvAsyncEvent)]

# uverbs write() ABI (include/uapi/rdma/ib_user_verbs.h)
IB_USER_VERBS_CMD_DEALLOC_PD = 4


class VerbsError(OSError):
    pass


def _err(what):
    e = ctypes.get_errno()
    return VerbsError(e, f'{what}: {os.strerror(e)}')


class RawContext:
    """ibv_open_device() on a device by name, through ctypes."""

    def __init__(self, name):
        n = ctypes.c_int(0)
        lst = _lib.ibv_get_device_list(ctypes.byref(n))
        if not lst:
            raise _err('ibv_get_device_list')
        try:
            for i in range(n.value):
                if _lib.ibv_get_device_name(lst[i]).decode() == name:
                    ctx = _lib.ibv_open_device(lst[i])
                    if not ctx:
                        raise _err(f'ibv_open_device({name})')
                    self.ctx = ctx
                    break
            else:
                raise VerbsError(errno.ENODEV, f'no device {name}')
        finally:
            _lib.ibv_free_device_list(lst)
        self.name = name
        # guard against a wrong struct layout before anyone writes to fds
        cmd = os.readlink(f'/proc/self/fd/{self.cmd_fd}')
        asy = os.readlink(f'/proc/self/fd/{self.async_fd}')
        if not cmd.startswith('/dev/infiniband/uverbs') or \
                'infinibandevent' not in asy:
            self.close()
            raise AssertionError(f'ibv_context layout mismatch: cmd_fd -> '
                                 f'{cmd}, async_fd -> {asy}')

    @property
    def cmd_fd(self):
        return self.ctx.contents.cmd_fd

    @property
    def async_fd(self):
        return self.ctx.contents.async_fd

    def alloc_pd(self):
        pd = _lib.ibv_alloc_pd(self.ctx)
        if not pd:
            raise _err('ibv_alloc_pd')
        return pd

    @staticmethod
    def pd_handle(pd):
        return pd.contents.handle

    @staticmethod
    def dealloc_pd(pd):
        """Returns 0 or the errno ibv_dealloc_pd() reported."""
        return _lib.ibv_dealloc_pd(pd)

    def get_async_event(self, timeout):
        """(event_type, port_num-or-element) or None on timeout."""
        p = select.poll()
        p.register(self.async_fd, select.POLLIN)
        if not p.poll(int(timeout * 1000)):
            return None
        ev = IbvAsyncEvent()
        if _lib.ibv_get_async_event(self.ctx, ctypes.byref(ev)):
            raise _err('ibv_get_async_event')
        res = (ev.event_type, ev.element.port_num)
        _lib.ibv_ack_async_event(ctypes.byref(ev))
        return res

    def close(self):
        if getattr(self, 'ctx', None):
            rc = _lib.ibv_close_device(self.ctx)
            self.ctx = None
            if rc:
                raise _err('ibv_close_device')

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def raw_dealloc_pd(cmd_fd, handle):
    """Issue IB_USER_VERBS_CMD_DEALLOC_PD through write() on the uverbs
    command fd.  Returns 0 on success or the errno of the write."""
    # struct ib_uverbs_cmd_hdr {u32 command; u16 in_words; u16 out_words}
    # + struct ib_uverbs_dealloc_pd {u32 pd_handle}; in_words counts
    # 4-byte words including the header.
    buf = struct.pack('=IHHI', IB_USER_VERBS_CMD_DEALLOC_PD, 3, 0, handle)
    try:
        n = os.write(cmd_fd, buf)
    except OSError as ex:
        return ex.errno
    assert n == len(buf), f'short uverbs write: {n}'
    return 0
