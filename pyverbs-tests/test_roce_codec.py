# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""emu's RoCE v2 codec held against implementations we did not write.

The codec (emu/bzc_roce_pkt.c, emu/bzc_icrc.c) is the kernel module's own
code, built a second time in userspace as tools/roce-codec (its kernel
headers answered by a shim).  Three checks:

* Wireshark: every kind of packet our builders make (UD SEND with DETH,
  RC SEND FIRST/MIDDLE/LAST, SEND with invalidate, RDMA WRITE with RETH
  and ImmDt, UC WRITE, READ request and response, ACK and NAKs with AETH,
  atomics and the atomic ACK), over IPv4 and IPv6, dissected by tshark
  (UDP 4791 decoded as InfiniBand): every field as we built it, no
  malformed packet.  tshark 4.0's InfiniBand dissector shows the ICRC
  but does not verify it (it has no ICRC status field or expert item), so
  the ICRC it shows is compared with a second computation here (Annex
  A17 masking written again in Python, CRC-32 from zlib).
* Hostile packets: each check of the parsers refuses what it should,
  with a verdict that names it, and the ICRC ignores exactly the variant
  fields.
* rxe (two machines): real rxe RoCE v2 traffic captured on the link --
  RC/UC/UD SENDs, WRITE, READ, atomics, ACKs -- goes through our parser,
  every packet accepted and our ICRC equal to the one rxe put on the
  wire.
"""

import json
import os
import shutil
import signal
import struct
import subprocess
import time
import zlib

import pytest

import client_runner as cr

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get('BZC_BUILD') or os.path.join(HERE, '..', 'build')
CODEC = os.path.join(BUILD, 'tools', 'roce-codec', 'roce-codec')

pytestmark = pytest.mark.keeps_netdev

# IBA Vol. 1 table 38: the opcode of each packet the builder makes, by
# case and position; written from the spec, not from the codec's table.
EXPECTED_OPCODES = {
    'ud_send': [0x64],
    'ud_send_imm_ipv6': [0x65],
    'rc_send': [0x00, 0x01, 0x02],
    'rc_send_inv': [0x17],
    'rc_write_imm': [0x06, 0x09],
    'rc_write_only_imm': [0x0b],
    'uc_write': [0x2a],
    'rc_read_request': [0x0c],
    'rc_read_response': [0x0d, 0x0e, 0x0f],
    'rc_ack': [0x11],
    'rc_rnr_nak': [0x11],
    'rc_nak': [0x11],
    'rc_cmp_swap': [0x13],
    'rc_fetch_add': [0x14],
    'rc_atomic_ack': [0x12],
}


def need_tool(name):
    path = shutil.which(name)
    if not path:
        pytest.skip(f'{name} is not installed (tools/setup-debian installs '
                    f'it)')
    return path


def codec(*args, check=True):
    assert os.access(CODEC, os.X_OK), \
        f'{CODEC} is missing: build the tree (cmake --build build)'
    r = subprocess.run([CODEC, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if check:
        assert r.returncode == 0, \
            f'roce-codec {" ".join(args)}: exit {r.returncode}\n{r.stderr}'
    return [json.loads(line) for line in r.stdout.splitlines()]


# ---- pcap files and a second ICRC ----

def read_pcap(path):
    with open(path, 'rb') as f:
        data = f.read()
    magic, _, _, _, _, _, linktype = struct.unpack_from('<IHHiIII', data)
    assert magic == 0xa1b2c3d4 and linktype == 1
    frames, off = [], 24
    while off < len(data):
        _, _, caplen, _ = struct.unpack_from('<IIII', data, off)
        frames.append(bytes(data[off + 16:off + 16 + caplen]))
        off += 16 + caplen
    return frames


def write_pcap(path, frames):
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack('<IIII', 1, i, len(fr), len(fr)))
            f.write(fr)


def ref_icrc(l3):
    """ICRC of a RoCE v2 packet (IP header up to the ICRC), Annex A17.8:
    8 bytes of ones, the variant fields (IPv4 TOS/TTL/checksum, IPv6
    class/flow label/hop limit, UDP checksum, BTH resv8a) set to ones,
    zlib's CRC-32; the 4 bytes as the wire carries them."""
    b = bytearray(l3)
    if b[0] >> 4 == 4:
        b[1] = b[8] = b[10] = b[11] = 0xff
        udp = 20
    else:
        b[0] |= 0x0f
        b[1:4] = b'\xff\xff\xff'
        b[7] = 0xff
        udp = 40
    b[udp + 6:udp + 8] = b'\xff\xff'
    b[udp + 8 + 4] = 0xff
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + bytes(b)))


