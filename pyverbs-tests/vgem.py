# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""dma-bufs from a real exporter this project did not write: the kernel's
virtual GEM driver (vgem), through DRM PRIME.

    with vgem.Buffer(size) as b:    # a vgem buffer exported as a dma-buf
        b.fd                         # the dma-buf fd (ibv_reg_dmabuf_mr)
        b.map                        # an mmap of the dma-buf (CPU access)

The buffer is a DRM "dumb" buffer (DRM_IOCTL_MODE_CREATE_DUMB on the vgem
primary node; render nodes do not allow it), exported with
DRM_IOCTL_PRIME_HANDLE_TO_FD.  vgem() loads the module and finds its
card; it returns None, with the reason, where the kernel has no vgem.
"""

import ctypes
import fcntl
import glob
import mmap
import os
import struct
import subprocess

# <drm/drm.h>, <drm/drm_mode.h>: _IOWR('d', nr, struct)
_IOC_WRITE, _IOC_READ = 1, 2


def _iowr(nr, size):
    return ((_IOC_READ | _IOC_WRITE) << 30) | (size << 16) | (ord('d') << 8) | nr


DRM_IOCTL_VERSION = _iowr(0x00, 64)             # struct drm_version
DRM_IOCTL_GEM_CLOSE = (_IOC_WRITE << 30) | (8 << 16) | (ord('d') << 8) | 0x09
DRM_IOCTL_PRIME_HANDLE_TO_FD = _iowr(0x2d, 12)  # struct drm_prime_handle
DRM_IOCTL_MODE_CREATE_DUMB = _iowr(0xb2, 32)    # struct drm_mode_create_dumb
DRM_RDWR = os.O_RDWR
DRM_CLOEXEC = os.O_CLOEXEC


def _driver_name(fd):
    name = ctypes.create_string_buffer(32)
    # struct drm_version: 3 ints, pad, then (size_t len, char *) x 3
    arg = bytearray(struct.pack('iiiiQQQQQQ', 0, 0, 0, 0, len(name),
                                ctypes.addressof(name), 0, 0, 0, 0))
    fcntl.ioctl(fd, DRM_IOCTL_VERSION, arg)
    return name.value.decode()


_card = None


def card():
    """(path of vgem's primary node, None) or (None, reason)."""
    global _card
    if _card is None:
        subprocess.run(['modprobe', 'vgem'], capture_output=True)
        _card = (None, 'no vgem DRM device (modprobe vgem failed: the '
                 'kernel lacks CONFIG_DRM_VGEM)')
        for path in sorted(glob.glob('/dev/dri/card*')):
            fd = os.open(path, os.O_RDWR)
            try:
                if _driver_name(fd) == 'vgem':
                    _card = (path, None)
                    break
            finally:
                os.close(fd)
    return _card


class Buffer:
    """A vgem buffer of at least `size` bytes (a whole number of pages),
    exported as a dma-buf fd and mapped through it."""

    def __init__(self, size):
        path, reason = card()
        assert path, reason
        self.card = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        page = os.sysconf('SC_PAGESIZE')
        # width x height x 32 bpp = size: one row per page
        arg = bytearray(struct.pack('IIIIIIQ', (size + page - 1) // page,
                                    page // 4, 32, 0, 0, 0, 0))
        fcntl.ioctl(self.card, DRM_IOCTL_MODE_CREATE_DUMB, arg)
        _, _, _, _, self.handle, _, self.size = struct.unpack('IIIIIIQ', arg)
        arg = bytearray(struct.pack('Iii', self.handle,
                                    DRM_RDWR | DRM_CLOEXEC, -1))
        fcntl.ioctl(self.card, DRM_IOCTL_PRIME_HANDLE_TO_FD, arg)
        self.fd = struct.unpack('Iii', arg)[2]
        self.map = mmap.mmap(self.fd, self.size)

    def close(self):
        if self.card is not None:
            self.map.close()
            os.close(self.fd)
            fcntl.ioctl(self.card, DRM_IOCTL_GEM_CLOSE,
                        struct.pack('II', self.handle, 0))
            os.close(self.card)
            self.card = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
