# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Run rdma-core's rdma_cm tests (test_rdmacm.py, from python3-pyverbs) on
one device, telling them its netdev.

The suite finds a device's IP address through
/sys/class/infiniband/DEV/device/net/, which only a device with a parent
bus device has; software devices on a virtual netdev (bzc, and rxe too)
have none, so unchanged the suite skips every CM test. This runner copies
the suite, and replaces only that lookup (RDMATestCase._get_ip_mac) with
the netdev given on the command line. Nothing else of the suite changes.

    rdma_core_cm.py DEV NETDEV [unittest args...]
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from importlib.machinery import SourceFileLoader

SUITE = '/usr/share/doc/rdma-core/tests'


def copy_suite(dst):
    shutil.copytree(SUITE, dst)
    for name in os.listdir(dst):
        if name.endswith('.gz'):
            path = os.path.join(dst, name)
            with gzip.open(path, 'rb') as src, open(path[:-3], 'wb') as out:
                shutil.copyfileobj(src, out)
            os.unlink(path)


def netdev_ip_mac(netdev):
    out = subprocess.check_output(['ip', '-j', 'addr', 'show', netdev])
    info = json.loads(out)[0]
    ipv4 = [a['local'] for a in info['addr_info'] if a['family'] == 'inet']
    return ipv4[0], info['address']


def main():
    dev, netdev = sys.argv[1], sys.argv[2]
    ip_addr, mac = netdev_ip_mac(netdev)
    work = tempfile.mkdtemp(prefix='rdma-core-cm-')
    suite = os.path.join(work, 'tests')
    copy_suite(suite)
    sys.path.insert(0, suite)
    sys.argv = [sys.argv[0], '--dev', dev] + sys.argv[3:]
    from args_parser import parser
    tests = SourceFileLoader('tests', os.path.join(suite, '__init__.py')
                             ).load_module()
    import tests.base as base

    def _get_ip_mac(self, d, port, idx):
        self.args.append([d, port, idx, ip_addr, mac])

    base.RDMATestCase._get_ip_mac = _get_ip_mac
    parser.parse_args()
    try:
        unittest.main(module=tests)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