def ip4_csum(hdr):
    s = sum(struct.unpack('!10H', hdr))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def l3_of(frame):
    return frame[14:]


def refit(frame, roce=None, fix_icrc=True):
    """An IPv4 frame with its RoCE part (BTH up to the ICRC) replaced by
    roce, IP and UDP lengths, IP checksum and (fix_icrc) the ICRC made
    right again, so only the change a test makes is wrong."""
    eth, ip = frame[:14], bytearray(frame[14:34])
    udp = bytearray(frame[34:42])
    old = frame[42:-4]
    roce = old if roce is None else roce
    total = 20 + 8 + len(roce) + 4
    struct.pack_into('!H', ip, 2, total)
    struct.pack_into('!H', ip, 10, 0)
    struct.pack_into('!H', ip, 10, ip4_csum(bytes(ip)))
    struct.pack_into('!H', udp, 4, 8 + len(roce) + 4)
    l3 = bytes(ip) + bytes(udp) + bytes(roce)
    icrc = ref_icrc(l3) if fix_icrc else frame[-4:]
    return eth + l3 + icrc


# ---- (a) our builders, Wireshark's dissector ----

@pytest.fixture(scope='module')
def built(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('roce') / 'built.pcap')
    return path, codec('build', path)


TSHARK_BOOL = {'1': 1, '0': 0, 'True': 1, 'False': 0}
# tshark registers every dissector it has before reading a packet: 7 s on
# a loaded host, and over 300 s once in a TCG guest sharing the cores
TSHARK_TIMEOUT = 1200


def tshark_fields(pcap, fields):
    """{frame number: {field: [values]}} as tshark dissects pcap, UDP 4791
    as InfiniBand; plus each frame's expert severities and whether it was
    malformed."""
    tshark = need_tool('tshark')
    extra = ['frame.number', '_ws.malformed', '_ws.expert.severity',
             '_ws.expert.message', 'infiniband.invariant.crc']
    cols = extra + sorted(fields)
    argv = [tshark, '-n', '-r', pcap, '-d', 'udp.port==4791,infiniband',
            # payload bytes are arbitrary: no guessing at protocols in them
            '--disable-protocol', 'rpcordma',
            '-T', 'fields', '-E', 'separator=\t', '-E', 'occurrence=a',
            '-E', 'aggregator=|']
    for c in cols:
        argv += ['-e', c]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=TSHARK_TIMEOUT)
    assert r.returncode == 0, f'{" ".join(argv)}: {r.stderr}'
    out = {}
    for line in r.stdout.splitlines():
        vals = line.split('\t')
        row = {c: (v.split('|') if v else []) for c, v in zip(cols, vals)}
        out[int(row['frame.number'][0])] = row
    return out


# RoCE v2 over IPv6 carries UDP checksum 0 as rxe sends it (the ICRC
# covers the packet; the receiving device takes it before the IP stack)
ZERO_UDP_CSUM = 'Illegal checksum value (0)'
PI_WARN = 0x00600000


def expert_problems(row):
    """tshark's expert warnings and errors on a frame, but the zero UDP
    checksum."""
    return [(s, m) for s, m in zip(row['_ws.expert.severity'],
                                   row['_ws.expert.message'])
            if int(s, 0) >= PI_WARN and m != ZERO_UDP_CSUM]


