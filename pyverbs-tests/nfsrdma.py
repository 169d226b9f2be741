# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NFS over RDMA: the kernel's NFS server (nfsd, listening on RDMA only)
and client (the rpcrdma transport of nfs), for test_nfsrdma.py (both in
one machine) and test_nfsrdma_wire.py (the server on the peer machine,
run as `nfsrdma.py serve ADDR CLIENT ROOT PORT`, see serve()), and for
tools/bench-nfs, which also has nfsd listen on TCP, exports to more than
one client address and mounts over TCP as the yardstick (Server's
`listen` and `client`, Client's `proto` and `addr`; the defaults are the
tests' setup).

The smallest setup that serves NFSv4.2 and NFSv3 on a host whose root is
read-only (the test guest's 9p root), in a mount namespace of the
test's own (private_mounts()) so that nothing shows outside it:

- a tmpfs on /var/lib/nfs: exportfs and rpc.mountd keep their tables
  there (etab, rmtab), and nfsd its NFSv4 client records (v4recovery,
  the "legacy" tracking, which needs no nfsdcld);
- the NFSv4 pseudo-root: a small tmpfs exported with fsid=0 (the guest's
  root, 9p, cannot be exported, so the usual "/" pseudo-root is not
  possible), and the export itself, a tmpfs mounted at ROOT/export with
  fsid=1 (tmpfs has no UUID); NFSv4 clients mount ADDR:/export, NFSv3
  clients ROOT/export;
- rpcbind: lockd (started by nfsd while NFSv3 is enabled) and rpc.mountd
  register with it, and an NFSv3 client finds the MOUNT service
  through it; rpc.mountd answers nfsd's export upcalls (all versions)
  and NFSv3's MOUNT calls (over TCP, not RDMA);
- nfsd itself through /proc/fs/nfsd: `rdma 20049` in portlist (its only
  listener), a few threads, the NFSv4 grace period ended at once
  (v4_end_grace: no client can have state to reclaim).

The client mounts with mount.nfs: `-o rdma,port=20049,vers=V`, and for
NFSv3 `nolock` (locks stay local: no rpc.statd). Daemons run in the
foreground as children of the test and are stopped by their pid.
"""

import ctypes
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bzc_helpers as h  # noqa: E402

PORT = 20049
TCP_PORT = 2049         # NFS over TCP's usual port (tools/bench-nfs)
MODULES = ('nfsd', 'rpcrdma', 'nfsv3', 'nfsv4')
# The programs the setup runs and the Debian packages they come in.
TOOLS = (('exportfs', 'nfs-kernel-server'), ('rpc.mountd', 'nfs-kernel-server'),
         ('mount.nfs', 'nfs-common'), ('rpcbind', 'rpcbind'),
         ('rpcinfo', 'rpcbind'))
NFSD_FS = '/proc/fs/nfsd'
STATE_DIR = '/var/lib/nfs'
CLONE_NEWNS = 0x00020000
# Field names of the rpcrdma line ("xprt: rdma ...") of
# /proc/self/mountstats, in order (Linux 6.1 and 6.12 print the same).
XPRT_RDMA_FIELDS = (
    'port', 'bind_count', 'connect_count', 'connect_time', 'idle_time',
    'sends', 'recvs', 'bad_xids', 'req_u', 'bklog_u',
    'read_chunk_count', 'write_chunk_count', 'reply_chunk_count',
    'total_rdma_request', 'total_rdma_reply', 'pullup_copy_count',
    'fixup_copy_count', 'hardway_register_count', 'failed_marshal_count',
    'bad_reply_count', 'nomsg_call_count', 'mrs_recycled', 'mrs_orphaned',
    'mrs_allocated', 'local_inv_needed', 'empty_sendctx_q',
    'reply_waits_for_send')


def missing_tool():
    """(program, package) of the first program of TOOLS not installed,
    or None."""
    for tool, pkg in TOOLS:
        if not shutil.which(tool, path='/usr/sbin:/sbin:/usr/bin:/bin'):
            return tool, pkg
    return None


def private_mounts():
    """Move this process into a mount namespace of its own (unshare(2))
    whose mounts do not propagate back: everything mounted for the test
    stays invisible to the rest of the machine and goes with the
    process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS):
        err = ctypes.get_errno()
        raise OSError(err, f'unshare(CLONE_NEWNS): {os.strerror(err)}')
    h.run(['mount', '--make-rprivate', '/'])


def _write(path, value):
    with open(path, 'w') as f:
        f.write(f'{value}\n')


def rpcbind_answers():
    return h.run(['rpcinfo', '-p', '127.0.0.1'], check=False,
                 timeout=30).returncode == 0


def rpc_registered(program):
    """True if `program` (e.g. 'mountd') is registered with rpcbind."""
    cp = h.run(['rpcinfo', '-p', '127.0.0.1'], check=False, timeout=30)
    return cp.returncode == 0 and any(
        line.split()[-1:] == [program] for line in cp.stdout.splitlines())


def nfsd_threads():
    return int(h.read_file(f'{NFSD_FS}/threads', '0') or 0)


class Server:
    """nfsd on `addr` port PORT (RDMA) exporting a tmpfs to `client`
    (an IPv4 address, or a sequence of them: exported to each); `root`
    is the directory of the NFSv4 pseudo-root, the export is
    `root`/export. `listen` is nfsd's listeners, (netid, port) pairs
    written to its portlist in order ('rdma' or 'tcp'); by default RDMA
    on PORT only. nfsd's listeners take any local address, so `addr` is
    only the address clients are told to mount."""

    def __init__(self, addr, client, root, threads=4, export_mb=512,
                 listen=(('rdma', PORT),)):
        self.addr, self.client, self.root = addr, client, root
        self.clients = [client] if isinstance(client, str) else list(client)
        self.export = os.path.join(root, 'export')
        self.threads, self.export_mb = threads, export_mb
        self.listen = tuple(listen)
        self.mounted = []       # our mounts, unmounted in reverse
        self.procs = []         # our daemons (Popen), stopped in reverse
        self.exported = []
        self.started = False

    def _mount(self, fstype, target, opts=None, source=None):
        os.makedirs(target, exist_ok=True)
        cmd = ['mount', '-t', fstype]
        if opts:
            cmd += ['-o', opts]
        h.run(cmd + [source or fstype, target])
        self.mounted.append(target)

    def _daemon(self, argv, ready):
        """Start daemon `argv` in the foreground, its output in a log
        file; wait until ready() says it serves."""
        log = f'/tmp/bzc-nfs-{os.path.basename(argv[0])}.log'
        with open(log, 'w') as out:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT)
        self.procs.append(p)
        if not h.wait_until(lambda: p.poll() is not None or ready(),
                            timeout=60, interval=0.2) or p.poll() is not None:
            raise AssertionError(f'{argv[0]} did not come up (exit '
                                 f'{p.poll()}): {h.read_file(log, "")}')

    def start(self):
        """Everything up, in order; raises with what failed (stop()
        undoes what was done either way)."""
        self._mount('tmpfs', STATE_DIR, 'mode=0755')
        os.mkdir(f'{STATE_DIR}/v4recovery', 0o700)
        open(f'{STATE_DIR}/etab', 'w').close()
        open(f'{STATE_DIR}/rmtab', 'w').close()
        if not os.path.ismount(NFSD_FS):
            self._mount('nfsd', NFSD_FS)
        self._mount('tmpfs', self.root, 'size=1m,mode=0755')
        self._mount('tmpfs', self.export, f'size={self.export_mb}m,mode=0777')

        if not rpcbind_answers():
            os.makedirs('/run/rpcbind', exist_ok=True)
            self._daemon(['rpcbind', '-f'], rpcbind_answers)
        opts = 'insecure,no_subtree_check,sync'
        for path, more in ((self.root, 'ro,fsid=0,crossmnt'),
                           (self.export, 'rw,fsid=1,no_root_squash')):
            for client in self.clients:
                h.run(['exportfs', '-i', '-o', f'{more},{opts}',
                       f'{client}/32:{path}'])
                self.exported.append(f'{client}/32:{path}')
        self._daemon(['rpc.mountd', '-F'], lambda: rpc_registered('mountd'))

        for netid, port in self.listen:
            _write(f'{NFSD_FS}/portlist', f'{netid} {port}')
        _write(f'{NFSD_FS}/threads', self.threads)
        self.started = True
        assert nfsd_threads() == self.threads, h.read_file(
            f'{NFSD_FS}/threads')
        _write(f'{NFSD_FS}/v4_end_grace', 'Y')

    def listeners(self):
        return h.read_file(f'{NFSD_FS}/portlist', '').splitlines()

    def stop(self):
        """Undo start() (also a partial one); returns the list of what
        failed (empty: all clean)."""
        errors = []
        if self.started or os.path.exists(f'{NFSD_FS}/threads'):
            try:
                # The last thread going takes the listeners with it.
                _write(f'{NFSD_FS}/threads', 0)
            except OSError as e:
                errors.append(f'stopping nfsd: {e}')
            self.started = False
        for spec in reversed(self.exported):
            cp = h.run(['exportfs', '-u', spec], check=False)
            if cp.returncode:
                errors.append(f'exportfs -u {spec}: {cp.stderr.strip()}')
        self.exported = []
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate(timeout=10)
                errors.append(f'{p.args[0]} ignored SIGTERM')
        self.procs = []
        for target in reversed(self.mounted):
            cp = h.run(['umount', target], check=False, timeout=120)
            if cp.returncode:
                errors.append(f'umount {target}: {cp.stderr.strip()}')
        self.mounted = []
        return errors


