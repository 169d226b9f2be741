# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Port 1: attributes, state following the netdev (with async events), MTU
following the netdev MTU."""

import os
import re

import pyverbs.device as d
import pyverbs.enums as e
import pytest

import bzc_helpers as h
from verbs_ctypes import RawContext

# RoCEv2 overhead the core (iboe_get_mtu: 96 bytes) or a driver (rxe: 80)
# subtracts from the netdev MTU before choosing the IB MTU.
ROCE_HDR_MIN, ROCE_HDR_MAX = 40, 96


def ib_mtu_enum(nbytes):
    best = 0
    for k, v in h.IB_MTU.items():
        if v <= nbytes:
            best = max(best, k)
    return best


def allowed_active_mtu(netdev_mtu):
    return {min(max(ib_mtu_enum(netdev_mtu - hdr), 1), 5)
            for hdr in range(ROCE_HDR_MIN, ROCE_HDR_MAX + 1)}


def test_query_port_attributes(ctx):
    p = ctx.query_port(h.PORT)
    assert p.state == e.IBV_PORT_ACTIVE
    assert p.phys_state == h.PHYS_LINK_UP
    assert p.link_layer == e.IBV_LINK_LAYER_ETHERNET
    assert p.max_mtu == e.IBV_MTU_4096
    assert p.active_mtu in allowed_active_mtu(h.netdev_mtu()), \
        (f'active_mtu {p.active_mtu} ({h.IB_MTU.get(p.active_mtu)}) does not '
         f'fit netdev MTU {h.netdev_mtu()}')
    assert p.active_mtu <= p.max_mtu
    assert p.gid_tbl_len > 0
    assert p.pkey_tbl_len >= 1
    assert p.max_msg_sz > 0
    assert p.lid == 0 and p.sm_lid == 0, 'RoCE ports have no LIDs'
    assert p.active_width != 0 and p.active_speed != 0
    # consistent with sysfs and the rdma tool
    base = h.sysfs_port()
    assert h.read_file(os.path.join(base, 'state')) == '4: ACTIVE'
    assert h.read_file(os.path.join(base, 'link_layer')) == 'Ethernet'
    assert h.read_file(os.path.join(base, 'phys_state')).startswith('5:')
    out = h.rdma('link', 'show', f'{h.DEV}/{h.PORT}').stdout
    assert re.search(r'\bstate ACTIVE\b', out), out
    assert re.search(rf'\bnetdev {re.escape(h.NETDEV)}\b', out), out


def test_query_nonexistent_port(ctx):
    with pytest.raises(d.PyverbsRDMAError):
        ctx.query_port(2)
    with pytest.raises(d.PyverbsRDMAError):
        ctx.query_port(0)


def _drain(get):
    while get(0) is not None:
        pass


def test_port_follows_netdev_down_up():
    pctx, afd = h.open_pyverbs_context()
    raw = RawContext(h.DEV)
    try:
        def pget(t):
            return h.pyverbs_async_event(pctx, afd, t)
        _drain(pget)
        _drain(raw.get_async_event)

        h.ip('link', 'set', h.NETDEV, 'down')
        ok, seen = h.wait_event(pget, e.IBV_EVENT_PORT_ERR, 10,
                                ignore=(e.IBV_EVENT_GID_CHANGE,))
        assert ok, f'no IBV_EVENT_PORT_ERR on netdev down (pyverbs saw {seen})'
        ok, seen = h.wait_event(raw.get_async_event, e.IBV_EVENT_PORT_ERR, 10,
                                ignore=(e.IBV_EVENT_GID_CHANGE,))
        assert ok, f'no IBV_EVENT_PORT_ERR on second context (saw {seen})'
        assert seen[-1][1] == h.PORT, f'PORT_ERR for port {seen[-1][1]}'

        p = pctx.query_port(h.PORT)
        assert p.state == e.IBV_PORT_DOWN
        assert p.phys_state != h.PHYS_LINK_UP
        assert h.sysfs_port_state() == h.PORT_DOWN
        out = h.run(['ibv_devinfo', '-d', h.DEV]).stdout
        assert re.search(r'state:\s+PORT_DOWN \(1\)', out), out

        h.ip('link', 'set', h.NETDEV, 'up')
        ok, seen = h.wait_event(pget, e.IBV_EVENT_PORT_ACTIVE, 10,
                                ignore=(e.IBV_EVENT_GID_CHANGE,))
        assert ok, f'no IBV_EVENT_PORT_ACTIVE on netdev up (saw {seen})'
        ok, seen = h.wait_event(raw.get_async_event, e.IBV_EVENT_PORT_ACTIVE,
                                10, ignore=(e.IBV_EVENT_GID_CHANGE,))
        assert ok, f'no IBV_EVENT_PORT_ACTIVE on second context (saw {seen})'
        assert seen[-1][1] == h.PORT
        p = pctx.query_port(h.PORT)
        assert p.state == e.IBV_PORT_ACTIVE
        assert p.phys_state == h.PHYS_LINK_UP
        assert h.sysfs_port_state() == h.PORT_ACTIVE
    finally:
        raw.close()
        pctx.close()


def test_port_down_up_cycles_no_spurious_state():
    """Quick down/up flapping: the final state must be ACTIVE and every
    PORT_ERR must be matched by a later PORT_ACTIVE."""
    raw = RawContext(h.DEV)
    try:
        _drain(raw.get_async_event)
        for _ in range(20):
            h.ip('link', 'set', h.NETDEV, 'down')
            h.ip('link', 'set', h.NETDEV, 'up')
        assert h.wait_until(lambda: h.sysfs_port_state() == h.PORT_ACTIVE, 10)
        events = []
        while True:
            ev = raw.get_async_event(2)
            if ev is None:
                break
            events.append(ev[0])
        port_events = [x for x in events if x in (e.IBV_EVENT_PORT_ERR,
                                                  e.IBV_EVENT_PORT_ACTIVE)]
        assert port_events, 'no port events at all while flapping the netdev'
        assert port_events[-1] == e.IBV_EVENT_PORT_ACTIVE, port_events
        assert port_events.count(e.IBV_EVENT_PORT_ERR) >= 1
    finally:
        raw.close()


@pytest.mark.parametrize('mtu,expect', [(1500, e.IBV_MTU_1024),
                                        (9000, e.IBV_MTU_4096),
                                        (2200, e.IBV_MTU_2048),
                                        (4150, e.IBV_MTU_2048),
                                        (4200, e.IBV_MTU_4096),
                                        (1280, e.IBV_MTU_1024)])
def test_active_mtu_follows_netdev_mtu(ctx, mtu, expect):
    assert expect in allowed_active_mtu(mtu)      # self-check of the table
    h.ip('link', 'set', h.NETDEV, 'mtu', str(mtu))
    got = h.wait_until(
        lambda: ctx.query_port(h.PORT).active_mtu == expect, 5)
    p = ctx.query_port(h.PORT)
    assert got, (f'netdev MTU {mtu}: active_mtu {p.active_mtu} '
                 f'({h.IB_MTU.get(p.active_mtu)}), expected {expect} '
                 f'({h.IB_MTU[expect]})')
    assert p.max_mtu == e.IBV_MTU_4096
    assert p.state == e.IBV_PORT_ACTIVE
    # a context opened after the change sees the same
    c2 = d.Context(name=h.DEV)
    try:
        assert c2.query_port(h.PORT).active_mtu == expect
    finally:
        c2.close()


def test_mtu_change_while_down_applies(ctx):
    h.ip('link', 'set', h.NETDEV, 'down')
    h.ip('link', 'set', h.NETDEV, 'mtu', '9000')
    h.ip('link', 'set', h.NETDEV, 'up')
    assert h.wait_until(lambda: ctx.query_port(h.PORT).state ==
                        e.IBV_PORT_ACTIVE, 10)
    assert ctx.query_port(h.PORT).active_mtu == e.IBV_MTU_4096


@pytest.mark.disruptive
def test_port_state_at_creation_follows_netdev():
    """A device created on a netdev that is down starts DOWN, and goes
    ACTIVE when the netdev comes up."""
    h.link_delete()
    h.ip('link', 'set', h.NETDEV, 'down')
    h.link_add()
    assert h.wait_until(lambda: h.dev_exists(), 5)
    c = d.Context(name=h.DEV)
    try:
        assert c.query_port(h.PORT).state == e.IBV_PORT_DOWN
        h.ip('link', 'set', h.NETDEV, 'up')
        assert h.wait_until(lambda: c.query_port(h.PORT).state ==
                            e.IBV_PORT_ACTIVE, 10)
    finally:
        c.close()