def as_int(field, text):
    if text in TSHARK_BOOL:
        return TSHARK_BOOL[text]
    if field in ('infiniband.immdt', 'infiniband.ieth'):
        return int(text.replace(':', ''), 16)    # FT_BYTES: hex digits
    return int(text, 0)


def test_builder_cases_are_the_iba_opcodes(built):
    """The builder chose, by message and position, the opcodes IBA's
    table 38 gives (RC/UC/UD, FIRST/MIDDLE/LAST/ONLY, with IMM/INV)."""
    _, pkts = built
    got = {}
    for p in pkts:
        got.setdefault(p['case'], []).append(p['fields'][
            'infiniband.bth.opcode'])
    assert got == EXPECTED_OPCODES


def test_builder_segments_by_pmtu(built):
    """Segmentation: FIRST/MIDDLE carry exactly one PMTU (256), LAST the
    rest; consecutive PSNs across the 2^24 wrap; RETH only on the first
    WRITE packet with the whole length, ImmDt and AckReq on the last;
    AETH on READ response FIRST and LAST, not MIDDLE."""
    _, pkts = built
    by = {}
    for p in pkts:
        by.setdefault(p['case'], []).append(p)
    send = by['rc_send']
    assert [p['paylen'] for p in send] == [256, 256, 130]
    assert [p['fields']['infiniband.bth.psn'] for p in send] == \
        [0xfffffe, 0xffffff, 0]
    assert [p['fields']['infiniband.bth.a'] for p in send] == [0, 0, 1]
    w = by['rc_write_imm']
    assert 'infiniband.reth.dmalen' in w[0]['fields'] and \
        w[0]['fields']['infiniband.reth.dmalen'] == 300
    assert 'infiniband.reth.va' not in w[1]['fields']
    assert w[1]['fields']['infiniband.immdt'] == 0x01020304
    assert [p['fields']['infiniband.bth.se'] for p in w] == [0, 1]
    rr = by['rc_read_response']
    assert ['infiniband.aeth.msn' in p['fields'] for p in rr] == \
        [True, False, True]
    assert [p['paylen'] for p in rr] == [256, 256, 100]
    assert by['ud_send'][0]['fields']['infiniband.bth.padcnt'] == 3


def test_tshark_dissects_our_packets(built):
    """Every field of every packet we built reads back from Wireshark's
    dissector as we wrote it; no malformed packet, no expert warning or
    error; the ICRC tshark shows is the one we put there."""
    pcap, pkts = built
    fields = {f for p in pkts for f in p['fields']}
    ts = tshark_fields(pcap, fields)
    assert sorted(ts) == [p['frame'] for p in pkts], \
        'tshark did not see every frame we wrote'
    for p in pkts:
        row = ts[p['frame']]
        what = f'frame {p["frame"]} ({p["case"]}, {p["name"]})'
        assert not row['_ws.malformed'], f'{what}: malformed: {row}'
        assert not expert_problems(row), \
            f'{what}: tshark: {expert_problems(row)}'
        for f, want in p['fields'].items():
            vals = row[f]
            assert vals, f'{what}: tshark shows no {f}'
            got = as_int(f, vals[0])
            assert got == want, f'{what}: {f} is {vals[0]}, built {want:#x}'
        assert row['infiniband.invariant.crc'] == ['0x' + p['icrc']], \
            f'{what}: tshark shows ICRC {row["infiniband.invariant.crc"]}, ' \
            f'we wrote {p["icrc"]}'


