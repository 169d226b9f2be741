# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Self-tests of the suite's own machinery, so that a green run means
something: the kernel log check sees new lines, and the environment is the
one the harness promised."""

import os

import bzc_helpers as h


def test_kernel_log_reader_sees_new_lines():
    """The per-test reader picks up lines logged after it started.  (The
    injected line is benign on purpose: tools/bzc-machine fails the whole
    run on any WARNING in the guest log, injected or not.)"""
    r = h.KmsgReader()
    try:
        with open('/dev/kmsg', 'w') as k:
            k.write(f'{h.SELFTEST_MARK}: kernel log reader check\n')
        lines = r.read_new()
    finally:
        r.close()
    assert any(h.SELFTEST_MARK in l for l in lines), lines
    assert not h.bad_kernel_lines(lines, include_selftest=True)


def test_kernel_log_pattern():
    """The pattern flags what real kernel reports look like."""
    for bad in ('WARNING: CPU: 1 PID: 57 at drivers/infiniband/core/device.c:'
                '1412 ib_register_device+0x2c/0x40 [ib_core]',
                'BUG: unable to handle page fault for address: ffff8881',
                'BUG: KASAN: use-after-free in bzc_dealloc_pd+0x1',
                'Oops: 0000 [#1] PREEMPT SMP NOPTI',
                'Call Trace:',
                'general protection fault, probably for non-canonical address',
                'refcount_t: underflow; use-after-free.',
                'list_del corruption, ffff888100000000->next is NULL',
                'INFO: task rdma:1234 blocked for more than 120 seconds.'):
        assert h.bad_kernel_lines([bad]), bad
    for ok in ('infiniband bzc0: port 1 down on bzcnet0',
               'bzc: loading out-of-tree module taints kernel.',
               'bzc: bzcnet0 already carries bzc0'):
        assert not h.bad_kernel_lines([ok]), ok


def test_environment():
    assert h.dev_exists(), h.ib_devices()
    assert h.netdev_exists()
    assert h.netdev_is_up()
    assert any(str(a) == h.IPV4 for a, _, _ in h.netdev_addrs(family=4))
    if h.LINK_TYPE == 'bzc':
        assert h.module_loaded('bzc')
        # the provider under test is the one libibverbs loads
        drv = os.environ.get('RDMAV_DRIVERS')
        assert drv and os.path.exists(drv + '-rdmav34.so'), \
            f'RDMAV_DRIVERS={drv!r}: provider not built/found'
        import pyverbs.device as d
        c = d.Context(name=h.DEV)
        try:
            maps = open('/proc/self/maps').read()
        finally:
            c.close()
        assert os.path.realpath(drv + '-rdmav34.so') in maps, \
            'libbzc-rdmav34.so from RDMAV_DRIVERS is not the loaded provider'
