# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""fio with crc32c verification (fio-verify.fio) on a block device or a
file, for the kernel storage tests (test_nvmeof.py, test_nfsrdma.py).

run() writes 4 KiB random and 1 MiB sequential I/O to the target, reads
every block back against its checksum and asserts that each job moved
what it should with no error; it returns the bytes written plus read.
"""

import os
import shutil

import pytest

import fio_json

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   'fio-verify.fio')


def need_fio():
    """Skip the calling test when fio is not installed."""
    if not shutil.which('fio'):
        pytest.skip('fio not installed (Debian package fio; '
                    'tools/setup-debian installs it)')


def _bytes(size):
    """'8M' -> 8 MiB in bytes."""
    assert size[-1] == 'M', size
    return int(size[:-1]) << 20


def run(target, rand_size, seq_size, timeout=900):
    """Run both jobs on `target` ('8M'-style sizes); return the bytes
    they moved (written + read back)."""
    env = dict(os.environ, FIO_VERIFY_TARGET=target,
               FIO_VERIFY_RAND_SIZE=rand_size, FIO_VERIFY_SEQ_SIZE=seq_size)
    jobs = fio_json.jobs([JOB], timeout, env=env)
    assert set(jobs) == {'rand4k', 'seq1m'}, jobs.keys()
    moved = 0
    for name, size in (('rand4k', rand_size), ('seq1m', seq_size)):
        j = jobs[name]
        want = _bytes(size)
        assert j['write']['io_bytes'] == want, (name, j['write'])
        # The verify pass reads everything written.
        assert j['read']['io_bytes'] == want, (name, j['read'])
        moved += 2 * want
    return moved