def test_icrc_matches_second_implementation(built):
    """Our ICRC (crc32_le over our masking) equals Annex A17 computed
    again here with zlib, for IPv4 and IPv6 packets."""
    pcap, pkts = built
    frames = read_pcap(pcap)
    for p, fr in zip(pkts, frames):
        assert fr[-4:] == ref_icrc(l3_of(fr)[:-4]), \
            f'frame {p["frame"]} ({p["case"]}): ICRC {fr[-4:].hex()}, ' \
            f'A17 gives {ref_icrc(l3_of(fr)[:-4]).hex()}'
    assert any(fr[12:14] == b'\x86\xdd' for fr in frames)


def test_parser_round_trip(built):
    """Our parser reads back what our builder wrote, field for field."""
    pcap, pkts = built
    parsed = codec('parse', '--pmtu', '256', pcap)
    assert [q['verdict'] for q in parsed] == ['ok'] * len(pkts), parsed
    for p, q in zip(pkts, parsed):
        assert q['fields'] == p['fields'] and q['paylen'] == p['paylen'], \
            f'frame {p["frame"]} ({p["case"]}): built {p}, parsed {q}'


def test_codec_selftest():
    """The opcode table's header lengths add up; the message builder
    refuses READ and SEND_WITH_INV on UC, UD over the PMTU, 25-bit PSNs;
    PSN arithmetic across the wrap."""
    out = codec('selftest')
    assert out[-1] == {'selftest_failures': 0}
    names = {o['opcode']: o['name'] for o in out[:-1]}
    assert sorted(names) == sorted(
        set(range(0x00, 0x15)) | {0x16, 0x17} |
        set(range(0x20, 0x2c)) | {0x64, 0x65}), \
        f'opcodes the codec accepts: {sorted(names)}'


# ---- hostile packets ----

def frame_of(built, case, i=0):
    pcap, pkts = built
    frames = read_pcap(pcap)
    idx = [n for n, p in enumerate(pkts) if p['case'] == case][i]
    return frames[idx]


def bth_at(frame):
    return bytearray(frame[42:-4])


def mut_tver(b):
    b[1] |= 1
    return b


def mut_opcode(op):
    def f(b):
        b[0] = op
        return b
    return f


def mut_pad(pad):
    def f(b):
        b[1] = (b[1] & ~0x30) | pad << 4
        return b
    return f


def mut_append(n):
    def f(b):
        return b + bytes(n)
    return f


def mut_cut(n):
    def f(b):
        return b[:n]
    return f


def mut_be32(off, val):
    def f(b):
        struct.pack_into('!I', b, off, val)
        return b
    return f


def mut_byte(off, val):
    def f(b):
        b[off] = val
        return b
    return f


# (case, mutation of BTH.., pmtu, verdict); ICRC and lengths made right
HOSTILE = [
    ('rc_ack', mut_tver, 256, 'bad BTH transport version'),
    ('rc_ack', mut_opcode(0x15), 256, 'unknown opcode'),
    ('rc_ack', mut_opcode(0x18), 256, 'unknown opcode'),    # FLUSH
    ('rc_ack', mut_opcode(0x81), 256, 'unknown opcode'),    # CNP
    ('rc_ack', mut_pad(1), 256, 'bad pad count'),
    ('rc_ack', mut_append(4), 256, 'payload on an opcode without one'),
    ('uc_write', mut_append(1), 256, 'bad pad count'),
    ('rc_send', None, 512, 'payload length against the path MTU'),
    ('ud_send_imm_ipv6', None, 256, 'ok'),
    ('rc_write_imm', mut_cut(12 + 8), 256, 'shorter than its headers'),
    ('rc_read_request', mut_be32(12 + 12, 0x80000001), 256,
     'bad RETH DMA length'),
    ('uc_write', mut_be32(12 + 12, 4), 256, 'bad RETH DMA length'),
    ('rc_ack', mut_byte(12, 0x40), 256, 'reserved AETH syndrome'),
    ('rc_ack', mut_byte(12, 0x65), 256, 'reserved AETH syndrome'),
    ('rc_ack', mut_byte(12, 0x80), 256, 'reserved AETH syndrome'),
    # a LAST packet must carry at least one byte
    ('rc_send', None, 256, 'ok'),
]