class Client:
    """An NFS mount of `server` (a Server) at `mnt` with version `vers`
    ('4.2', '3', ...) over RDMA, or with `proto` 'tcp' over TCP (NFS's
    own port); from `server`.addr, or from `addr` if given."""

    def __init__(self, server, mnt, vers, proto='rdma', addr=None):
        self.server, self.mnt, self.vers = server, mnt, vers
        self.proto, self.addr = proto, addr or server.addr
        # NFSv4 paths are relative to the pseudo-root (fsid=0).
        self.path = '/export' if vers.startswith('4') else server.export

    def options(self):
        if self.proto == 'rdma':
            opts = f'rdma,port={PORT},vers={self.vers}'
        else:
            opts = f'proto={self.proto},port={TCP_PORT},vers={self.vers}'
        if not self.vers.startswith('4'):
            opts += ',nolock'
        return opts

    def mount(self):
        os.makedirs(self.mnt, exist_ok=True)
        h.run(['mount', '-t', 'nfs', '-o', self.options(),
               f'{self.addr}:{self.path}', self.mnt], timeout=300)

    def umount(self):
        h.run(['umount', self.mnt], timeout=300)

    def __enter__(self):
        self.mount()
        return self

    def __exit__(self, *exc):
        self.umount()

    def remount(self):
        """Unmount and mount again: what is read next comes from the
        server, not from the client's page cache."""
        self.umount()
        self.mount()

    def mount_options(self):
        """{option: value or None} of the mount in /proc/mounts."""
        with open('/proc/self/mounts') as f:
            for line in f:
                fields = line.split()
                if fields[1] == self.mnt and fields[2].startswith('nfs'):
                    return dict((o.split('=', 1) + [None])[:2]
                                for o in fields[3].split(','))
        return None

    def xprt_stats(self):
        """{field: int} of the mount's rpcrdma transport
        (/proc/self/mountstats), or None if it has none."""
        with open('/proc/self/mountstats') as f:
            text = f.read()
        mine = False
        for line in text.splitlines():
            if line.startswith('device '):
                mine = f' mounted on {self.mnt} with fstype nfs' in line
            elif mine:
                m = re.match(r'\s*xprt:\s+rdma\s+(.*)$', line)
                if m:
                    vals = [int(v) for v in m.group(1).split()]
                    return dict(zip(XPRT_RDMA_FIELDS, vals))
        return None


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sha(path):
    """SHA-256 of a file, or None when there is no such file."""
    try:
        with open(path, 'rb') as f:
            return hashlib.file_digest(f, 'sha256').hexdigest()
    except FileNotFoundError:
        return None


