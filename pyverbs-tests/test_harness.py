# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Self-tests of the suite's own machinery, so that a green run means
something: the kernel log check sees new lines, and the environment is the
one the harness promised."""

import os
import subprocess
import tempfile

import bzc_helpers as h

KERNEL_LOG_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             '..', 'tools', 'lib', 'kernel-log.sh')


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


def run_kernel_problems(lines):
    """tools/lib/kernel-log.sh's kernel_problems (the check of a whole
    machine run) on `lines`, given dmesg time stamps; its lines without
    them."""
    with tempfile.NamedTemporaryFile('w', suffix='.log') as f:
        for i, l in enumerate(lines):
            f.write(f'[{i + 30:5d}.000000] {l}\n')
        f.flush()
        r = subprocess.run(['bash', '-c', '. "$1" && kernel_problems "$2"',
                            'kernel_problems', KERNEL_LOG_SH, f.name],
                           stdout=subprocess.PIPE, text=True, check=True)
    return [l.split('] ', 1)[1] for l in r.stdout.splitlines()]


def test_known_user_crash_mark():
    """A process's general protection fault fails the test and the run,
    unless the test logged afterwards that this process's crash is a known
    bug (h.mark_known_user_crash(), as test_clients.py does for perftest's
    RDMA CM retry).  The mark excuses nothing else: not another process,
    not a later fault, not a kernel GPF or warning."""
    user_gpf = ('traps: ib_send_lat[219] general protection fault '
                'ip:7f0c5147e472 sp:7ffe0c6eefb0 error:0 in '
                'librdmacm.so.1.3.44.0[7f0c51478000+15000]')
    other_gpf = user_gpf.replace('[219]', '[220]')
    kernel_gpf = ('general protection fault, probably for non-canonical '
                  'address 0x10012c60e980002: 0000 [#1] PREEMPT SMP NOPTI')
    warning = 'WARNING: CPU: 0 PID: 219 at drivers/infiniband/core/cma.c:1'
    mark = f'{h.KNOWN_CRASH_MARK}ib_send_lat[219]: a known bug of its own'
    cases = [
        ([user_gpf], [user_gpf]),
        ([user_gpf, mark], []),
        ([mark, user_gpf], [user_gpf]),
        ([user_gpf, other_gpf, kernel_gpf, warning, mark],
         [other_gpf, kernel_gpf, warning]),
    ]
    for lines, bad in cases:
        assert h.bad_kernel_lines(lines) == bad, lines
        assert run_kernel_problems(lines) == bad, lines


# RDS's own lockdep report on the debug kernel (docs/debug-kernel.md), cut
RDS_CHAIN = ('rds_trans_sem --> &id_priv->handler_mutex --> '
             '&id_priv->handler_mutex/1')
RDS_REPORT = [
    '======================================================',
    'WARNING: possible circular locking dependency detected',
    '6.1.192-bzcdebug #2 Tainted: G           O',
    'kworker/0:2/77 is trying to acquire lock:',
    'ffffffffc04b02b0 (rds_trans_sem){++++}-{3:3}, at: '
    'rds_trans_get_preferred+0xd0/0x220 [rds]',
    'Chain exists of:',
    '  ' + RDS_CHAIN,
    ' *** DEADLOCK ***',
    'Call Trace:',
    ' <TASK>',
    ' dump_stack_lvl+0x4c/0x63',
    ' </TASK>',
]


def test_known_lockdep_report(monkeypatch):
    """BZC_KNOWN_LOCKDEP (set by tools/debug-kernel for the one boot that
    produces that report) excuses exactly the whole lockdep report whose
    cycle it names: not another cycle, not a cut report, not a warning
    printed in the middle of it."""
    lockdep = [RDS_REPORT[1], 'Call Trace:']
    warning = 'WARNING: CPU: 1 PID: 80 at emu/bzc_qp.c:1 bzc_modify_qp+0x1'
    interleaved = RDS_REPORT[:9] + [warning] + RDS_REPORT[9:]
    other = [l.replace('rds_trans_sem', 'nvmet_config_sem')
             for l in RDS_REPORT]
    cases = [
        ('', RDS_REPORT, lockdep),
        (RDS_CHAIN, RDS_REPORT, []),
        (RDS_CHAIN, RDS_REPORT[:-1], lockdep),
        (RDS_CHAIN, other, lockdep),
        (RDS_CHAIN, interleaved, [warning]),
        (RDS_CHAIN, RDS_REPORT + [warning], [warning]),
    ]
    for chain, lines, bad in cases:
        monkeypatch.setenv('BZC_KNOWN_LOCKDEP', chain)
        assert h.bad_kernel_lines(lines) == bad, (chain, lines)
        assert run_kernel_problems(lines) == bad, (chain, lines)


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