@pytest.mark.parametrize('case,mut,pmtu,verdict', HOSTILE,
                         ids=[f'{c}-{v}-{i}' for i, (c, _, _, v) in
                              enumerate(HOSTILE)])
def test_parser_refuses(built, tmp_path, case, mut, pmtu, verdict):
    """A packet with one thing wrong (ICRC and lengths right) is refused
    with the verdict that names that thing."""
    fr = frame_of(built, case)
    if mut is not None:
        fr = refit(fr, bytes(mut(bth_at(fr))))
    path = str(tmp_path / 'h.pcap')
    write_pcap(path, [fr])
    out = codec('parse', '--pmtu', str(pmtu), path)
    assert len(out) == 1 and out[0]['verdict'] == verdict, out


def test_parser_refuses_empty_last(built, tmp_path):
    """RC SEND LAST with no payload (IBA: 1 to PMTU bytes)."""
    fr = frame_of(built, 'rc_send', 2)
    b = bth_at(fr)[:12]
    b[1] &= ~0x30
    path = str(tmp_path / 'h.pcap')
    write_pcap(path, [refit(fr, bytes(b))])
    out = codec('parse', '--pmtu', '256', path)
    assert out[0]['verdict'] == 'payload length against the path MTU', out


def ip_mut(frame, off, val, fix_csum=True):
    b = bytearray(frame)
    b[14 + off] = val
    if fix_csum:
        struct.pack_into('!H', b, 24, 0)
        struct.pack_into('!H', b, 24, ip4_csum(bytes(b[14:34])))
    return bytes(b)


def test_icrc_and_ip_checks(built, tmp_path):
    """A flipped payload bit fails the ICRC; changing only the variant
    fields (TOS, TTL, IP checksum, UDP checksum, FECN/BECN in resv8a)
    keeps it; IP fragments, bad IP checksums, options, UDP lengths and
    ports are refused by name."""
    fr = frame_of(built, 'rc_send')
    flipped = bytearray(fr)
    flipped[-10] ^= 1
    ecn = ip_mut(ip_mut(fr, 1, 0x03), 8, 1)       # TOS (ECN CE), TTL 1
    udp_csum = bytearray(fr)
    udp_csum[40:42] = b'\x12\x34'
    fecn = bytearray(fr)
    fecn[42 + 4] = 0xc0
    frag = ip_mut(fr, 6, 0x60)                     # DF | MF
    csum = ip_mut(fr, 8, 7, fix_csum=False)
    opts = ip_mut(fr, 0, 0x46)
    port = bytearray(fr)
    port[36:38] = b'\x12\xb8'                      # 4792
    udplen = bytearray(fr)
    udplen[38:40] = struct.pack('!H', struct.unpack('!H', fr[38:40])[0] - 4)
    cases = [
        (bytes(flipped), 'bad ICRC'),
        (ecn, 'ok'), (bytes(udp_csum), 'ok'), (bytes(fecn), 'ok'),
        (frag, 'IP fragment'),
        (csum, 'bad IPv4 header checksum'),
        (opts, 'IP options or extension headers'),
        (bytes(udplen), 'bad UDP length'),
        (fr[:40], 'bad IP length'),
    ]
    path = str(tmp_path / 'h.pcap')
    write_pcap(path, [c for c, _ in cases] + [bytes(port)])
    out = codec('parse', '--pmtu', '256', path)
    # the frame to port 4792 is someone else's traffic: not reported
    assert [o['verdict'] for o in out] == [v for _, v in cases], out


# ---- (b) rxe's packets on the wire ----