def write_synced(path, data):
    """Write a file and fsync it: the data has reached the server."""
    with open(path, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def check_transport(c):
    """The rpcrdma transport of Client `c` is healthy; returns its
    counters."""
    st = c.xprt_stats()
    assert st is not None, 'no rpcrdma transport in /proc/self/mountstats'
    # One connection: an error completion or a flushed QP would have
    # made rpcrdma disconnect and connect again.
    assert st['connect_count'] == 1, st
    # Not failed_marshal_count: it counts the calls that found the MR
    # pool empty (-EAGAIN, sent again once xprtrdma has made more MRs),
    # which a burst of large I/O after the mount does on rxe0 alike.
    for bad in ('bad_xids', 'bad_reply_count', 'mrs_orphaned'):
        assert st[bad] == 0, (bad, st)
    # Every chunk goes through a fast-registered MR.
    assert st['mrs_allocated'] > 0, st
    return st


def big_file_round_trip(client, name, nbytes, server_sha):
    """Write `nbytes` of random data to file `name` of Client `client`'s
    mount, check that it went as RDMA Read chunks and arrived intact
    (server_sha(name): its SHA-256 on the server's side), remount, read it
    back (RDMA Write chunks) and check it, then remove it and check that
    the server's copy went too."""
    data = random.randbytes(nbytes)
    want = sha(data)
    path = os.path.join(client.mnt, name)
    write_synced(path, data)
    st = check_transport(client)
    assert st['read_chunk_count'] > 0, st
    assert server_sha(name) == want
    client.remount()
    assert file_sha(path) == want
    st = check_transport(client)
    assert st['write_chunk_count'] > 0, st
    os.unlink(path)
    assert server_sha(name) is None


def serve(addr, client, root, port):
    """The server of test_nfsrdma_wire.py, on the peer: nfsd on `addr`
    exporting to `client`, then JSON lines on TCP `port` (one connection):

      {"op": "listeners"}     -> {"listeners": [...]}: nfsd's portlist
      {"op": "sha", "path"}   -> {"sha": hex or null}: a file of the export
      {"op": "exit"}          -> {}: the server stopped, nfsd and rpcrdma
                                 unloaded; {"error"} with what failed

    The server lives in this process' own mount namespace: only this
    process sees the export, so the test asks it."""
    missing = missing_tool()
    if missing:
        sys.exit(f'{missing[0]} not installed (Debian package {missing[1]})')
    missing = h.load_modules(('nfsd', 'rpcrdma'))
    if missing:
        sys.exit(f'kernel module {missing[0]} cannot be loaded: {missing[1]}')
    if nfsd_threads():
        sys.exit('an NFS server already runs on this machine')
    private_mounts()
    srv = Server(addr, client, root)
    lsock = socket.create_server(('', port))
    try:
        srv.start()
        conn, _ = lsock.accept()
        with conn, conn.makefile('r') as rfile:
            for line in rfile:
                req = json.loads(line)
                if req['op'] == 'listeners':
                    ans = {'listeners': srv.listeners()}
                elif req['op'] == 'sha':
                    ans = {'sha': file_sha(os.path.join(srv.export,
                                                         req['path']))}
                elif req['op'] == 'exit':
                    errors = srv.stop()
                    for mod in ('nfsd', 'rpcrdma'):
                        cp = h.run(['modprobe', '-r', mod], check=False,
                                   timeout=120)
                        if cp.returncode:
                            errors.append(f'modprobe -r {mod}: '
                                          f'{cp.stderr.strip()}')
                    ans = {'error': errors} if errors else {}
                else:
                    ans = {'error': f'no op {req["op"]!r}'}
                conn.sendall(json.dumps(ans).encode() + b'\n')
                if req['op'] == 'exit':
                    return
    finally:
        lsock.close()
        srv.stop()


if __name__ == '__main__':
    if len(sys.argv) != 6 or sys.argv[1] != 'serve':
        sys.exit(f'usage: {sys.argv[0]} serve ADDR CLIENT ROOT PORT')
    serve(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
