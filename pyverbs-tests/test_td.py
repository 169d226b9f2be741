# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Thread domains (ibv_alloc_td): a parent domain naming one makes the QPs
and CQs created on it single-threaded, without the provider's locks.

pyverbs (rdma-core 44) has no thread domains, and ibv_alloc_td() is an
inline of <infiniband/verbs.h>, so the checks live in C:
tools/bzc_msg_rate --check (the API's errors, data through a QP pair on a
thread domain), which exits non-zero on the first failed check."""

import os
import shutil
import subprocess

import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

BUILD = os.environ.get('BZC_BUILD') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', 'build')


def msg_rate_tool():
    path = os.path.join(BUILD, 'tools', 'bzc_msg_rate', 'bzc_msg_rate')
    if os.access(path, os.X_OK):
        return path
    path = shutil.which('bzc_msg_rate')
    if not path:
        pytest.skip('bzc_msg_rate not built (tools/bzc_msg_rate)')
    return path


def run(*args):
    return subprocess.run([msg_rate_tool(), '-d', h.DEV, *args],
                          capture_output=True, text=True, timeout=300)


def test_thread_domain_api():
    """EINVAL for unknown comp_mask and for another context's TD, EBUSY
    while a parent domain names the TD, data intact on a TD's QPs."""
    r = run('--check')
    assert r.returncode == 0, r.stderr
    assert 'checks passed' in r.stdout


def test_rate_both_modes():
    """The benchmark runs a locked and a TD pair; every batch's completion
    is checked by the tool, so a row means that mode moved data."""
    r = run('-D', '0.2', '-r', '1')
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()
            if line.startswith('1 ')]
    assert len(rows) == 1 and len(rows[0]) == 3, r.stdout
    assert float(rows[0][1]) > 0 and float(rows[0][2]) > 0, r.stdout