# The IBA opcodes the rxe traffic below must show (RC, UC and UD)
RXE_OPCODES = {
    'RC_SEND_FIRST', 'RC_SEND_MIDDLE', 'RC_SEND_LAST', 'RC_SEND_ONLY',
    'RC_RDMA_WRITE_FIRST', 'RC_RDMA_WRITE_MIDDLE', 'RC_RDMA_WRITE_LAST',
    'RC_RDMA_WRITE_ONLY',
    'RC_RDMA_READ_REQUEST', 'RC_RDMA_READ_RESPONSE_FIRST',
    'RC_RDMA_READ_RESPONSE_MIDDLE', 'RC_RDMA_READ_RESPONSE_LAST',
    'RC_RDMA_READ_RESPONSE_ONLY',
    'RC_ACKNOWLEDGE', 'RC_COMPARE_SWAP', 'RC_FETCH_ADD',
    'RC_ATOMIC_ACKNOWLEDGE',
    'UC_SEND_FIRST', 'UC_SEND_MIDDLE', 'UC_SEND_LAST',
    'UD_SEND_ONLY',
}
RXE_PMTU = 1024


class Capture:
    """tcpdump writing RoCE v2 packets (UDP 4791) seen on a NIC to a pcap."""

    def __init__(self, netdev, path):
        self.path = path
        self.proc = subprocess.Popen(
            [need_tool('tcpdump'), '-i', netdev, '-s', '0', '-U', '-w',
             path, 'udp', 'dst', 'port', '4791'],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        # it writes the pcap header once it listens
        while not os.path.exists(path) or os.path.getsize(path) < 24:
            assert self.proc.poll() is None, \
                f'tcpdump failed: {self.proc.stderr.read()}'
            assert time.monotonic() < deadline, 'tcpdump did not start'
            time.sleep(0.2)

    def stop(self):
        """Let tcpdump catch up with the last packets (the file stops
        growing), then SIGINT: it writes out what it holds and exits.
        Without the wait, packets still queued in the kernel for it when
        the signal comes are lost: the last client's traffic, on a fast
        machine."""
        size, still_since = -1, time.monotonic()
        deadline = still_since + 20
        while time.monotonic() < deadline and self.proc.poll() is None:
            now_size = os.path.getsize(self.path)
            if now_size != size:
                size, still_since = now_size, time.monotonic()
            elif time.monotonic() - still_since >= 2:
                break
            time.sleep(0.2)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope='module')
def rxe_link(peer_session):
    """rxe0's address and GID index here and on the peer (the reference
    link of tools/bzc-machines)."""
    import bzc_helpers as h
    import test_two_hosts as th
    peer_ipv4 = peer_session.env['RXE_IPV4']
    local = {i: (g, t) for i, (g, t, _) in h.sysfs_gids(th.RXE).items()}
    remote = th.peer_gids(peer_session, th.RXE)
    return {
        'ipv4': th.RXE_IPV4, 'peer_ipv4': peer_ipv4,
        'gidx': th.gid_index(local, th.RXE_IPV4),
        'peer_gidx': th.gid_index(remote, peer_ipv4),
        'gidx6': link_local_index(local, 'here'),
        'peer_gidx6': link_local_index(remote, 'on the peer'),
    }


def link_local_index(entries, where):
    """Index of the RoCE v2 GID of the NIC's IPv6 link-local address."""
    found = [i for i, (gid, gtype) in entries.items()
             if gid.is_link_local and gtype == 'RoCE v2']
    assert found, f'no RoCE v2 GID of an IPv6 link-local address {where}:' \
        f' {entries}'
    return min(found)


def rxe_runs(link):
    """(what, server argv, client argv, TCP port) of the clients whose
    traffic covers RXE_OPCODES: RC/UC/UD SENDs, WRITEs and READs of one
    and of several packets, both atomics."""
    import test_two_hosts as th
    rxe, gidx, pgidx = th.RXE, str(link['gidx']), str(link['peer_gidx'])
    mtu = str(RXE_PMTU)
    runs = []
    # the last one over IPv6 (link-local GIDs; TCP still on IPv4)
    for kind, size, v6 in (('rc', 3000, False), ('rc', 64, False),
                           ('uc', 3000, False), ('ud', 512, False),
                           ('rc', 3000, True)):
        port = cr.free_tcp_port()
        common = ['-p', str(port), '-s', str(size), '-n', '3', '--chk']
        if kind != 'ud':
            common += ['-m', mtu]
        tool = f'ibv_{kind}_pingpong'
        g, pg = ((str(link['gidx6']), str(link['peer_gidx6'])) if v6
                 else (gidx, pgidx))
        runs.append((f'{tool}{" over IPv6" if v6 else ""}',
                     [tool, '-d', rxe, '-g', pg, *common],
                     [tool, '-d', rxe, '-g', g, *common,
                      link['peer_ipv4']], port))
    for tool, extra in (('ib_write_bw', ['-s', '2500']),
                        ('ib_write_bw', ['-s', '64']),
                        ('ib_read_lat', ['-s', '2500']),
                        ('ib_read_lat', ['-s', '64']),
                        ('ib_atomic_bw', ['-A', 'CMP_AND_SWAP']),
                        ('ib_atomic_bw', ['-A', 'FETCH_AND_ADD'])):
        port = cr.free_tcp_port()
        common = ['-d', rxe, '-m', mtu, '-n', '5', '-F', '-p', str(port),
                  *extra]
        runs.append((tool, [tool, '-x', pgidx, *common],
                     [tool, '-x', gidx, *common, link['peer_ipv4']], port))
    return runs


@pytest.mark.two_hosts
def test_rxe_packets(peer, rxe_link, tmp_path):
    """rxe0 here and rxe0 on the peer exchange RC, UC and UD SENDs
    (ibv_*_pingpong --chk), RDMA WRITEs (ib_write_bw), READs
    (ib_read_lat) and both atomics (ib_atomic_bw) at path MTU 1024, and RC
    SENDs over IPv6, while tcpdump records the link; every RoCE v2
    packet, IPv4 and IPv6, both ways, passes our parser, our ICRC of each
    equals the one rxe put on the wire, and Wireshark finds nothing
    malformed either."""
    import test_two_hosts as th
    need_tool('tshark')
    from test_two_hosts import LINK
    cap = Capture(LINK, str(tmp_path / 'rxe.pcap'))
    try:
        for what, server, client, port in rxe_runs(rxe_link):
            cli, srv = th.run_pair(peer, server, client, port)
            assert cli.rc == 0 and srv.rc == 0, \
                f'{what}:\n--- client:\n{cli}\n--- server (peer):\n{srv}'
    finally:
        cap.stop()

    out = codec('parse', '--pmtu', str(RXE_PMTU), cap.path)
    assert out, 'no RoCE v2 packet captured on the link'
    bad = [o for o in out if o['verdict'] != 'ok']
    assert not bad, f'{len(bad)} of {len(out)} rxe packets refused ' \
        f'(the first ones): {bad[:5]}'
    seen = {o['name'] for o in out}
    assert RXE_OPCODES <= seen, \
        f'opcodes not in the capture: {sorted(RXE_OPCODES - seen)}'
    # and the reference computation agrees with rxe too
    frames = read_pcap(cap.path)
    for o in out:
        fr = frames[o['frame'] - 1]
        assert fr[-4:] == ref_icrc(l3_of(fr)[:-4]), o
    ipv6 = [o for o in out if frames[o['frame'] - 1][12:14] == b'\x86\xdd']
    assert ipv6, 'no RoCE v2 packet over IPv6 in the capture'
    ts = tshark_fields(cap.path, set())
    malformed = [n for n, row in ts.items() if row['_ws.malformed']]
    assert not malformed, f'tshark: malformed frames {malformed}'
    print(f'{len(out)} rxe packets ({len(ipv6)} over IPv6), all accepted, '
          f'ICRC equal to rxe\'s; opcodes: {sorted(seen)}')
