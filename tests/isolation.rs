//! Isolation tests: each starts real sandboxes, as root and as uid 65534, and tries to break out.
//! Every probe prints a distinct marker (`READ-OK:` / `READ-DENIED:<errno>`, ...) and every test
//! asserts on the exact marker beside a positive control (the same probe on the host, or with
//! the feature off), so a probe that could not start is never counted as "blocked".

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram, UnixListener, UnixStream};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;

/// Debian's interpreter: the same file inside (through the /usr bind) and on the host. pyenv's
/// python under /root is not visible inside, so the host controls name this one too.
const PYTHON: &str = "/usr/bin/python3";

/// The task's fixed environment (src/spec.rs, `build_env`).
const SANDBOX_ENV: [&str; 6] = [
    "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
    "HOME=/work",
    "TMPDIR=/work",
    "LANG=C.UTF-8",
    "USER=airlock",
    "LOGNAME=airlock",
];

// ---------------------------------------------------------------------------------------------
// Launching probes

/// `airlock run FLAGS -- ARGV` as `who`, stdin from /dev/null.
fn airlock_run(who: Launcher, flags: &[&str], argv: &[&str]) -> Command {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(argv);
    let mut c = airlock(who, &args);
    c.stdin(Stdio::null());
    c
}

fn run_inside(who: Launcher, flags: &[&str], argv: &[&str]) -> Output {
    airlock_run(who, flags, argv).output().unwrap()
}

/// ARGV on the host, outside any sandbox, as `who` (the positive control).
fn host_cmd(who: Launcher, argv: &[&str]) -> Command {
    let mut c = match who {
        Launcher::Root => Command::new(argv[0]),
        Launcher::Unprivileged => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(argv[0]);
            c
        }
    };
    c.args(&argv[1..]).current_dir("/").stdin(Stdio::null());
    c
}

fn run_host(who: Launcher, argv: &[&str]) -> Output {
    host_cmd(who, argv).output().unwrap()
}

/// `python3 -c SCRIPT ARGS...` as an argv.
fn py<'a>(script: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![PYTHON, "-c", script];
    v.extend_from_slice(args);
    v
}

fn show(o: &Output) -> String {
    format!(
        "status={:?}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

fn lines(o: &Output) -> Vec<String> {
    stdout(o).lines().map(str::to_string).collect()
}

/// The probe printed each of these lines.
#[track_caller]
fn assert_lines(o: &Output, wants: &[&str], ctx: &str) {
    for want in wants {
        assert_line(o, want, ctx);
    }
}

/// The probe printed exactly this line.
#[track_caller]
fn assert_line(o: &Output, want: &str, ctx: &str) {
    assert!(
        stdout(o).lines().any(|l| l == want),
        "{ctx}: expected the line {want:?}\n{}",
        show(o)
    );
}

/// stdout and stderr never mention `secret`.
#[track_caller]
fn assert_never_shows(o: &Output, secret: &str, ctx: &str) {
    assert!(
        !stdout(o).contains(secret) && !stderr(o).contains(secret),
        "{ctx}: the secret {secret:?} leaked\n{}",
        show(o)
    );
}

#[track_caller]
fn assert_exit(o: &Output, code: i32, ctx: &str) {
    assert_eq!(o.status.code(), Some(code), "{ctx}\n{}", show(o));
}

/// A run stopped by a failed step (fail closed): exit 125, stderr naming the step and the
/// call as `message`, and nothing of the task's (`task_mark`) on stdout.
fn assert_stopped(o: &Output, message: &str, task_mark: &str, ctx: &str) {
    assert_exit(o, 125, ctx);
    assert!(stderr(o).contains(message), "{ctx}\n{}", show(o));
    assert!(
        !stdout(o).contains(task_mark),
        "{ctx}: the task ran\n{}",
        show(o)
    );
}

/// A directory that uid 65534 can read, so the unprivileged control can see what it holds.
fn world_readable_dir(parent: &str, prefix: &str) -> tempfile::TempDir {
    tmpdir_named(std::path::Path::new(parent), prefix)
}

fn write_world_readable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Host processes

/// Pids of host processes whose argv is exactly `argv`.
fn pids_with_argv(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            (std::fs::read(format!("/proc/{pid}/cmdline")).ok()? == want).then_some(pid)
        })
        .collect()
}

/// Call `f` every 20 ms until it returns Some, for at most `limit` (never more than 10 s).
fn poll_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    assert!(limit <= Duration::from_secs(10));
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The whitespace-separated values of `Field:` in /proc/PID/status.
fn status_field(pid: u32, field: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.split_whitespace().map(str::to_string).collect())
}

/// A spawned process that is killed and reaped however the test ends.
struct Running(Child);

impl Running {
    /// Wait at most `limit` for the process to exit.
    fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        poll_for(limit, || self.0.try_wait().unwrap())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Servers on the host

const HTTP_BODY: &str = "AIRLOCK-HTTP-OK";

/// A TCP server answering every connection with a fixed HTTP 200, until dropped. It blocks in
/// accept (no polling); dropping it sets the stop flag and wakes it with one connection.
struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    fn start(ip: IpAddr) -> HttpServer {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = c.set_write_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf);
                let _ = write!(
                    c,
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{HTTP_BODY}",
                    HTTP_BODY.len()
                );
            }
        });
        HttpServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn spec(&self) -> String {
        format!("{}:{}", self.addr.ip(), self.addr.port())
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The machine's own non-loopback address: the source address the kernel picks for a route
/// out (connecting a UDP socket sends nothing).
fn machine_address() -> IpAddr {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    if let Err(e) = s.connect("10.255.255.1:9") {
        panic!(
            "this machine has no non-loopback IPv4 address (no route out: {e}); the network test needs one"
        );
    }
    let ip = s.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "this machine has no non-loopback IPv4 address (source address {ip}); the network test needs one"
    );
    ip
}

// ---------------------------------------------------------------------------------------------
// Probes (python3 scripts, the same text inside and on the host)

/// Reads each path (a leading ~ is the probe's own HOME): `READ-OK:<path>` then the text, or
/// `READ-DENIED:<path>:<errno name>`.
const READ_PROBE: &str = r#"
import errno, os, sys
for p in sys.argv[1:]:
    try:
        with open(os.path.expanduser(p), 'rb') as f:
            data = f.read()
        print('READ-OK:' + p)
        print(data.decode('utf-8', 'replace'))
    except OSError as e:
        print('READ-DENIED:%s:%s' % (p, errno.errorcode.get(e.errno, e.errno)))
"#;

/// Looks for variable NAME in this process's environment and in /proc/*/environ of every
/// process it can see: `ENV-HAS:<yes|no>`, `ENVIRON:<pid>:<present|absent>` or
/// `ENVIRON-DENIED:<pid>:<errno name>`, with `SELF:<pid>`.
const ENVIRON_PROBE: &str = r#"
import errno, os, sys
name = sys.argv[1].encode()
print('SELF:%d' % os.getpid())
print('ENV-HAS:' + ('yes' if sys.argv[1] in os.environ else 'no'))
for pid in sorted(int(d) for d in os.listdir('/proc') if d.isdigit()):
    try:
        with open('/proc/%d/environ' % pid, 'rb') as f:
            data = f.read()
        names = [kv.split(b'=', 1)[0] for kv in data.split(b'\0') if kv]
        print('ENVIRON:%d:%s' % (pid, 'present' if name in names else 'absent'))
    except OSError as e:
        print('ENVIRON-DENIED:%d:%s' % (pid, errno.errorcode.get(e.errno, e.errno)))
"#;

/// Fetches http://HOST:PORT/ for each HOST:PORT argument: `CONNECT-OK:<spec>:<status
/// line>:<body>` or `CONNECT-FAILED:<spec>:<errno name>`. The argument `own-loopback` starts a
/// server on this process's own 127.0.0.1 and fetches from it: `OWN-LOOPBACK-OK:<body>`.
const NET_PROBE: &str = r#"
import errno, socket, sys, threading
def fetch(host, port):
    s = socket.create_connection((host, port), timeout=3)
    try:
        s.sendall(b'GET / HTTP/1.0\r\n\r\n')
        data = b''
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b'\r\n\r\n')
    return head.split(b'\r\n')[0].decode(), body.decode()
for spec in sys.argv[1:]:
    if spec == 'own-loopback':
        srv = socket.socket()
        srv.bind(('127.0.0.1', 0))
        srv.listen(1)
        def serve():
            c, _ = srv.accept()
            c.recv(1024)
            c.sendall(b'HTTP/1.0 200 OK\r\n\r\nINNER-PONG')
            c.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            status, body = fetch('127.0.0.1', srv.getsockname()[1])
            print('OWN-LOOPBACK-OK:%s:%s' % (status, body))
        except OSError as e:
            print('OWN-LOOPBACK-FAILED:%s' % errno.errorcode.get(e.errno, e.errno))
        continue
    host, port = spec.rsplit(':', 1)
    try:
        status, body = fetch(host, int(port))
        print('CONNECT-OK:%s:%s:%s' % (spec, status, body))
    except socket.timeout:
        print('CONNECT-FAILED:%s:timeout' % spec)
    except OSError as e:
        print('CONNECT-FAILED:%s:%s' % (spec, errno.errorcode.get(e.errno, e.errno)))
"#;

/// Connects to the abstract unix socket named by argv[1]: `UNIX-CONNECT-OK` or
/// `UNIX-CONNECT-FAILED:<errno name>`; then to one it binds itself (argv[1] + "-own"):
/// `OWN-UNIX-CONNECT-OK` or `OWN-UNIX-CONNECT-FAILED:<errno name>`.
const ABSTRACT_PROBE: &str = r#"
import errno, socket, sys
def connect(name, label):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect('\0' + name)
        print(label + '-OK')
    except socket.timeout:
        print(label + '-FAILED:timeout')
    except OSError as e:
        print('%s-FAILED:%s' % (label, errno.errorcode.get(e.errno, e.errno)))
connect(sys.argv[1], 'UNIX-CONNECT')
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind('\0' + sys.argv[1] + '-own')
own.listen(1)
connect(sys.argv[1] + '-own', 'OWN-UNIX-CONNECT')
"#;

/// The probes' Python `attempt(tag, fn)`: runs fn, prints `TAG:OK` or `TAG:<errno name>`.
macro_rules! py_attempt {
    () => {
        r#"
import errno
def attempt(tag, fn):
    try:
        fn()
        print(tag + ':OK')
    except OSError as e:
        print('%s:%s' % (tag, errno.errorcode.get(e.errno, e.errno)))
"#
    };
}

/// Reaches the abstract names argv[1] + `-stream` (SOCK_STREAM), `-seqpacket` and `-dgram`
/// (SOCK_DGRAM) every way a unix socket can: `<WAY>:OK` or `<WAY>:<errno name>` for STREAM,
/// SEQPACKET, DGRAM-SENDTO, DGRAM-SENDMSG, DGRAM-CONNECT, and `CHILD-STREAM:OK` or
/// `CHILD-STREAM:<its last error line>` (a stream connect from a python the probe starts,
/// fork and exec).
const ABSTRACT_WAYS_PROBE: &str = concat!(
    py_attempt!(),
    r#"
import socket, subprocess, sys
name = '\0' + sys.argv[1]
def connected(kind, suffix):
    s = socket.socket(socket.AF_UNIX, kind)
    s.settimeout(3)
    s.connect(name + suffix)
    return s
dgram = lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
attempt('STREAM', lambda: connected(socket.SOCK_STREAM, '-stream'))
attempt('SEQPACKET', lambda: connected(socket.SOCK_SEQPACKET, '-seqpacket'))
attempt('DGRAM-SENDTO', lambda: dgram().sendto(b'sendto', name + '-dgram'))
attempt('DGRAM-SENDMSG', lambda: dgram().sendmsg([b'sendmsg'], [], 0, name + '-dgram'))
attempt('DGRAM-CONNECT', lambda: connected(socket.SOCK_DGRAM, '-dgram').send(b'connect'))
child = 'import socket,sys; socket.socket(socket.AF_UNIX).connect(chr(0) + sys.argv[1])'
done = subprocess.run([sys.executable, '-c', child, sys.argv[1] + '-stream'], stderr=subprocess.PIPE)
print('CHILD-STREAM:' + ('OK' if done.returncode == 0 else done.stderr.decode().strip().splitlines()[-1]))
"#
);

/// Creates and writes each path: `WRITE-OK:<path>` or `WRITE-DENIED:<path>:<errno name>`.
/// Then `LANDED:<path>` for each of those paths that now exists (checked by lstat, after all
/// writes).
const WRITE_PROBE: &str = r#"
import errno, os, sys
for p in sys.argv[1:]:
    try:
        with open(p, 'w') as f:
            f.write('written by the probe\n')
        print('WRITE-OK:' + p)
    except OSError as e:
        print('WRITE-DENIED:%s:%s' % (p, errno.errorcode.get(e.errno, e.errno)))
for p in sys.argv[1:]:
    if os.path.lexists(p):
        print('LANDED:' + p)
"#;

/// Reaches into process argv[1] (`child`: a sleeping child of the probe's own) through its
/// /proc entries (memory, maps, auxv, descriptors, root, cwd, executable, namespaces) and
/// stops it with SIGSTOP: `<entry>:OK`, `<entry>:ERR:<errno name>`, `sigstop:OK` (its state
/// turned T; then SIGCONT) or `sigstop:IGNORED` (still not stopped 1 s later).
const PROC_TARGET_PROBE: &str = r#"
import errno, os, signal, sys, time
if sys.argv[1] == 'child':
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
else:
    pid = int(sys.argv[1])
p = '/proc/%d/' % pid
def mem():
    with open(p + 'mem', 'rb', 0) as f:
        with open(p + 'maps') as m:
            f.seek(int(m.readline().split('-')[0], 16))
        if len(f.read(8)) != 8:
            raise OSError(errno.EIO, 'short read')
def state():
    with open(p + 'status') as f:
        return [l.split()[1] for l in f if l.startswith('State:')][0]
def stop():
    os.kill(pid, signal.SIGSTOP)
    for _ in range(50):
        if state() == 'T':
            os.kill(pid, signal.SIGCONT)
            return 'OK'
        time.sleep(0.02)
    return 'IGNORED'
probes = [
    ('maps', lambda: open(p + 'maps').read()),
    ('mem', mem),
    ('auxv', lambda: open(p + 'auxv', 'rb').read()),
    ('fd', lambda: os.listdir(p + 'fd')),
    ('fdinfo', lambda: os.listdir(p + 'fdinfo')),
    ('root', lambda: os.listdir(p + 'root/')),
    ('cwd', lambda: os.readlink(p + 'cwd')),
    ('exe', lambda: os.readlink(p + 'exe')),
    ('ns-user', lambda: os.close(os.open(p + 'ns/user', os.O_RDONLY))),
    ('ns-mnt', lambda: os.readlink(p + 'ns/mnt')),
]
for name, f in probes:
    try:
        f()
        print(name + ':OK')
    except OSError as e:
        print('%s:ERR:%s' % (name, errno.errorcode.get(e.errno, e.errno)))
print('sigstop:' + stop())
if sys.argv[1] == 'child':
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"#;

/// Makes each named system call through libc (ctypes) or the socket module:
/// `<name>:OK`, `<name>:ERR:<errno name>`, or `<name>:KILLED:<signal>`.
const SYSCALL_PROBE: &str = r#"
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
AF_NETLINK = 16
PTRACE_TRACEME = 0
def traceme():
    # In a forked child, so the tracer is this probe (which only waits), never the caller.
    pid = os.fork()
    if pid == 0:
        r = libc.ptrace(PTRACE_TRACEME, 0, None, None)
        os._exit(0 if r == 0 else ctypes.get_errno())
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    ctypes.set_errno(code)
    return 0 if code == 0 else -1
def int80_getpid():
    # getpid through the i386 entry (int 0x80), in a forked child: ('KILLED', signal) if it
    # dies of it, OK if the call answered the child's pid.
    import mmap, signal
    code = b'\xb8\x14\x00\x00\x00\xcd\x80\xc3'  # mov eax, 20; int 0x80; ret
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
    pid = os.fork()
    if pid == 0:
        os._exit(0 if f() == os.getpid() else 3)
    st = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(st):
        return ('KILLED', signal.Signals(os.WTERMSIG(st)).name)
    return 0 if os.WEXITSTATUS(st) == 0 else -2
L = ctypes.c_long
AT_FDCWD = -100
def fd_ok(r):
    # A call that answers a new descriptor: OK, and the descriptor closed.
    if r < 0:
        return -1
    os.close(r)
    return 0
def raw_clone(flags):
    # The clone syscall itself (x86_64: flags, stack, parent tid, child tid, tls), as a fork
    # whose child exits at once; SIGCHLD (17) is its exit signal.
    r = libc.syscall(L(56), L(flags | 17), None, None, None, None)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return 0
    return -1
def getfsmap_usr():
    # FS_IOC_GETFSMAP on a file of /usr (the host's disk): up to 4 extents of the whole
    # filesystem, from the lowest key to the highest.
    import fcntl, struct
    high = struct.pack('IIQQQQ', 0xffffffff, 0xffffffff, 2**64 - 1, 2**64 - 1, 2**64 - 1, 0)
    head = struct.pack('IIII', 0, 0, 4, 0) + bytes(48) + bytes(64) + high + bytes(24)
    fd = os.open('/usr/bin/true', os.O_RDONLY)
    try:
        fcntl.ioctl(fd, 0xC0C0583B, bytearray(head + bytes(64 * 4)))
    finally:
        os.close(fd)
    return 0
def fs_ioctl(request, size):
    # A filesystem ioctl that reads into a buffer of `size`, on a file of /usr.
    import fcntl
    fd = os.open('/usr/bin/true', os.O_RDONLY)
    try:
        fcntl.ioctl(fd, request, bytearray(size))
    finally:
        os.close(fd)
    return 0
def own_page():
    # The address of a page of this process's own, touched.
    import mmap
    m = mmap.mmap(-1, 4096)
    m.write(b'x')
    own_page.keep = m
    return ctypes.addressof(ctypes.c_char.from_buffer(m))
def move_pages_self():
    # move_pages of one page of its own, to no node (status only).
    pages = (ctypes.c_void_p * 1)(own_page())
    status = (ctypes.c_int * 1)()
    return libc.syscall(L(279), L(0), L(1), pages, None, status, L(0))
def fanotify_fid():
    # fanotify_init(FAN_CLOEXEC | FAN_REPORT_FID, O_RDONLY): unprivileged since Linux 5.13.
    return fd_ok(libc.syscall(L(300), L(0x1 | 0x200), L(os.O_RDONLY)))
def tmpfs_on_cwd():
    # The new mount API end to end: fsopen("tmpfs"), fsconfig(FSCONFIG_CMD_CREATE = 6),
    # fsmount, move_mount(MOVE_MOUNT_F_EMPTY_PATH = 4) onto the working directory.
    fs = libc.syscall(L(430), b'tmpfs', L(0))
    if fs < 0:
        return -1
    try:
        if libc.syscall(L(431), L(fs), L(6), None, None, L(0)) < 0:
            return -1
        mnt = libc.syscall(L(432), L(fs), L(0), L(0))
        if mnt < 0:
            return -1
        try:
            return libc.syscall(L(429), L(mnt), b'', L(AT_FDCWD), b'.', L(4))
        finally:
            os.close(mnt)
    finally:
        os.close(fs)
class MountAttr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ('set', 'clr', 'propagation', 'userns_fd')]
def root_writable():
    # mount_setattr clearing MOUNT_ATTR_RDONLY (1) on the root mount.
    a = MountAttr(0, 1, 0, 0)
    return libc.syscall(L(442), L(AT_FDCWD), b'/', L(0), ctypes.byref(a), L(ctypes.sizeof(a)))
class Iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
def vm_readv_self():
    # process_vm_readv of 8 bytes of this process's own memory.
    src = ctypes.create_string_buffer(b'airlock', 8)
    dst = ctypes.create_string_buffer(8)
    local, remote = Iovec(ctypes.addressof(dst), 8), Iovec(ctypes.addressof(src), 8)
    n = libc.syscall(L(310), L(os.getpid()), ctypes.byref(local), L(1), ctypes.byref(remote),
                     L(1), L(0))
    return -1 if n < 0 else (0 if dst.raw == src.raw else -2)
def pidfd_getfd_self():
    # A copy of this process's own descriptor 0, taken through its pidfd.
    pidfd = os.pidfd_open(os.getpid())
    try:
        return fd_ok(libc.syscall(L(438), L(pidfd), L(0), L(0)))
    finally:
        os.close(pidfd)
probes = {
    'clone3-null': lambda: libc.syscall(435, None, 0),
    # Calls newer than the policy's NEWEST_REVIEWED (mseal, 462), with arguments the kernel
    # refuses on its own (a null path, a zero size): open_tree_attr and file_setattr.
    'open_tree_attr-null': lambda: libc.syscall(467, -100, None, 0, None, 0),
    'file_setattr-size0': lambda: libc.syscall(469, -1, b'x', None, 0, 0),
    'int80-getpid': int80_getpid,
    'unshare-newuser': lambda: libc.unshare(CLONE_NEWUSER),
    'mount-tmpfs': lambda: libc.mount(b'none', b'/work', b'tmpfs', 0, None),
    # NETLINK_ROUTE (0) is allowed; sock_diag (4) and uevent (15) stand for the rest.
    'socket-netlink-route': lambda: socket.socket(AF_NETLINK, socket.SOCK_RAW, 0).close(),
    'socket-netlink-diag': lambda: socket.socket(AF_NETLINK, socket.SOCK_RAW, 4).close(),
    'socket-netlink-uevent': lambda: socket.socket(AF_NETLINK, socket.SOCK_RAW, 15).close(),
    'ptrace-traceme': traceme,
    'getpid': lambda: 0 if libc.getpid() == os.getpid() else -2,
    'socket-inet': lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(),
    # Arguments the kernel itself refuses without any privilege check (a bad descriptor,
    # an unknown command, a null pointer): outside the answer is EBADF/EINVAL/EFAULT, so an
    # EPERM inside can only come from the filter.
    'io_uring-setup': lambda: libc.syscall(425, 1, ctypes.create_string_buffer(120)),
    'bpf-bad-cmd': lambda: libc.syscall(321, 9999, None, 0),
    'open-by-handle-at': lambda: libc.syscall(304, -2, None, 0),
    'perf-event-open': lambda: libc.syscall(298, None, 0, -1, -1, 0),
    'keyctl-bad-cmd': lambda: libc.syscall(250, 0, 0),
    'getfsmap-usr': getfsmap_usr,
    # NUMA page placement of its own pages (MPOL_DEFAULT; migrate_pages with no nodes), and
    # fanotify, all unprivileged on the host.
    # The host filesystem's UUID, sysfs path and label (struct fsuuid2, fs_sysfs_path, a
    # 256-byte label).
    'fs-uuid-usr': lambda: fs_ioctl(0x80111500, 17),
    'fs-sysfs-path-usr': lambda: fs_ioctl(0x80811501, 129),
    'fs-label-usr': lambda: fs_ioctl(0x81009431, 256),
    'move_pages-self': move_pages_self,
    'migrate_pages-self': lambda: libc.syscall(L(256), L(0), L(0), None, None),
    'mbind-default': lambda: libc.syscall(L(237), L(own_page()), L(4096), L(0), None, L(0),
                                          L(0)),
    'fanotify-fid': fanotify_fid,
    # Break-outs that work for root of a user namespace of its own (the control), and for
    # which no privilege is needed at all when marked (*).
    'clone-newuser': lambda: raw_clone(CLONE_NEWUSER),  # (*)
    'clone-newuser-newns': lambda: raw_clone(CLONE_NEWUSER | 0x20000),  # (*) CLONE_NEWNS
    'setns-bad-fd': lambda: libc.syscall(L(308), L(-1), L(0)),  # (*) EBADF
    'open_tree-plain': lambda: fd_ok(libc.syscall(L(428), L(AT_FDCWD), b'/', L(0))),  # (*)
    'tmpfs-on-cwd': tmpfs_on_cwd,
    'mount_setattr-root-rw': root_writable,
    'chroot-cwd': lambda: libc.chroot(b'.'),
    'userfaultfd-user-mode': lambda: fd_ok(libc.syscall(L(323), L(1 | os.O_CLOEXEC))),  # (*)
    'add_key-null': lambda: libc.syscall(L(248), None, None, None, L(0), L(0)),  # (*) EFAULT
    'request_key-null': lambda: libc.syscall(L(249), None, None, None, L(0)),  # (*) EFAULT
    'kcmp-bad-type': lambda: libc.syscall(L(312), L(os.getpid()), L(os.getpid()), L(99),
                                          L(0), L(0)),  # (*) EINVAL
    'name_to_handle_at-null': lambda: libc.syscall(L(303), L(AT_FDCWD), None, None, None,
                                                   L(0)),  # (*) EFAULT
    'process_vm_readv-self': vm_readv_self,  # (*)
    'pidfd_getfd-self': pidfd_getfd_self,  # (*)
    'personality-no-aslr': lambda: libc.personality(L(0x0040000)),  # (*) ADDR_NO_RANDOMIZE
    'socket-raw-icmp': lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                             socket.IPPROTO_ICMP).close(),
    # AF_INET's obsolete SOCK_PACKET (10), which the kernel turns into a packet socket.
    'socket-inet-packet': lambda: socket.socket(socket.AF_INET, 10, 0).close(),
    # The rest of the mount API: pivot_root into the working directory (no mount point:
    # EINVAL), umount2 of the tmpfs tmpfs-on-cwd mounted there, fspick of the root (after
    # chroot-cwd, a directory that is no mount's root: EINVAL).
    'pivot_root-cwd': lambda: libc.syscall(L(155), b'.', b'.'),
    'umount2-cwd': lambda: libc.syscall(L(166), b'.', L(0)),
    'fspick-root': lambda: fd_ok(libc.syscall(L(433), L(AT_FDCWD), b'/', L(0))),
    'personality-read-implies-exec': lambda: libc.personality(L(0x0400000)),  # (*)
    # Socket families beyond AF_UNIX, AF_INET(6) and NETLINK_ROUTE: packet (17), XDP (44),
    # vsock (40), AF_ALG (38, no privilege needed where the kernel has it).
    'socket-packet': lambda: socket.socket(17, socket.SOCK_RAW, 0).close(),
    'socket-xdp': lambda: socket.socket(44, socket.SOCK_RAW, 0).close(),
    'socket-vsock': lambda: socket.socket(40, socket.SOCK_STREAM, 0).close(),
    'socket-alg': lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0).close(),
}
for name in sys.argv[1:]:
    try:
        ctypes.set_errno(0)
        r = probes[name]()
        if isinstance(r, tuple):
            print('%s:%s:%s' % (name, r[0], r[1]))
        elif r == -1:
            e = ctypes.get_errno()
            print('%s:ERR:%s' % (name, errno.errorcode.get(e, e)))
        elif r == -2:
            print('%s:WRONG' % name)
        else:
            print('%s:OK' % name)
    except OSError as e:
        print('%s:ERR:%s' % (name, errno.errorcode.get(e.errno, e.errno)))
"#;

// ---------------------------------------------------------------------------------------------
// 1. Files of the caller

#[test]
fn caller_home_credentials_are_unreadable() {
    let secret = "aws_secret_access_key = AIRLOCK-FAKE-SECRET-7d41";
    // Not under /tmp or /var/tmp: inside, both are scratch, which would hide a path there for
    // another reason. /srv is the host's, absent inside.
    let home = world_readable_dir("/srv", "airlock-fake-home");
    let aws = home.path().join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::set_permissions(&aws, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cred = aws.join("credentials");
    write_world_readable(&cred, &format!("[default]\n{secret}\n"));
    // Absolute host paths: one under /var/tmp, one under the host's /tmp (both scratch links
    // inside, which must not lead to the host's).
    let var_dir = world_readable_dir("/var/tmp", "airlock-secret");
    let var_file = var_dir.path().join("token.txt");
    write_world_readable(&var_file, &format!("{secret}\n"));
    let tmp_dir = world_readable_dir("/tmp", "airlock-secret");
    let tmp_file = tmp_dir.path().join("token.txt");
    write_world_readable(&tmp_file, &format!("{secret}\n"));

    let paths = [
        cred.to_str().unwrap(),
        "~/.aws/credentials",
        var_file.to_str().unwrap(),
        tmp_file.to_str().unwrap(),
    ];
    let probe = py(READ_PROBE, &paths);
    for who in BOTH {
        // Control: the caller reads all of them on the host.
        let host = host_cmd(who, &probe)
            .env("HOME", home.path())
            .output()
            .unwrap();
        for p in paths {
            assert_line(
                &host,
                &format!("READ-OK:{p}"),
                &format!("{who:?} host control"),
            );
        }
        assert_eq!(
            stdout(&host).matches(secret).count(),
            paths.len(),
            "{who:?} host control\n{}",
            show(&host)
        );

        let inside = airlock_run(who, &[], &probe)
            .env("HOME", home.path())
            .output()
            .unwrap();
        for p in paths {
            assert_line(
                &inside,
                &format!("READ-DENIED:{p}:ENOENT"),
                &format!("{who:?} inside"),
            );
        }
        assert_never_shows(&inside, secret, &format!("{who:?} inside"));
        assert_exit(&inside, 0, &format!("{who:?} inside"));
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Environment of the caller

#[test]
fn caller_secret_env_var_is_absent_inside() {
    const NAME: &str = "AIRLOCK_TEST_SECRET_TOKEN";
    let value = format!("s3cr3t-env-{}", std::process::id());
    for who in BOTH {
        let ctx = format!("{who:?} inside");
        let env = airlock_run(who, &[], &["env"])
            .env(NAME, &value)
            .output()
            .unwrap();
        assert_exit(&env, 0, &ctx);
        assert!(
            lines(&env).iter().any(|l| l.starts_with("PATH=")),
            "{ctx}: env printed nothing\n{}",
            show(&env)
        );
        assert_never_shows(&env, &value, &ctx);
        assert!(!stdout(&env).contains(NAME), "{ctx}\n{}", show(&env));

        let probe = airlock_run(who, &[], &py(ENVIRON_PROBE, &[NAME]))
            .env(NAME, &value)
            .output()
            .unwrap();
        assert_line(&probe, "ENV-HAS:no", &ctx);
        // The sandbox's init is a fork of airlock, so its environ holds the caller's
        // environment: it must stay unreadable (the init is not dumpable).
        assert_line(&probe, "ENVIRON-DENIED:1:EACCES", &ctx);
        let self_pid = lines(&probe)
            .iter()
            .find_map(|l| l.strip_prefix("SELF:").map(str::to_string))
            .unwrap_or_else(|| panic!("{ctx}: the probe did not start\n{}", show(&probe)));
        assert_line(&probe, &format!("ENVIRON:{self_pid}:absent"), &ctx);
        assert!(
            !stdout(&probe).contains(":present"),
            "{ctx}: some /proc/*/environ holds {NAME}\n{}",
            show(&probe)
        );
        assert_never_shows(&probe, &value, &ctx);

        // Control: forwarded on purpose, the same probes see it.
        let ctx = format!("{who:?} --env {NAME}");
        let env = airlock_run(who, &["--env", NAME], &["env"])
            .env(NAME, &value)
            .output()
            .unwrap();
        assert_line(&env, &format!("{NAME}={value}"), &ctx);
        let probe = airlock_run(who, &["--env", NAME], &py(ENVIRON_PROBE, &[NAME]))
            .env(NAME, &value)
            .output()
            .unwrap();
        assert_line(&probe, "ENV-HAS:yes", &ctx);
        let self_pid = lines(&probe)
            .iter()
            .find_map(|l| l.strip_prefix("SELF:").map(str::to_string))
            .unwrap_or_else(|| panic!("{ctx}: the probe did not start\n{}", show(&probe)));
        assert_line(&probe, &format!("ENVIRON:{self_pid}:present"), &ctx);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Network

#[test]
fn host_network_is_unreachable_but_own_loopback_works() {
    let local = HttpServer::start(IpAddr::from([127, 0, 0, 1]));
    let outer = HttpServer::start(machine_address());
    let (local_spec, outer_spec) = (local.spec(), outer.spec());
    let probe = py(NET_PROBE, &[&local_spec, &outer_spec, "own-loopback"]);
    let reached = |spec: &str| format!("CONNECT-OK:{spec}:HTTP/1.0 200 OK:{HTTP_BODY}");
    for who in BOTH {
        // Control: the same client on the host reaches both servers.
        let host = run_host(who, &probe);
        assert_line(
            &host,
            &reached(&local_spec),
            &format!("{who:?} host control"),
        );
        assert_line(
            &host,
            &reached(&outer_spec),
            &format!("{who:?} host control"),
        );

        let ctx = format!("{who:?} inside");
        let inside = run_inside(who, &[], &probe);
        assert_line(
            &inside,
            &format!("CONNECT-FAILED:{local_spec}:ECONNREFUSED"),
            &ctx,
        );
        assert_line(
            &inside,
            &format!("CONNECT-FAILED:{outer_spec}:ENETUNREACH"),
            &ctx,
        );
        assert_line(&inside, "OWN-LOOPBACK-OK:HTTP/1.0 200 OK:INNER-PONG", &ctx);
        assert_exit(&inside, 0, &ctx);

        // Control with the feature off: --share-net reaches both.
        let ctx = format!("{who:?} --share-net");
        let shared = run_inside(who, &["--share-net"], &probe);
        assert_line(&shared, &reached(&local_spec), &ctx);
        assert_line(&shared, &reached(&outer_spec), &ctx);
    }
}

/// NETLINK_ROUTE is the one netlink protocol the policy allows (seccomp/README.md): getifaddrs
/// reads the task's own network namespace, so Node's `os.networkInterfaces()` (dev servers call
/// it at start, and it threw while netlink was refused whole) and Python's `if_nameindex()` see
/// the loopback alone, and `--share-net` shows the host's interfaces; changing an interface
/// needs CAP_NET_ADMIN, which the task never has. Controls: the host's interface list, and
/// `ip link set lo down` in a user and network namespace of the host's, where it works.
#[test]
fn the_task_reads_its_own_interfaces_and_changes_none() {
    const NODE_NAMES: &str = "const i = require('os').networkInterfaces(); console.log('NODE:' + \
        Object.keys(i).sort().join(',') + ':' + i.lo.map(a => a.address).sort().join(','))";
    const PY_NAMES: &str =
        "import socket; print('PY:' + ','.join(sorted(n for _, n in socket.if_nameindex())))";
    const LO_DOWN: [&str; 5] = ["/usr/bin/ip", "link", "set", "lo", "down"];
    let host = run_host(Launcher::Root, &py(PY_NAMES, &[]));
    let host_names = stdout(&host).trim().to_string();
    assert!(
        host_names.starts_with("PY:") && host_names != "PY:lo",
        "host control: {}",
        show(&host)
    );
    for who in BOTH {
        let ctx = format!("{who:?} inside");
        let node = run_inside(who, &[], &["/usr/bin/node", "-e", NODE_NAMES]);
        assert_line(&node, "NODE:lo:127.0.0.1,::1", &ctx);
        assert_line(&run_inside(who, &[], &py(PY_NAMES, &[])), "PY:lo", &ctx);
        let shared = run_inside(who, &["--share-net"], &py(PY_NAMES, &[]));
        assert_line(&shared, &host_names, &format!("{who:?} --share-net"));

        let down = run_inside(who, &[], &LO_DOWN);
        assert_exit(&down, 2, &ctx);
        assert_eq!(
            stderr(&down),
            "RTNETLINK answers: Operation not permitted\n",
            "{ctx}"
        );
        let mut own = vec!["unshare", "-rn"];
        own.extend(LO_DOWN);
        let control = run_host(who, &own);
        assert_exit(&control, 0, &format!("{who:?} control"));
    }
}

/// `NETNS_LIMITED LIMIT ARGV...`: runs ARGV in a user namespace of its own whose
/// user.max_net_namespaces is LIMIT (namespaces made in any user namespace below count against
/// it). The ids map to themselves: 0-65535 for root (so airlock inside still runs as root), the
/// caller's alone otherwise. The parent writes the maps, as only it may map a range.
const NETNS_LIMITED: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
n = 65536 if uid == 0 else 1
def put(path, text):
    with open(path, 'w') as f:
        f.write(text)
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:
        sys.exit('unshare(CLONE_NEWUSER): ' + os.strerror(ctypes.get_errno()))
    os.write(ready_w, b'u')
    if os.read(go_r, 1) != b'm':
        os._exit(99)
    put('/proc/sys/user/max_net_namespaces', sys.argv[1])
    os.execv(sys.argv[2], sys.argv[2:])
os.read(ready_r, 1)
if uid != 0:
    put(f'/proc/{pid}/setgroups', 'deny')
put(f'/proc/{pid}/uid_map', f'{uid} {uid} {n}')
put(f'/proc/{pid}/gid_map', f'{gid} {gid} {n}')
os.write(go_w, b'm')
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"#;

/// If the network namespace cannot be made, the launch stops (exit 125, naming the step and the
/// call) and the task never runs; bwrap's front end fails as bubblewrap does.
#[test]
fn no_network_namespace_means_no_launch() {
    let bin = binary().to_str().unwrap();
    let task = ["sh", "-c", "echo TASK-RAN"];
    let limited = |who, limit: &str, args: &[&str]| {
        let mut argv = py(NETNS_LIMITED, &[limit, bin]);
        argv.extend_from_slice(args);
        run_host(who, &argv)
    };
    let with = |front: &[&'static str], tail: &[&'static str]| -> Vec<&'static str> {
        [front, tail].concat()
    };
    let bwrap = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev"];
    for who in BOTH {
        // Controls: with room for one namespace the task runs; with none, --share-net runs too.
        for (limit, args) in [
            ("1", with(&["run", "--"], &task)),
            ("0", with(&["run", "--share-net", "--"], &task)),
            ("1", with(&bwrap, &with(&["--unshare-all", "--"], &task))),
        ] {
            let o = limited(who, limit, &args);
            let ctx = format!("{who:?} control: limit {limit}, {args:?}");
            assert_exit(&o, 0, &ctx);
            assert_line(&o, "TASK-RAN", &ctx);
        }

        let ctx = format!("{who:?} limit 0");
        let o = limited(who, "0", &with(&["run", "--"], &task));
        assert_exit(&o, 125, &ctx);
        assert!(!stdout(&o).contains("TASK-RAN"), "{ctx}\n{}", show(&o));
        let err = stderr(&o);
        assert!(
            err.contains("step 10 network namespace")
                && err.contains("unshare(CLONE_NEWNET)")
                && err.contains("ENOSPC")
                && err.contains("user.max_net_namespaces"),
            "{ctx}\n{}",
            show(&o)
        );

        // The bwrap front end, with the namespace made by the launcher's helper and, with
        // --info-fd (which reports it), by clone3: both fail in bubblewrap's words.
        for extra in [&[][..], &["--info-fd", "1"][..]] {
            let line = with(&bwrap, &with(extra, &with(&["--unshare-all", "--"], &task)));
            let o = limited(who, "0", &line);
            let ctx = format!("{ctx} {extra:?}");
            assert_exit(&o, 1, &ctx);
            assert_eq!(stdout(&o), "", "{ctx}");
            assert_eq!(
                stderr(&o),
                "bwrap: Creating new namespace failed: nesting depth or \
                 /proc/sys/user/max_*_namespaces exceeded (ENOSPC)\n",
                "{ctx}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Filesystem writes and mount flags

#[test]
fn writes_outside_scratch_fail() {
    let denied = [
        "/probe",
        "/etc/probe",
        "/usr/probe",
        "/usr/bin/probe",
        "/dev/probe",
    ];
    let allowed = [
        "/work/probe-work",
        "/tmp/probe-tmp",
        "/var/tmp/probe-vtmp",
        "/dev/shm/probe-shm",
    ];
    let mut args: Vec<&str> = denied.to_vec();
    args.extend(allowed);
    let probe = py(WRITE_PROBE, &args);
    for who in BOTH {
        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &probe);
        for p in denied {
            assert_line(&o, &format!("WRITE-DENIED:{p}:EROFS"), &ctx);
            assert!(
                !lines(&o).contains(&format!("LANDED:{p}")),
                "{ctx}: {p} exists\n{}",
                show(&o)
            );
        }
        // Control: scratch (and /dev/shm) take writes; /tmp and /var/tmp are scratch.
        for p in allowed {
            assert_line(&o, &format!("WRITE-OK:{p}"), &ctx);
        }
        // What is written through the links lands in scratch (a result file).
        let script = "echo a > /tmp/a && echo b > /var/tmp/b && ls /work && readlink /tmp /var/tmp";
        let link = run_inside(who, &[], &["sh", "-c", script]);
        assert_eq!(
            stdout(&link),
            "a\nb\n/work\n/work\n",
            "{ctx}\n{}",
            show(&link)
        );
    }
}

/// Writes each PATH=VALUE argument's value to PATH: `SET-OK:<path>` or
/// `SET-DENIED:<path>:<errno name>`; then `VALUE:<path>:<what PATH reads>` for each.
const SYSCTL_PROBE: &str = r#"
import errno, sys
pairs = [a.split('=', 1) for a in sys.argv[1:]]
for path, value in pairs:
    try:
        with open(path, 'w') as f:
            f.write(value)
        print('SET-OK:' + path)
    except OSError as e:
        print('SET-DENIED:%s:%s' % (path, errno.errorcode.get(e.errno, e.errno)))
for path, _ in pairs:
    with open(path) as f:
        print('VALUE:%s:%s' % (path, f.read().strip()))
"#;

/// The kernel settings that belong to the sandbox's own namespaces stay as the boundary set
/// them: its user namespace's inotify cap (step 4: raised, it would let the task take every
/// inotify instance of its creator on the host), its network namespace's forwarding and
/// lowest unprivileged port. `/proc` is read-only (EROFS) and the values read back unchanged.
/// Control: the same probe on the host as root of a user and network namespace of its own
/// (`unshare -Urn`), where each write goes through (to that namespace's values only).
#[test]
fn the_sandbox_s_own_kernel_settings_cannot_be_changed() {
    // A new network namespace starts with the host's IPv4 settings (the kernel's default,
    // net.core.devconf_inherit_init_net=0), forwarding included: a host that forwards (a
    // container host's bridge turns it on) gives the sandbox 1, which it must not change.
    let forward = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    let (forward, other) = match forward.trim() {
        "0" => ("0", "1"),
        _ => ("1", "0"),
    };
    let settings = [
        ("/proc/sys/user/max_inotify_instances", "1000", "16"),
        ("/proc/sys/net/ipv4/ip_forward", other, forward),
        ("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0", "1024"),
    ];
    let args: Vec<String> = settings
        .iter()
        .map(|(p, v, _)| format!("{p}={v}"))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let probe = py(SYSCTL_PROBE, &args);
    let mut in_own_namespaces = vec!["unshare", "-Urn"];
    in_own_namespaces.extend_from_slice(&probe);
    for who in BOTH {
        let host = run_host(who, &in_own_namespaces);
        let ctx = format!("host control as {who:?} in its own namespaces");
        for (path, value, _) in settings {
            assert_line(&host, &format!("SET-OK:{path}"), &ctx);
            assert_line(&host, &format!("VALUE:{path}:{value}"), &ctx);
        }

        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &probe);
        for (path, _, kept) in settings {
            assert_line(&o, &format!("SET-DENIED:{path}:EROFS"), &ctx);
            assert_line(&o, &format!("VALUE:{path}:{kept}"), &ctx);
        }
        assert_exit(&o, 0, &ctx);
    }
}

struct Mount {
    point: String,
    options: Vec<String>,
    fstype: String,
    super_options: Vec<String>,
}

/// Fields of /proc/PID/mountinfo: 5 is the mount point, 6 the per-mount options; the
/// filesystem type, the source and the superblock's options follow the "-" separator.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-").expect(l);
            Mount {
                point: f[4].to_string(),
                options: f[5].split(',').map(str::to_string).collect(),
                fstype: f[sep + 1].to_string(),
                super_options: f[sep + 3].split(',').map(str::to_string).collect(),
            }
        })
        .collect()
}

/// The mounts that may be written to.
const WRITABLE_MOUNTS: [&str; 3] = ["/work", "/dev/shm", "/dev/pts"];
/// The device nodes bound from the host: they must allow devices (not nodev).
const DEVICE_BINDS: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Every way the mount table breaks the rules: read-only except the writable mounts, nosuid
/// everywhere, nodev except on device nodes. /dev/pts is exempt from nodev (a pty can only be
/// opened from a mount that allows devices) but must be its own devpts, noexec.
fn mount_violations(mounts: &[Mount]) -> Vec<String> {
    let mut v = Vec::new();
    for m in mounts {
        let has = |o: &str| m.options.iter().any(|x| x == o);
        let p = m.point.as_str();
        if !WRITABLE_MOUNTS.contains(&p) && !has("ro") {
            v.push(format!("{p} is not read-only: {:?}", m.options));
        }
        if !has("nosuid") {
            v.push(format!("{p} is not nosuid: {:?}", m.options));
        }
        if p == "/dev/pts" {
            if m.fstype != "devpts" || !has("noexec") {
                v.push(format!(
                    "/dev/pts is {} {:?}, not a noexec devpts",
                    m.fstype, m.options
                ));
            }
        } else if !DEVICE_BINDS.contains(&p) && !has("nodev") {
            v.push(format!("{p} is not nodev: {:?}", m.options));
        }
    }
    v
}

#[test]
fn every_mount_is_read_only_nosuid_and_nodev_except_scratch() {
    for who in BOTH {
        // Control: the checker finds violations in the host's own mount table.
        let host = run_host(who, &["cat", "/proc/self/mountinfo"]);
        let host_mounts = parse_mountinfo(&stdout(&host));
        assert!(
            !mount_violations(&host_mounts).is_empty(),
            "{who:?} host control: the checker finds nothing wrong on the host\n{}",
            show(&host)
        );

        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &["cat", "/proc/self/mountinfo"]);
        assert_exit(&o, 0, &ctx);
        let mounts = parse_mountinfo(&stdout(&o));
        let points: BTreeSet<&str> = mounts.iter().map(|m| m.point.as_str()).collect();
        for must in [
            "/",
            "/usr",
            "/proc",
            "/work",
            "/dev/shm",
            "/dev/pts",
            "/dev/null",
        ] {
            assert!(
                points.contains(must),
                "{ctx}: no {must} mount\n{}",
                show(&o)
            );
        }
        let violations = mount_violations(&mounts);
        assert!(
            violations.is_empty(),
            "{ctx}: {violations:#?}\n{}",
            show(&o)
        );
        // The writable ones really are writable (the parser reads the right field).
        for p in WRITABLE_MOUNTS {
            let m = mounts.iter().find(|m| m.point == p).unwrap();
            assert!(
                m.options.iter().any(|o| o == "rw"),
                "{ctx}: {p} {:?}",
                m.options
            );
        }
        // /proc, mounted writable for the user namespace's caps (step 7), is then read-only
        // in its superblock too, not only in its mount; scratch's superblock (control) is not.
        let super_ro = |p: &str| {
            let m = mounts.iter().find(|m| m.point == p).unwrap();
            m.super_options.iter().any(|o| o == "ro")
        };
        assert!(super_ro("/proc"), "{ctx}: /proc's superblock\n{}", show(&o));
        assert!(
            !super_ro("/work"),
            "{ctx}: /work's superblock\n{}",
            show(&o)
        );
        // A pty opens (which is why /dev/pts may not be nodev).
        let pty = run_inside(
            who,
            &[],
            &py(
                "import os, pty; m, s = pty.openpty(); print('PTY-OK:' + os.ttyname(s))",
                &[],
            ),
        );
        assert!(
            stdout(&pty).starts_with("PTY-OK:/dev/pts/"),
            "{ctx}\n{}",
            show(&pty)
        );
    }
}

/// Probes files by `op:path` arguments: `HASH:<path>:<sha256>`, `WRITE:<path>:OK|<errno>`
/// (append), `CHMOD:<path>:OK|<errno>` (to 0600), `EXISTS:<path>:True|False`,
/// `MOUNT:<path>:True|False` (a mount point in /proc/self/mountinfo).
const FILE_PROBE: &str = concat!(
    py_attempt!(),
    r#"
import hashlib, os, sys
mounts = set(l.split()[4] for l in open('/proc/self/mountinfo'))
for arg in sys.argv[1:]:
    op, p = arg.split(':', 1)
    if op == 'hash':
        print('HASH:%s:%s' % (p, hashlib.sha256(open(p, 'rb').read()).hexdigest()))
    elif op == 'write':
        attempt('WRITE:' + p, lambda: open(p, 'a').write('x'))
    elif op == 'chmod':
        attempt('CHMOD:' + p, lambda: os.chmod(p, 0o600))
    elif op == 'exists':
        print('EXISTS:%s:%s' % (p, os.path.exists(p)))
    elif op == 'mount':
        print('MOUNT:%s:%s' % (p, p in mounts))
"#
);

/// airlock run's /etc: listed host files (protocols, ld.so.cache) are read-only binds with the
/// host's bytes, which the task can neither append to (EACCES: the host's root owns them) nor
/// chmod (EROFS: the mount is read-only, checked before ownership), and directories (ssl/certs) are read-only binds; host files not listed (shadow,
/// fstab, login.defs) are absent. Controls: on the host the files exist with the same hashes;
/// the same write and chmod probes succeed on the task's own file in /work inside and on the
/// caller's own file on the host.
#[test]
fn etc_holds_read_only_binds_and_nothing_else_of_the_host() {
    let own_dir = world_readable_dir("/var/tmp", "airlock-etc-control");
    std::fs::set_permissions(own_dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    for who in BOTH {
        let own = own_dir.path().join(format!("{who:?}"));
        let own = own.to_str().unwrap();
        let host = run_host(
            who,
            &py(
                FILE_PROBE,
                &[
                    "hash:/etc/protocols",
                    "hash:/etc/ld.so.cache",
                    "exists:/etc/shadow",
                    "exists:/etc/fstab",
                    "exists:/etc/login.defs",
                    &format!("write:{own}"),
                    &format!("chmod:{own}"),
                ],
            ),
        );
        let hctx = format!("host control as {who:?}");
        assert_lines(
            &host,
            &[
                "EXISTS:/etc/shadow:True",
                "EXISTS:/etc/fstab:True",
                "EXISTS:/etc/login.defs:True",
                &format!("WRITE:{own}:OK"),
                &format!("CHMOD:{own}:OK"),
            ],
            &hctx,
        );
        let hashes: Vec<String> = stdout(&host)
            .lines()
            .filter(|l| l.starts_with("HASH:"))
            .map(String::from)
            .collect();
        assert_eq!(hashes.len(), 2, "{hctx}\n{}", show(&host));

        let ctx = format!("{who:?} inside");
        let o = run_inside(
            who,
            &[],
            &[
                "sh",
                "-c",
                &format!("echo mine > /work/own && exec {PYTHON} -c \"$0\" \"$@\"",),
                FILE_PROBE,
                "hash:/etc/protocols",
                "hash:/etc/ld.so.cache",
                "mount:/etc/protocols",
                "mount:/etc/ld.so.cache",
                "mount:/etc/ssl/certs",
                "write:/etc/protocols",
                "chmod:/etc/protocols",
                "write:/etc/ssl/certs/probe",
                "write:/work/own",
                "chmod:/work/own",
                "exists:/etc/shadow",
                "exists:/etc/fstab",
                "exists:/etc/login.defs",
            ],
        );
        for h in &hashes {
            assert_line(&o, h, &ctx);
        }
        assert_lines(
            &o,
            &[
                "MOUNT:/etc/protocols:True",
                "MOUNT:/etc/ld.so.cache:True",
                "MOUNT:/etc/ssl/certs:True",
                // Opened for appending: the host's root owns it (the overflow id inside).
                "WRITE:/etc/protocols:EACCES",
                "CHMOD:/etc/protocols:EROFS",
                "WRITE:/etc/ssl/certs/probe:EROFS",
                "WRITE:/work/own:OK",
                "CHMOD:/work/own:OK",
                "EXISTS:/etc/shadow:False",
                "EXISTS:/etc/fstab:False",
                "EXISTS:/etc/login.defs:False",
            ],
            &ctx,
        );
        assert_exit(&o, 0, &ctx);
    }
}

/// A name the dev VM resolves through DNS (it reaches only package registries).
const DNS_NAME: &str = "deb.debian.org";

/// `sh -c SCRIPT` inside, bounded by airlock's own timeout (a resolver that gets no answer
/// retries for tens of seconds).
fn resolv_probe(who: Launcher, flags: &[&str], probes: &[&str]) -> Output {
    let script = format!(
        "grep '^hosts:' /etc/nsswitch.conf; getent hosts {DNS_NAME}; echo GETENT:$?; \
         exec {PYTHON} -c \"$0\" \"$@\""
    );
    let mut f = vec!["--timeout", "30s"];
    f.extend_from_slice(flags);
    let mut argv = vec!["sh", "-c", &script, FILE_PROBE];
    argv.extend_from_slice(probes);
    run_inside(who, &f, &argv)
}

/// The address getent printed for DNS_NAME, if any.
fn resolved(o: &Output) -> Option<IpAddr> {
    stdout(o).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 2 && f[1..].contains(&DNS_NAME))
            .then(|| f[0].parse().ok())
            .flatten()
    })
}

/// With --share-net, and only then, names resolve through DNS as on the host: the host's
/// /etc/resolv.conf is bound read-only (its bytes; chmod EROFS; the task cannot append) and
/// nsswitch.conf says `hosts: files dns`. Without --share-net there is no resolv.conf,
/// `hosts: files`, and the name does not resolve. airlock had written `hosts: files` and no
/// resolv.conf in both cases, so `getent hosts` and `pip install` failed with --share-net.
/// Control: the host resolves the name as the same user; if it cannot, the DNS part is
/// skipped with a note (the resolv.conf checks still run).
#[test]
fn share_net_resolves_names_through_the_hosts_dns_and_only_then() {
    let conf = "/etc/resolv.conf";
    let host_has_conf = Path::new(conf).exists();
    for who in BOTH {
        let host = host_cmd(who, &["timeout", "30", "getent", "hosts", DNS_NAME])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let host_resolves = resolved(&host).is_some();
        if !host_resolves {
            eprintln!(
                "SKIP the DNS part of share_net_resolves_names_through_the_hosts_dns_and_only_then \
                 as {who:?}: the host itself cannot resolve {DNS_NAME} ({})",
                show(&host)
            );
        }
        if !host_has_conf {
            eprintln!("NOTE: the host has no {conf}: it must be absent inside too");
        }

        let ctx = format!("{who:?} --share-net");
        let mut probes = vec!["exists:/etc/resolv.conf"];
        if host_has_conf {
            probes.extend([
                "hash:/etc/resolv.conf",
                "mount:/etc/resolv.conf",
                "write:/etc/resolv.conf",
                "chmod:/etc/resolv.conf",
            ]);
        }
        let mut o = resolv_probe(who, &["--share-net"], &probes);
        // The host asks an upstream server (no cache on the way), and a lookup over the
        // network fails now and then: one the host's just succeeded at is given three tries
        // inside. A sandbox that cannot reach the host's DNS fails all three.
        for _ in 0..2 {
            if !host_resolves || stdout(&o).lines().any(|l| l == "GETENT:0") {
                break;
            }
            o = resolv_probe(who, &["--share-net"], &probes);
        }
        assert_line(&o, "hosts: files dns", &ctx);
        assert_line(
            &o,
            &format!(
                "EXISTS:/etc/resolv.conf:{}",
                if host_has_conf { "True" } else { "False" }
            ),
            &ctx,
        );
        assert_exit(&o, 0, &ctx);
        if host_has_conf {
            let hash = run_host(who, &py(FILE_PROBE, &["hash:/etc/resolv.conf"]));
            assert_lines(
                &o,
                &[
                    stdout(&hash).trim(),
                    "MOUNT:/etc/resolv.conf:True",
                    // The host's root owns it (the overflow id inside); the mount is read-only.
                    "WRITE:/etc/resolv.conf:EACCES",
                    "CHMOD:/etc/resolv.conf:EROFS",
                ],
                &ctx,
            );
        }
        if host_resolves {
            assert_line(&o, "GETENT:0", &ctx);
            assert!(resolved(&o).is_some(), "{ctx}\n{}", show(&o));
        }

        let ctx = format!("{who:?} without --share-net");
        let o = resolv_probe(who, &[], &["exists:/etc/resolv.conf"]);
        assert_exit(&o, 0, &ctx);
        assert_lines(
            &o,
            &[
                "hosts: files",
                // Not found (2): only files are asked, and they do not know the name.
                "GETENT:2",
                "EXISTS:/etc/resolv.conf:False",
            ],
            &ctx,
        );
        assert_eq!(resolved(&o), None, "{ctx}\n{}", show(&o));
    }
}

/// Debian's /etc/resolv.conf is often a relative symlink into /run (systemd-resolved's
/// `../run/systemd/resolve/stub-resolv.conf`): with --share-net airlock binds what it leads to,
/// read-only, at /etc/resolv.conf, and a dangling one is skipped without failing the run. The
/// host's own /etc is not touched: each case runs in a private mount namespace (unshare -m, as
/// root) where /etc is an overlay whose resolv.conf is such a link into a tmpfs on a temporary
/// directory; airlock is launched there as root and as uid 65534. Control: the linked file
/// carries a marker that only the bound file can show.
#[test]
fn a_symlinked_resolv_conf_is_followed_and_a_dangling_one_skipped() {
    let dir = world_readable_dir("/tmp", "airlock-resolv-link-");
    let d = dir.path().to_str().unwrap();
    // The link is relative to /etc, as Debian's is.
    let linked = format!("..{d}/run/resolv.conf");
    let dangling = format!("..{d}/run/absent.conf");
    let setup = r#"set -e
d=$1 link=$2; shift 2
mount -t tmpfs -o mode=0755 airlock-resolv-test "$d"
mkdir "$d/upper" "$d/work" "$d/run"
{ cat /etc/resolv.conf 2>/dev/null || true; echo '# airlock-linked-resolv-conf'; } > "$d/run/resolv.conf"
chmod 644 "$d/run/resolv.conf"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$d/upper,workdir=$d/work" /etc
ln -sfn "$link" /etc/resolv.conf
exec "$@""#;
    let inside = format!(
        "echo MARKER:$(grep -c airlock-linked-resolv-conf /etc/resolv.conf 2>/dev/null); \
         exec {PYTHON} -c \"$0\" \"$@\""
    );
    for who in BOTH {
        for (link, present) in [(&linked, true), (&dangling, false)] {
            let ctx = format!("{who:?} --share-net, /etc/resolv.conf -> {link}");
            let mut argv = vec![
                "timeout",
                "60",
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                setup,
                "sh",
                d,
                link,
            ];
            argv.extend_from_slice(as_user(who));
            let bin = binary().to_str().unwrap();
            argv.extend([
                bin,
                "run",
                "--share-net",
                "--timeout",
                "30s",
                "--",
                "sh",
                "-c",
                &inside,
                FILE_PROBE,
                "exists:/etc/resolv.conf",
                "mount:/etc/resolv.conf",
                "chmod:/etc/resolv.conf",
            ]);
            let o = Command::new(argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_exit(&o, 0, &ctx);
            if present {
                assert_lines(
                    &o,
                    &[
                        "MARKER:1",
                        "EXISTS:/etc/resolv.conf:True",
                        "MOUNT:/etc/resolv.conf:True",
                        "CHMOD:/etc/resolv.conf:EROFS",
                    ],
                    &ctx,
                );
            } else {
                assert_lines(
                    &o,
                    &[
                        "MARKER:",
                        "EXISTS:/etc/resolv.conf:False",
                        "MOUNT:/etc/resolv.conf:False",
                    ],
                    &ctx,
                );
            }
        }
    }
}

/// The caller's umask shapes only the task's own files: under umask 0377 the task can still
/// read /etc (passwd names it, ssl/certs lists) and /work is 0755, and the task itself runs
/// with umask 0377, so what it writes is 0400. airlock had built the root under the caller's
/// umask: /etc was mode 0400 and unreadable to the task. Control: the same umask on the host
/// makes a new directory 0400.
#[test]
fn the_callers_umask_shapes_only_the_tasks_files() {
    let bin = common::binary().to_str().unwrap();
    for who in BOTH {
        let ctx = format!("{who:?}");
        let host = common::host_sh(
            who,
            "d=$(mktemp -d); umask 0377; mkdir $d/x; stat -c '%a' $d/x; rm -r $d",
        );
        assert_eq!(
            stdout(&host),
            "400\n",
            "host control as {ctx}: {}",
            show(&host)
        );
        let inside = "umask; id -un; ls /etc/ssl/certs >/dev/null && echo certs; \
                      stat -c '%n %a' /etc /work; echo x > /work/f; stat -c '%n %a' /work/f";
        let o = common::host_sh(
            who,
            &format!("umask 0377; exec {bin} run -- sh -c \"{inside}\""),
        );
        assert_eq!(
            stdout(&o),
            "0377\nairlock\ncerts\n/etc 755\n/work 755\n/work/f 400\n",
            "{ctx}: {}",
            show(&o)
        );
        assert_exit(&o, 0, &ctx);
    }
}

/// The task runs on the caller's CPUs, whatever airlock does with its init meanwhile (an init
/// that waits for the launcher's id maps is started on another CPU than the launcher's and
/// takes the caller's back at step 2): all of the machine's, one of them, or all named; in
/// airlock run and in bwrap mode, with --info-fd too (the launcher then writes an
/// unprivileged caller's maps as well). Control: the same affinity on the host, read the same
/// way. Without the init's step-2 restore a root caller's task ran on the launcher's other
/// CPUs only.
#[test]
fn the_task_runs_on_the_callers_cpus() {
    let bin = common::binary().to_str().unwrap();
    let read = "grep Cpus_allowed_list /proc/self/status";
    let bwrap = "bwrap --unshare-all --ro-bind / / --proc /proc";
    let front_ends = [
        "run --".to_string(),
        format!("{bwrap} --"),
        format!("{bwrap} --info-fd 3 -- 3>/dev/null"),
    ];
    for who in BOTH {
        for (cpus, front) in ["", "taskset -c 0", "taskset -c 0-$(($(nproc --all) - 1))"]
            .into_iter()
            .flat_map(|c| front_ends.iter().map(move |f| (c, f)))
        {
            let ctx = format!("{who:?} {cpus:?} {front:?}");
            let host = common::host_sh(who, &format!("exec {cpus} {read}"));
            assert_exit(&host, 0, &format!("host control, {ctx}"));
            assert!(
                stdout(&host).starts_with("Cpus_allowed_list:"),
                "host control, {ctx}: {}",
                show(&host)
            );
            for _ in 0..3 {
                // (A redirection anywhere in the line is the shell's: --info-fd gets fd 3.)
                let line = format!("exec {cpus} {bin} {front} {read}");
                let o = common::host_sh(who, &line);
                assert_exit(&o, 0, &ctx);
                assert_eq!(stdout(&o), stdout(&host), "{ctx}: {}", show(&o));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Processes

fn numeric_proc_entries(o: &Output) -> Vec<u32> {
    lines(o)
        .iter()
        .filter_map(|l| l.strip_prefix("PID:"))
        .map(|p| p.parse().unwrap())
        .collect()
}

#[test]
fn proc_shows_only_the_sandbox_processes() {
    let script = "ls /proc | grep -E '^[0-9]+$' | sed 's/^/PID:/'; echo \"SELF:$$\"";
    for who in BOTH {
        // Control: the host's /proc lists many processes.
        let host = host_sh(who, script);
        let host_pids = numeric_proc_entries(&host);
        assert!(
            host_pids.len() > 10,
            "{who:?} host control: {host_pids:?}\n{}",
            show(&host)
        );

        let ctx = format!("{who:?} inside");
        let o = sh(who, &[], script);
        assert_exit(&o, 0, &ctx);
        let pids = numeric_proc_entries(&o);
        assert!(
            pids.contains(&1) && pids.contains(&2),
            "{ctx}: {pids:?}\n{}",
            show(&o)
        );
        // init, the shell, and the pipeline's ls, grep and sed at most.
        assert!(
            pids.len() <= 5 && pids.iter().all(|&p| p <= 10),
            "{ctx}: {pids:?}\n{}",
            show(&o)
        );
        assert_line(&o, "SELF:2", &ctx);
    }
}

/// The task against its init, pid 1, which holds what airlock opened (as root, for a root
/// caller) and runs without the task's seccomp filter: its memory, maps, auxv, descriptors,
/// root, cwd, executable and namespaces stay closed through /proc (EACCES: it is not dumpable),
/// and a SIGSTOP to it is dropped (the kernel's rule for a pid namespace's init). Control: the
/// same probe pointed at a child of its own, inside the same sandbox (same uid, dumpable, not
/// an init) and on the host, reaches every entry and stops the child.
#[test]
fn the_init_s_memory_descriptors_and_namespaces_are_closed_to_the_task() {
    let entries = [
        "maps", "mem", "auxv", "fd", "fdinfo", "root", "cwd", "exe", "ns-user", "ns-mnt",
    ];
    let reached: Vec<String> = entries
        .iter()
        .map(|e| format!("{e}:OK"))
        .chain(["sigstop:OK".to_string()])
        .collect();
    let closed: Vec<String> = entries
        .iter()
        .map(|e| format!("{e}:ERR:EACCES"))
        .chain(["sigstop:IGNORED".to_string()])
        .collect();
    for who in BOTH {
        let host = run_host(who, &py(PROC_TARGET_PROBE, &["child"]));
        assert_eq!(
            lines(&host),
            reached,
            "{who:?} host control\n{}",
            show(&host)
        );
        let sibling = run_inside(who, &[], &py(PROC_TARGET_PROBE, &["child"]));
        assert_eq!(
            lines(&sibling),
            reached,
            "{who:?} inside, control\n{}",
            show(&sibling)
        );

        let ctx = format!("{who:?} inside, against pid 1");
        let o = run_inside(who, &[], &py(PROC_TARGET_PROBE, &["1"]));
        assert_eq!(lines(&o), closed, "{ctx}\n{}", show(&o));
        assert_exit(&o, 0, &ctx);
    }
}

/// kill(-1, SIGKILL) from the task reaches every process it may signal: only the sandbox's own.
/// A sibling of the task dies, the task and its init live on (the task prints after it and
/// exits 0), and a host process running as the task's host uid (65534, the default for a root
/// caller and the unprivileged caller's own) lives. Control: on the host, uid 65534 may signal
/// that process (kill -0), so its uid does not protect it; only the pid namespace does.
#[test]
fn kill_minus_one_from_the_task_reaches_only_the_sandbox() {
    let argv = ["sleep", "59.8427"];
    let mut host = Running(host_cmd(Launcher::Unprivileged, &argv).spawn().unwrap());
    let pid = poll_for(Duration::from_secs(5), || {
        pids_with_argv(&argv).first().copied()
    })
    .expect("the host process as uid 65534 did not start");
    let control = host_sh(
        Launcher::Unprivileged,
        &format!("kill -0 {pid} && echo SIGNAL-OK"),
    );
    assert_line(&control, "SIGNAL-OK", "host control as uid 65534");

    let script = "sleep 30 & s=$!; kill -9 -1; wait $s; echo \"SIBLING:$?\"; echo TASK-ALIVE";
    for who in BOTH {
        let ctx = format!("{who:?} inside");
        let o = sh(who, &[], script);
        assert_lines(&o, &["SIBLING:137", "TASK-ALIVE"], &ctx);
        assert_exit(&o, 0, &ctx);
        assert!(
            host.0.try_wait().unwrap().is_none(),
            "{ctx}: the host process of uid 65534 died"
        );
    }
}

/// Lowers the CPU and I/O priority of every process of its own user (setpriority PRIO_USER to
/// nice 19, ioprio_set IOPRIO_WHO_USER to the idle class), naming the user by its uid:
/// `SETPRIORITY:<OK or errno name>`, `IOPRIO:<OK or errno name>`.
const USER_PRIORITY_PROBE: &str = concat!(
    py_attempt!(),
    r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
PRIO_USER, IOPRIO_WHO_USER, IOPRIO_CLASS_IDLE = 2, 3, 3
def checked(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
attempt('SETPRIORITY', lambda: checked(libc.setpriority(PRIO_USER, os.getuid(), 19)))
attempt('IOPRIO', lambda: checked(libc.syscall(251, IOPRIO_WHO_USER, os.getuid(),
                                               IOPRIO_CLASS_IDLE << 13)))
"#
);

/// The nice value of process `pid` (/proc/PID/stat) and its I/O class as `ionice -p` says it.
fn priorities(pid: u32) -> (String, String) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = stat.rsplit_once(')').unwrap().1;
    let nice = after_comm.split_whitespace().nth(16).unwrap().to_string();
    let io = Command::new("ionice")
        .arg("-p")
        .arg(pid.to_string())
        .output()
        .unwrap();
    (nice, stdout(&io).trim().to_string())
}

/// setpriority(PRIO_USER) and ioprio_set(IOPRIO_WHO_USER) act on every process of a uid that
/// their caller may change, across the whole host but for the pid namespace (the kernel skips
/// processes the caller's namespace does not show). A root caller's task of `--host-uid 61234`
/// lowers them for its user, and a host process of that uid keeps nice 0 and no I/O class.
/// Control: the same probe on the host as uid 61234 lowers that process to nice 19 and the
/// idle class. (An unprivileged caller's task is the caller's own uid, which the control as
/// 65534 would share with every `nobody` daemon of the host; the kernel's rule is the same.)
#[test]
fn priority_changes_for_a_whole_user_reach_only_the_sandbox() {
    let uid = "61234";
    let as_uid = [
        "setpriv",
        "--reuid=61234",
        "--regid=61234",
        "--clear-groups",
    ];
    let argv = ["sleep", "59.6173"];
    // Started at nice 0, whatever the test runs at (`nice -n 19 cargo test`).
    let at_nice_0 = "import os, sys; os.setpriority(os.PRIO_PROCESS, 0, 0); \
                     os.execvp(sys.argv[1], sys.argv[1:])";
    let victim = || {
        let running = Running(
            Command::new(PYTHON)
                .args(["-c", at_nice_0])
                .args(as_uid)
                .args(argv)
                .spawn()
                .unwrap(),
        );
        let pid = poll_for(Duration::from_secs(5), || {
            pids_with_argv(&argv).first().copied()
        })
        .expect("the host process of uid 61234 did not start");
        (running, pid)
    };
    let probe = py(USER_PRIORITY_PROBE, &[]);
    let untouched = ("0".to_string(), "none: prio 0".to_string());

    let (first, pid) = victim();
    assert_eq!(priorities(pid), untouched, "before the run");
    let ctx = "root caller, --host-uid 61234, inside";
    let o = run_inside(
        Launcher::Root,
        &["--host-uid", uid, "--host-gid", uid],
        &probe,
    );
    assert_lines(&o, &["SETPRIORITY:OK", "IOPRIO:OK"], ctx);
    assert_exit(&o, 0, ctx);
    assert_eq!(
        priorities(pid),
        untouched,
        "{ctx}: the host process changed"
    );
    drop(first);

    // Control: a fresh process of the same uid, and the probe on the host as that uid.
    let (_second, pid) = victim();
    let mut control = vec![as_uid[1], as_uid[2], as_uid[3]];
    control.extend_from_slice(&probe);
    let o = Command::new(as_uid[0])
        .args(&control)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_lines(
        &o,
        &["SETPRIORITY:OK", "IOPRIO:OK"],
        "host control as uid 61234",
    );
    assert_eq!(
        priorities(pid),
        ("19".to_string(), "idle".to_string()),
        "host control as uid 61234"
    );
}

#[cfg(target_arch = "x86_64")]
/// Prints the core line of /proc/self/limits (`CORE-LIMIT:<soft>:<hard>`), then lowers the
/// limit to 0 as programs do (`SETRLIMIT:...`, read back), then through prlimit64 with a
/// new_limit of {0, 0} at 0x100000000, a pointer a filter testing only its low 32 bits would
/// take for NULL, a read (`PRLIMIT64-HIGH:<answer>:...`), then through a prlimit64 that also
/// asks for the old limit (Python's resource.prlimit: `PRLIMIT-OLD:<old or errno>:...`); with
/// argument `crash`, then dies of SIGSEGV. x86_64's prlimit64 number.
const CORE_PROBE: &str = r#"
import ctypes, os, resource, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
def limit():
    with open('/proc/self/limits') as f:
        w = [l.split() for l in f if l.startswith('Max core file size')][0]
    return '%s:%s' % (w[4], w[5])
print('CORE-LIMIT:' + limit())
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
print('SETRLIMIT:' + limit())
# MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED_NOREPLACE at 4 GiB: struct rlimit {0, 0} there.
at = libc.mmap(ctypes.c_void_p(1 << 32), ctypes.c_size_t(4096), 3, 0x22 | 0x100000, -1,
               ctypes.c_long(0))
assert at == 1 << 32, at
ctypes.memmove(at, bytes(16), 16)
r = libc.syscall(ctypes.c_long(302), ctypes.c_long(0), ctypes.c_long(4), ctypes.c_void_p(at),
                 None)
print('PRLIMIT64-HIGH:%d:%s' % (r, limit()))
try:
    old = resource.prlimit(0, resource.RLIMIT_CORE, (0, 0))
    print('PRLIMIT-OLD:%d:%d:%s' % (old + (limit(),)))
except OSError as e:
    print('PRLIMIT-OLD:errno %d:%s' % (e.errno, limit()))
if sys.argv[1:] == ['crash']:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGSEGV)
"#;

/// A crash inside must reach no core dump helper of the host. The kernel ignores RLIMIT_CORE 0
/// when core_pattern pipes to a helper (systemd-coredump, apport: the default of many
/// distributions), which it starts as root on the host and hands the task's memory, forwarded
/// secrets included; at exactly 1 byte it starts none, and writes no core file either (below
/// one page): fs/coredump.c. So the task's limit is 1, soft and hard, its changes of it (by
/// setrlimit, by prlimit64 through a pointer whose low half is 0) answer 0 and leave it 1, one
/// that also asks for the old limit is refused (EPERM) rather than answered with none,
/// and a Python holding a forwarded secret that then dies of SIGSEGV in scratch is reported
/// (139) and leaves no core. Control: on the host the same probe lowers its limit to 0 both
/// ways, and its limit was not 1 to begin with. A caller whose hard limit is 0
/// (`prlimit --core=0:0`) cannot raise it: its task runs, with 0.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_crash_inside_starts_no_core_dump() {
    let script =
        format!("{PYTHON} -c \"$PROBE\" crash; echo \"CRASH:$?\"; ls -A | sed 's/^/LEFT:/'");
    let probe_env = format!("PROBE={CORE_PROBE}");
    for who in BOTH {
        let host = run_host(who, &py(CORE_PROBE, &[]));
        let got = lines(&host);
        assert!(
            got.len() == 4
                && got[0].starts_with("CORE-LIMIT:")
                && got[0] != "CORE-LIMIT:1:1"
                && got[1].starts_with("SETRLIMIT:0:")
                && got[2] == "PRLIMIT64-HIGH:0:0:0"
                && got[3] == "PRLIMIT-OLD:0:0:0:0",
            "{who:?} host control\n{}",
            show(&host)
        );

        let ctx = format!("{who:?} inside");
        let o = sh(
            who,
            &["--env", &probe_env, "--env", "SECRET=core-4711"],
            &script,
        );
        let want = [
            "CORE-LIMIT:1:1",
            "SETRLIMIT:1:1",
            "PRLIMIT64-HIGH:0:1:1",
            "PRLIMIT-OLD:errno 1:1:1",
            "CRASH:139",
        ];
        assert_eq!(lines(&o), want, "{ctx}\n{}", show(&o));
        assert_exit(&o, 0, &ctx);

        let ctx = format!("{who:?} inside, the caller's hard limit 0");
        let o = Command::new("prlimit")
            .arg("--core=0:0")
            .args(as_user(who))
            .arg(binary())
            .args([
                "run",
                "--",
                "grep",
                "^Max core file size",
                "/proc/self/limits",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let got: Vec<String> = lines(&o)
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(got, ["Max core file size 0 0 bytes"], "{ctx}\n{}", show(&o));
        assert_exit(&o, 0, &ctx);
    }
}

#[cfg(target_arch = "x86_64")]
/// Sets its command name (`comm`, what core_pattern's %e shows) to its argument, lowers its core
/// limit to 0 as programs do, and dies of SIGSEGV.
const CRASH_PROBE: &str = r#"
import ctypes, os, resource, signal, sys
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
os.kill(os.getpid(), signal.SIGSEGV)
"#;

#[cfg(target_arch = "x86_64")]
/// The host's kernel.core_pattern, put back when dropped (an assertion that fails included).
struct CorePattern(String);

#[cfg(target_arch = "x86_64")]
const CORE_PATTERN: &str = "/proc/sys/kernel/core_pattern";

#[cfg(target_arch = "x86_64")]
impl Drop for CorePattern {
    fn drop(&mut self) {
        let _ = std::fs::write(CORE_PATTERN, &self.0);
    }
}

/// The core_pattern pipe helper itself (systemd-coredump, apport) never starts for a crash
/// inside: with the host's core_pattern set, for the length of this test, to a helper that logs
/// the crashed process's name (%e) and reads the dump, a task that lowers its core limit to 0
/// and dies of SIGSEGV is reported (139) and the helper never logs it. Control: the same probe
/// on the host, as the same user, is logged (the kernel ignores a core limit of 0 for a pipe).
/// Processes are told apart by name, so another test's crash on the host cannot pass for one.
/// Root only: the test changes a host-wide sysctl, and puts it back.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_crash_inside_reaches_no_core_pattern_helper() {
    let dir = world_readable_dir("/tmp", "airlock-core-helper-");
    let log = dir.path().join("log");
    let helper = dir.path().join("helper");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\necho \"$1\" >> {}\nexec cat >/dev/null\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _restore = CorePattern(std::fs::read_to_string(CORE_PATTERN).unwrap());
    std::fs::write(CORE_PATTERN, format!("|{} %e", helper.display())).unwrap();
    let logged = |name: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l == name)
    };
    for (i, who) in BOTH.into_iter().enumerate() {
        let inside = format!("alcore-in-{i}");
        let o = run_inside(who, &[], &py(CRASH_PROBE, &[&inside]));
        assert_exit(&o, 128 + libc::SIGSEGV, &format!("{who:?} inside"));

        let host = format!("alcore-host-{i}");
        let o = run_host(who, &py(CRASH_PROBE, &[&host]));
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGSEGV),
            "{who:?} host control\n{}",
            show(&o)
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !logged(&host) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            logged(&host),
            "{who:?} host control: the helper never logged {host}"
        );
        assert!(
            !logged(&inside),
            "{who:?}: the host's core dump helper ran for the crash inside"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Capabilities, no_new_privs, seccomp

const STATUS_FIELDS: [&str; 7] = [
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
];

/// `Field value` for each of STATUS_FIELDS in /proc/self/status as printed by grep.
fn status_values(o: &Output) -> Vec<(String, String)> {
    lines(o)
        .iter()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            STATUS_FIELDS
                .contains(&k)
                .then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

#[test]
fn task_has_no_capabilities_no_new_privs_and_seccomp() {
    let argv = [
        "grep",
        "-E",
        "^(Cap|NoNewPrivs|Seccomp:)",
        "/proc/self/status",
    ];
    for who in BOTH {
        // Control: on the host the bounding set is full and there is no filter.
        let host = status_values(&run_host(who, &argv));
        let get = |v: &[(String, String)], k: &str| {
            v.iter()
                .find(|(n, _)| n == k)
                .map(|(_, x)| x.clone())
                .unwrap_or_default()
        };
        assert_ne!(get(&host, "CapBnd"), "0000000000000000", "{who:?} host");
        assert_eq!(get(&host, "NoNewPrivs"), "0", "{who:?} host");
        assert_eq!(get(&host, "Seccomp"), "0", "{who:?} host");

        let o = run_inside(who, &[], &argv);
        let inside = status_values(&o);
        let mut want: Vec<(String, String)> = STATUS_FIELDS[..5]
            .iter()
            .map(|k| (k.to_string(), "0000000000000000".to_string()))
            .collect();
        want.push(("NoNewPrivs".into(), "1".into()));
        want.push(("Seccomp".into(), "2".into()));
        let mut got = inside.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{who:?} inside\n{}", show(&o));
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Identity

#[test]
fn task_is_uid_1000_inside_and_never_root_on_the_host() {
    for (who, arg) in [
        (Launcher::Root, "17.4201"),
        (Launcher::Unprivileged, "17.4202"),
    ] {
        let ctx = format!("{who:?}");
        let id = run_inside(who, &[], &["id", "-u"]);
        assert_eq!(stdout(&id), "1000\n", "{ctx}\n{}", show(&id));

        let child = airlock_run(who, &[], &["sleep", arg])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut airlock_proc = Running(child);
        let argv = ["sleep", arg];
        let pid = poll_for(Duration::from_secs(10), || {
            pids_with_argv(&argv).first().copied()
        })
        .unwrap_or_else(|| panic!("{ctx}: the task `sleep {arg}` never appeared on the host"));
        // The launcher's pid is a different process: the probe found the task.
        assert_ne!(pid, airlock_proc.0.id(), "{ctx}");
        let uid = status_field(pid, "Uid").unwrap();
        let gid = status_field(pid, "Gid").unwrap();
        assert_eq!(uid, ["65534"; 4], "{ctx}: host uid of the task");
        assert_eq!(gid, ["65534"; 4], "{ctx}: host gid of the task");
        // No supplementary group of the caller (root's group 0 included) follows the task.
        let groups = status_field(pid, "Groups").unwrap();
        assert!(
            groups.is_empty(),
            "{ctx}: host groups of the task: {groups:?}"
        );

        // Killing airlock takes the whole sandbox with it.
        airlock_proc.0.kill().unwrap();
        assert!(
            airlock_proc.wait_for_exit(Duration::from_secs(5)).is_some(),
            "{ctx}: airlock survived SIGKILL"
        );
        let gone = poll_for(Duration::from_secs(5), || {
            pids_with_argv(&argv).is_empty().then_some(())
        });
        assert!(
            gone.is_some(),
            "{ctx}: `sleep {arg}` outlived the killed airlock: {:?}",
            pids_with_argv(&argv)
        );
    }
}

/// The id maps the task sees: uid and gid 1000 mapped to one host id (the caller's, or 65534
/// for a root caller), nothing else mapped; setgroups denied where the caller is unprivileged
/// (the init writes its own maps then) and allowed for a root caller (the launcher writes
/// them). Control: on the host the same files show the full identity map and "allow".
#[test]
fn id_maps_map_only_the_sandbox_user() {
    let argv = [
        "sh",
        "-c",
        "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups",
    ];
    let words = |o: &Output| -> Vec<Vec<String>> {
        stdout(o)
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect()
    };
    for (who, setgroups) in [(Launcher::Root, "allow"), (Launcher::Unprivileged, "deny")] {
        let host = run_host(who, &argv);
        let h = words(&host);
        assert_eq!(
            h[2],
            ["0", "0", "4294967295"],
            "host control\n{}",
            show(&host)
        );
        assert_eq!(h[4], ["allow"], "host control\n{}", show(&host));

        let o = run_inside(who, &[], &argv);
        let one = |id: &str| vec!["1000".to_string(), id.to_string(), "1".to_string()];
        let want: Vec<Vec<String>> = vec![
            vec!["1000".into()],
            vec!["1000".into()],
            one("65534"),
            one("65534"),
            vec![setgroups.into()],
        ];
        assert_eq!(words(&o), want, "{who:?}\n{}", show(&o));
    }
}

/// The sandbox's init is a copy of airlock, and the task may read its /proc/1/cmdline: it
/// shows "airlock-init", nothing of the caller's command line. Control: airlock's own command
/// line, read on the host while the task runs, holds the input's host path and the --env value.
#[test]
fn the_init_s_command_line_shows_nothing_of_the_caller_s() {
    let dir = world_readable_dir("/var/tmp", "airlock-cmdline");
    let input = dir.path().join("host-path-marker.txt");
    write_world_readable(&input, "x");
    let input_arg = format!("in.txt={}", input.display());
    for (i, who) in BOTH.into_iter().enumerate() {
        let sleeper = format!("sleep 9.6{i}");
        let script = format!("tr '\\0' '\\n' < /proc/1/cmdline; {sleeper}");
        let flags = ["--env", "MARK=env-value-4711", "--input", &input_arg];
        let mut child = airlock_run(who, &flags, &["sh", "-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // The task's stdout reaches this pipe through the launcher's own, which it drains as
        // it runs: its first line is read before the launcher is killed, or a loaded host can
        // leave it there with the launcher (seen: nothing read, 2 runs in 15 with two busy
        // loops beside them). Then the rest, to the end.
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut text = String::new();
        std::io::BufRead::read_line(&mut out, &mut text).unwrap();
        wait_for_process(&sleeper, Duration::from_secs(10));
        let host_view = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
        let host_view = String::from_utf8_lossy(&host_view).replace('\0', " ");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        std::io::Read::read_to_string(&mut out, &mut text).unwrap();
        child.wait().unwrap();
        assert!(
            host_view.contains("env-value-4711") && host_view.contains("host-path-marker"),
            "{who:?}: host control: {host_view}"
        );
        let seen: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(seen, ["airlock-init"], "{who:?}");
    }
}

/// A root caller may choose the task's host identity with --host-uid/--host-gid, never 0: the
/// maps then name that id, and the task's processes run as it on the host.
#[test]
fn host_uid_picks_a_root_caller_s_task_identity_and_refuses_0() {
    let script = "cat /proc/self/uid_map /proc/self/gid_map; sleep 9.77";
    let mut child = airlock_run(
        Launcher::Root,
        &["--host-uid", "4321", "--host-gid", "4322"],
        &["sh", "-c", script],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    // The two map lines are read before the launcher is killed: they reach this pipe through
    // the launcher's own, which a launcher a loaded host has not scheduled yet still holds.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    for _ in 0..2 {
        std::io::BufRead::read_line(&mut out, &mut text).unwrap();
    }
    let p = wait_for_process("sleep 9.77", Duration::from_secs(10));
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid)).unwrap();
    let _ = child.kill();
    std::io::Read::read_to_string(&mut out, &mut text).unwrap();
    child.wait().unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
    };
    assert_eq!(
        field("Uid:").as_deref(),
        Some("4321 4321 4321 4321"),
        "{status}"
    );
    assert_eq!(
        field("Gid:").as_deref(),
        Some("4322 4322 4322 4322"),
        "{status}"
    );
    let maps: Vec<String> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(maps, ["1000 4321 1", "1000 4322 1"]);
    for flag in ["--host-uid", "--host-gid"] {
        let o = run_inside(Launcher::Root, &[flag, "0"], &["true"]);
        assert_exit(&o, 2, flag);
        assert!(
            stderr(&o).contains("0 would run the task ") && stderr(&o).contains(" on the host"),
            "{flag}\n{}",
            show(&o)
        );
    }
}

/// An unprivileged caller's task is the caller on the host: --host-uid/--host-gid naming
/// another id are refused (exit 2, saying why), not ignored (the run went on as 65534, exit
/// 0). Its own id is accepted; control: a root caller's --host-uid 4321 runs.
#[test]
fn host_uid_of_an_unprivileged_caller_is_refused_not_ignored() {
    for flag in ["--host-uid", "--host-gid"] {
        let o = run_inside(Launcher::Unprivileged, &[flag, "4321"], &["true"]);
        assert_exit(&o, 2, flag);
        assert!(
            stderr(&o).contains(&format!(
                "{flag} 4321: only a root caller chooses the task's host identity; this \
                 caller's task runs as its own (65534)"
            )),
            "{flag}\n{}",
            show(&o)
        );
        let o = run_inside(Launcher::Unprivileged, &["--json", flag, "4321"], &["true"]);
        assert_exit(&o, 2, flag);
        assert_eq!(report(&o)["error_kind"], "usage", "{flag}\n{}", show(&o));
        let o = run_inside(Launcher::Unprivileged, &[flag, "65534"], &["true"]);
        assert_exit(&o, 0, &format!("{flag} 65534, the caller's own"));
        let o = run_inside(Launcher::Root, &[flag, "4321"], &["true"]);
        assert_exit(&o, 0, &format!("{flag} 4321 as root"));
    }
}

// ---------------------------------------------------------------------------------------------
// 8. setuid binaries

/// A setuid-root program of the host.
fn setuid_root_binary() -> &'static str {
    [
        "/usr/bin/su",
        "/usr/bin/passwd",
        "/usr/bin/mount",
        "/usr/bin/newgrp",
        "/usr/bin/chsh",
    ]
    .into_iter()
    .find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o4000 != 0 && m.is_file())
    })
    .expect("no setuid-root binary in /usr/bin to test with")
}

/// The loader's auxv lines that say who a program runs as (LD_SHOW_AUXV=1; the loader ignores
/// that variable in secure mode, i.e. when exec raised privileges).
fn auxv_identity(o: &Output) -> Vec<String> {
    lines(o)
        .iter()
        .filter(|l| l.starts_with("AT_EUID:") || l.starts_with("AT_SECURE:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn setuid_root_binary_does_not_elevate() {
    let bin = setuid_root_binary();
    // Only the last exec sees LD_SHOW_AUXV (setpriv itself must not print its own auxv).
    let show_auxv = |who: Launcher, prog: &str| {
        run_host(
            who,
            &["sh", "-c", "LD_SHOW_AUXV=1 exec \"$0\" --help", prog],
        )
    };
    // Control on the host, as uid 65534: the probe reports an ordinary program's identity, and
    // the setuid binary runs in secure mode (raised privileges), so the loader stays silent.
    let plain = show_auxv(Launcher::Unprivileged, "/usr/bin/id");
    assert_eq!(
        auxv_identity(&plain),
        ["AT_EUID: 65534", "AT_SECURE: 0"],
        "host control\n{}",
        show(&plain)
    );
    let elevated = show_auxv(Launcher::Unprivileged, bin);
    assert_eq!(
        auxv_identity(&elevated),
        Vec::<String>::new(),
        "host control: {bin} did not raise privileges on the host\n{}",
        show(&elevated)
    );

    for who in BOTH {
        let ctx = format!("{who:?} inside");
        let script = "grep '^NoNewPrivs:' /proc/self/status; \
                      LD_SHOW_AUXV=1 \"$0\" --help; \
                      grep -E '^[^ ]+ [^ ]+ [^ ]+ [^ ]+ /usr [^ ]*nosuid' /proc/self/mountinfo \
                      && echo USR-NOSUID";
        let o = run_inside(who, &[], &["sh", "-c", script, bin]);
        assert_eq!(
            auxv_identity(&o),
            ["AT_EUID: 1000", "AT_SECURE: 0"],
            "{ctx}: {bin} must run as the sandbox user, not in secure mode\n{}",
            show(&o)
        );
        assert_line(&o, "NoNewPrivs:\t1", &ctx);
        assert_line(&o, "USR-NOSUID", &ctx);
        assert!(!stdout(&o).contains("uid=0"), "{ctx}\n{}", show(&o));
    }
}

// ---------------------------------------------------------------------------------------------
// 9. seccomp

#[test]
fn denied_syscalls_get_eperm_while_allowed_ones_work() {
    // Control on the host, as uid 65534: unprivileged user namespaces, netlink and ptrace
    // all work there (mount is refused on the host too, without privilege, so it has none).
    let host = run_host(
        Launcher::Unprivileged,
        &py(
            SYSCALL_PROBE,
            &[
                "unshare-newuser",
                "socket-netlink-route",
                "socket-netlink-diag",
                "socket-netlink-uevent",
                "ptrace-traceme",
                "getpid",
                "socket-inet",
            ],
        ),
    );
    assert_lines(
        &host,
        &[
            "unshare-newuser:OK",
            "socket-netlink-route:OK",
            "socket-netlink-diag:OK",
            "socket-netlink-uevent:OK",
            "ptrace-traceme:OK",
            "getpid:OK",
            "socket-inet:OK",
        ],
        "host control as uid 65534",
    );

    let probe = py(
        SYSCALL_PROBE,
        &[
            "unshare-newuser",
            "mount-tmpfs",
            "socket-netlink-route",
            "socket-netlink-diag",
            "socket-netlink-uevent",
            "ptrace-traceme",
            "getpid",
            "socket-inet",
        ],
    );
    for who in BOTH {
        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &probe);
        assert_lines(
            &o,
            &[
                "unshare-newuser:ERR:EPERM",
                "mount-tmpfs:ERR:EPERM",
                "socket-netlink-route:OK",
                "socket-netlink-diag:ERR:EPERM",
                "socket-netlink-uevent:ERR:EPERM",
                "ptrace-traceme:ERR:EPERM",
                "getpid:OK",
                "socket-inet:OK",
            ],
            &ctx,
        );
        assert_exit(&o, 0, &ctx);
    }
}

/// The root starts with nothing: its entries are exactly the boundary's own (dev, etc, proc,
/// tmp, usr, var, work) and the usr-merge links the host has; /var holds only the link tmp.
/// Control: the host's root holds /home, /root and /run, and its /var more than tmp, which
/// the task must not see.
#[test]
fn the_root_holds_only_what_the_boundary_puts_there() {
    let host: BTreeSet<String> = std::fs::read_dir("/")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for d in ["home", "root", "run", "var"] {
        assert!(host.contains(d), "host control: /{d} missing on the host");
    }
    for d in ["lib", "cache"] {
        assert!(
            Path::new("/var").join(d).is_dir(),
            "host control: /var/{d} missing on the host"
        );
    }
    let mut want: BTreeSet<String> = ["dev", "etc", "proc", "tmp", "usr", "var", "work"]
        .map(String::from)
        .into();
    want.insert("var: tmp".into());
    for link in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let p = Path::new("/").join(link);
        if p.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            want.insert(link.to_string());
        }
    }
    let script = "ls -A /; ls -A /var | sed 's/^/var: /'; \
                  for d in /home /root /run; do [ -e $d ] && echo \"present $d\"; done; true";
    for who in BOTH {
        let o = run_inside(who, &[], &["sh", "-c", script]);
        assert_exit(&o, 0, &format!("{who:?}"));
        let got: BTreeSet<String> = lines(&o).into_iter().collect();
        assert_eq!(got, want, "{who:?}\n{}", show(&o));
    }
}

/// The kernel interfaces the policy denies as attack surface (io_uring, bpf, file handles,
/// perf events, keyrings), each called with arguments the kernel refuses on its own, the
/// host filesystem's extent map (FS_IOC_GETFSMAP on a file of /usr, which ext4 answers
/// anyone) and its UUID, sysfs path and label (which name the host's disk: stop 47's red
/// team), NUMA page placement of the task's own pages (move_pages, migrate_pages, mbind)
/// and fanotify (which stop 47's mutation testing could allow unnoticed): on the host, as
/// root and as uid 65534, no answer is EPERM (here: an io_uring descriptor, EINVAL, EFAULT,
/// EFAULT, EINVAL, the map, OK for the rest); inside, every one is EPERM, which only the
/// filter gives. (The syscall numbers are x86_64's.)
#[cfg(target_arch = "x86_64")]
#[test]
fn kernel_attack_surface_calls_are_denied_by_the_filter() {
    let calls = [
        "io_uring-setup",
        "bpf-bad-cmd",
        "open-by-handle-at",
        "perf-event-open",
        "keyctl-bad-cmd",
        "getfsmap-usr",
        "fs-uuid-usr",
        "fs-sysfs-path-usr",
        "fs-label-usr",
        "move_pages-self",
        "migrate_pages-self",
        "mbind-default",
        "fanotify-fid",
    ];
    let probe = py(SYSCALL_PROBE, &calls);
    for who in BOTH {
        // Control: the host's kernel answers each without EPERM (else nothing can be shown).
        let host = run_host(who, &probe);
        let answers = lines(&host);
        assert_eq!(
            answers.len(),
            calls.len(),
            "host control as {who:?}\n{}",
            show(&host)
        );
        for a in &answers {
            assert!(!a.ends_with(":EPERM"), "host control as {who:?}: {a}");
        }
        let o = run_inside(who, &[], &probe);
        for call in calls {
            assert_line(&o, &format!("{call}:ERR:EPERM"), &format!("{who:?} inside"));
        }
        assert_exit(&o, 0, &format!("{who:?} inside"));
    }
}

/// The break-outs a root of the sandbox's own user namespace could make, tried by the task:
/// a new user namespace by the raw clone call (not unshare), joining a namespace, the new mount
/// API end to end (a tmpfs over the working directory), clearing the read-only flag of the
/// root mount, chroot, pivot_root, umount2, fspick, a raw socket, AF_INET's SOCK_PACKET
/// (refused by the filter too since a review: the kernel makes it a packet socket, logging a
/// line on the host before its capability check), socket families the filter
/// does not name (packet, XDP, vsock, AF_ALG: protocol code, and a module the kernel loads on
/// demand where it has none); and the introspection and kernel-surface calls (userfaultfd,
/// keyrings, kcmp, file handles, process_vm_readv and pidfd_getfd on itself, personality
/// without ASLR or with READ_IMPLIES_EXEC). Control: the same probe on the host as root of a
/// user, mount and network namespace of its own (`unshare -Urmn`), where each works or gets
/// the kernel's own answer to its arguments (EBADF, EFAULT, EINVAL; a family this kernel lacks:
/// EAFNOSUPPORT, never EPERM). Inside, every one is EPERM; for those the probe marks (*) no
/// privilege is needed at all, so only the filter gives that answer (the others are also
/// refused for want of capabilities). The control's mounts die with its mount namespace: none
/// shows on the host.
#[cfg(target_arch = "x86_64")]
#[test]
fn namespace_mount_and_introspection_break_outs_are_refused() {
    let answers = [
        ("clone-newuser", "OK"),
        ("clone-newuser-newns", "OK"),
        ("setns-bad-fd", "ERR:EBADF"),
        ("open_tree-plain", "OK"),
        ("tmpfs-on-cwd", "OK"),
        ("mount_setattr-root-rw", "OK"),
        ("chroot-cwd", "OK"),
        ("userfaultfd-user-mode", "OK"),
        ("add_key-null", "ERR:EFAULT"),
        ("request_key-null", "ERR:EFAULT"),
        ("kcmp-bad-type", "ERR:EINVAL"),
        ("name_to_handle_at-null", "ERR:EFAULT"),
        ("process_vm_readv-self", "OK"),
        ("pidfd_getfd-self", "OK"),
        ("personality-no-aslr", "OK"),
        ("socket-raw-icmp", "OK"),
        ("socket-inet-packet", "OK"),
        ("pivot_root-cwd", "ERR:EINVAL"),
        ("umount2-cwd", "OK"),
        ("fspick-root", "ERR:EINVAL"),
        ("personality-read-implies-exec", "OK"),
    ];
    // Answered by the control as its kernel has them: OK, or EAFNOSUPPORT where not built.
    let families = ["socket-packet", "socket-xdp", "socket-vsock", "socket-alg"];
    let calls: Vec<&str> = answers.iter().map(|(c, _)| *c).chain(families).collect();
    let probe = py(SYSCALL_PROBE, &calls);
    let mut in_own_namespaces = vec!["unshare", "-Urmn"];
    in_own_namespaces.extend_from_slice(&probe);
    for who in BOTH {
        let cwd = world_readable_dir("/var/tmp", "airlock-breakouts");
        let host = host_cmd(who, &in_own_namespaces)
            .current_dir(cwd.path())
            .output()
            .unwrap();
        let ctx = format!("host control as {who:?} in its own namespaces");
        let want: Vec<String> = answers.iter().map(|(c, a)| format!("{c}:{a}")).collect();
        let got = lines(&host);
        assert_eq!(got[..want.len()], want, "{ctx}\n{}", show(&host));
        let family_answers = &got[want.len()..];
        assert_eq!(
            family_answers.len(),
            families.len(),
            "{ctx}\n{}",
            show(&host)
        );
        for (family, answer) in families.iter().zip(family_answers) {
            assert!(
                [format!("{family}:OK"), format!("{family}:ERR:EAFNOSUPPORT")].contains(answer),
                "{ctx}: {answer}\n{}",
                show(&host)
            );
        }
        assert_line(&host, "socket-packet:OK", &ctx);
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let dir = cwd.path().to_str().unwrap();
        assert!(
            !mountinfo.contains(dir),
            "{ctx}: a mount reached the host\n{mountinfo}"
        );

        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &probe);
        let want: Vec<String> = calls.iter().map(|c| format!("{c}:ERR:EPERM")).collect();
        assert_eq!(lines(&o), want, "{ctx}\n{}", show(&o));
        assert_exit(&o, 0, &ctx);
    }
}

/// The compiled policy's answers that are not EPERM, seen by a real task: clone3 is ENOSYS
/// (so libcs fall back to clone, whose flags the filter can read), so is every call newer
/// than the policy (here open_tree_attr and file_setattr, 467 and 469), and a syscall made
/// through the i386 entry (another audit arch) kills the process. Control on the host: clone3
/// with a null argument is EINVAL, the two newer calls exist (EFAULT, EINVAL), and int 0x80
/// getpid answers. (x32 numbers cannot be shown here: this kernel has no x32 ABI and answers
/// ENOSYS to them outside the sandbox too; the unit tests in src/seccomp.rs cover them.)
#[cfg(target_arch = "x86_64")]
#[test]
fn clone3_and_newer_calls_are_enosys_and_another_abi_is_killed() {
    let calls = [
        "clone3-null",
        "open_tree_attr-null",
        "file_setattr-size0",
        "int80-getpid",
        "getpid",
    ];
    let probe = py(SYSCALL_PROBE, &calls);
    for who in BOTH {
        let host = run_host(who, &probe);
        assert_lines(
            &host,
            &[
                "clone3-null:ERR:EINVAL",
                "open_tree_attr-null:ERR:EFAULT",
                "file_setattr-size0:ERR:EINVAL",
                "int80-getpid:OK",
                "getpid:OK",
            ],
            &format!("host control as {who:?}"),
        );
        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &probe);
        assert_lines(
            &o,
            &[
                "clone3-null:ERR:ENOSYS",
                "open_tree_attr-null:ERR:ENOSYS",
                "file_setattr-size0:ERR:ENOSYS",
                "int80-getpid:KILLED:SIGSYS",
                "getpid:OK",
            ],
            &ctx,
        );
        assert_exit(&o, 0, &ctx);
    }
}

// ---------------------------------------------------------------------------------------------
// 10. Abstract unix sockets

#[test]
fn host_abstract_unix_socket_is_unreachable() {
    let name = format!("airlock-isolation-test-{}", std::process::id());
    let addr = UnixAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    let probe = py(ABSTRACT_PROBE, &[&name]);
    for who in BOTH {
        let host = run_host(who, &probe);
        assert_line(&host, "UNIX-CONNECT-OK", &format!("{who:?} host control"));

        let inside = run_inside(who, &[], &probe);
        assert_line(
            &inside,
            "UNIX-CONNECT-FAILED:ECONNREFUSED",
            &format!("{who:?} inside"),
        );

        assert_line(&inside, "OWN-UNIX-CONNECT-OK", &format!("{who:?} inside"));

        // The abstract namespace belongs to the network namespace, so --share-net would hand
        // the host's over (an X server's, a container shim's): a Landlock scope keeps them out
        // where the kernel has one (ABI 6), and the launcher's warning says which applied. The
        // task's own abstract sockets still work.
        let ctx = format!("{who:?} --share-net");
        let shared = run_inside(who, &["--share-net"], &probe);
        let (want, warning) = match landlock_abi() >= 6 {
            true => (
                "UNIX-CONNECT-FAILED:EPERM",
                "shares the host's network; Landlock keeps the host's abstract unix sockets out of \
                 its reach",
            ),
            false => (
                "UNIX-CONNECT-OK",
                ", the host's abstract unix sockets included",
            ),
        };
        assert_line(&shared, want, &ctx);
        assert_line(&shared, "OWN-UNIX-CONNECT-OK", &ctx);
        assert!(
            stderr(&shared).contains(warning),
            "{ctx}\n{}",
            show(&shared)
        );

        // Control with the scope off: bwrap mode shares the network as bubblewrap does, whole.
        let mut bwrap = vec![
            "bwrap",
            "--unshare-user",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
        ];
        bwrap.extend(py(ABSTRACT_PROBE, &[&name]));
        let whole = airlock(who, &bwrap).stdin(Stdio::null()).output().unwrap();
        assert_line(&whole, "UNIX-CONNECT-OK", &format!("{who:?} bwrap mode"));
    }
}

/// The direction Landlock does not scope (the --share-net warning and the README's known limits
/// say so): with --share-net an abstract name the task binds is in the host's namespace, and a
/// host program's connect reaches the task. Control: in the default sandbox the same name is
/// bound in the task's own network namespace, and the host's connect is refused.
#[test]
fn a_name_the_task_binds_is_the_hosts_only_with_share_net() {
    let name = format!("airlock-bound-by-task-{}", std::process::id());
    let script = format!(
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0{name}')\n\
         s.listen(1)\nprint('listening', flush=True)\nsys.stdin.read()\n"
    );
    let addr = UnixAddr::from_abstract_name(name.as_bytes()).unwrap();
    for who in BOTH {
        for shared in [true, false] {
            let mut args = vec!["run", "--timeout", "30s"];
            if shared {
                args.push("--share-net");
            }
            args.extend(["--", PYTHON, "-c", &script]);
            let (running, first) = start_and_read_line(who, &args);
            let ctx = format!("{who:?} share-net {shared}");
            assert_eq!(first, "listening\n", "{ctx}");
            let connected = UnixStream::connect_addr(&addr);
            drop(running);
            match shared {
                true => assert!(connected.is_ok(), "{ctx}: {connected:?}"),
                false => assert_eq!(
                    connected.map_err(|e| e.raw_os_error()).err(),
                    Some(Some(libc::ECONNREFUSED)),
                    "{ctx}"
                ),
            }
        }
    }
}

/// What else --share-net shows of the host (README's known limits): the task's /proc/net is
/// its network namespace's, so with --share-net it lists the host's sockets, as sock_diag
/// (refused by the filter) would: a unix socket a host program bound, by its path, and a TCP
/// listener on the host's loopback, by its port. Control: in the default sandbox neither is
/// listed, while the same read lists the task's own.
#[test]
fn proc_net_lists_the_hosts_sockets_only_with_share_net() {
    // Under /var/tmp, not /tmp: removed at drop, a failed assertion's unwinding included.
    let dir = tmpdir_in(Path::new("/var/tmp"));
    let path = dir.path().join("host.sock").display().to_string();
    let unix = UnixListener::bind(&path).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = format!(":{:04X} ", tcp.local_addr().unwrap().port());
    let script = "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n\
                  print('own-port :%04X ' % s.getsockname()[1])\n\
                  print(open('/proc/net/unix').read()); print(open('/proc/net/tcp').read())\n";
    for who in BOTH {
        for shared in [true, false] {
            let flags: &[&str] = if shared { &["--share-net"] } else { &[] };
            let o = run_inside(who, flags, &py(script, &[]));
            let ctx = format!("{who:?} share-net {shared}");
            assert_exit(&o, 0, &ctx);
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            let own = out.lines().next().unwrap_or("").strip_prefix("own-port ");
            let own = own.unwrap_or_else(|| panic!("{ctx}: {out}"));
            assert!(
                out[out.find('\n').unwrap()..].contains(own),
                "{ctx}: own listener: {out}"
            );
            assert_eq!(
                out.contains(&path),
                shared,
                "{ctx}: host unix socket: {out}"
            );
            assert_eq!(out.contains(&port), shared, "{ctx}: host port{port}: {out}");
        }
    }
    drop((unix, tcp));
}

/// Landlock's scope covers every way a unix socket reaches an abstract name, not only the
/// stream connect above: a SOCK_SEQPACKET connect, a datagram by sendto, by sendmsg and by
/// connect, and a connect from a process the task starts. None of the datagrams arrives.
#[test]
fn host_abstract_unix_socket_is_unreachable_every_way_with_share_net() {
    if landlock_abi() < 6 {
        eprintln!("skipped: no Landlock ABI 6 here, --share-net hands the abstract names over");
        return;
    }
    use nix::sys::socket::{self as ns, AddressFamily, Backlog, SockFlag, SockType};
    let name = format!("airlock-isolation-ways-{}", std::process::id());
    let abstract_name = |suffix: &str| format!("{name}-{suffix}").into_bytes();
    let _stream =
        UnixListener::bind_addr(&UnixAddr::from_abstract_name(abstract_name("stream")).unwrap())
            .unwrap();
    let seqpacket = ns::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    ns::bind(
        std::os::fd::AsRawFd::as_raw_fd(&seqpacket),
        &ns::UnixAddr::new_abstract(&abstract_name("seqpacket")).unwrap(),
    )
    .unwrap();
    ns::listen(&seqpacket, Backlog::new(8).unwrap()).unwrap();
    let dgram =
        UnixDatagram::bind_addr(&UnixAddr::from_abstract_name(abstract_name("dgram")).unwrap())
            .unwrap();
    dgram.set_nonblocking(true).unwrap();
    let drain = || std::iter::from_fn(|| dgram.recv(&mut [0; 64]).ok()).count();
    let ways = [
        "STREAM",
        "SEQPACKET",
        "DGRAM-SENDTO",
        "DGRAM-SENDMSG",
        "DGRAM-CONNECT",
        "CHILD-STREAM",
    ];
    let probe = py(ABSTRACT_WAYS_PROBE, &[&name]);
    for who in BOTH {
        let ctx = format!("{who:?} host control");
        let host = run_host(who, &probe);
        for way in ways {
            assert_line(&host, &format!("{way}:OK"), &ctx);
        }
        assert_eq!(drain(), 3, "{ctx}: the three datagrams arrive");

        let ctx = format!("{who:?} --share-net");
        let shared = run_inside(who, &["--share-net"], &probe);
        for way in &ways[..5] {
            assert_line(&shared, &format!("{way}:EPERM"), &ctx);
        }
        assert_line(
            &shared,
            "CHILD-STREAM:PermissionError: [Errno 1] Operation not permitted",
            &ctx,
        );
        assert_eq!(drain(), 0, "{ctx}: no datagram arrives\n{}", show(&shared));
    }
}

/// `SECCOMP_WRAP NR ERRNO PROGRAM ARGS...`: execs PROGRAM under a seccomp filter of the caller's
/// that answers syscall NR with ERRNO (as a container runtime's policy or an older kernel would)
/// and allows every other call.
const SECCOMP_WRAP: &str = r#"
import ctypes, os, struct, sys
nr, err = int(sys.argv[1]), int(sys.argv[2])
f = lambda c, t, e, k: struct.pack('=HBBI', c, t, e, k)
prog = f(0x20, 0, 0, 0) + f(0x15, 0, 1, nr) + f(0x06, 0, 0, 0x50000 | err) + f(0x06, 0, 0, 0x7fff0000)
buf = ctypes.create_string_buffer(prog, len(prog))
class Fprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]
fp = Fprog(len(prog) // 8, ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(fp), 0, 0) == 0, os.strerror(ctypes.get_errno())
os.execv(sys.argv[3], sys.argv[3:])
"#;

/// `airlock run` under SECCOMP_WRAP, whose filter answers syscall `nr` with `errno`: the
/// argument vector up to `run`, for the flags and command to follow.
fn run_refusing<'a>(nr: &'a str, errno: &'a str) -> Vec<&'a str> {
    let bin = binary().to_str().unwrap();
    vec![PYTHON, "-c", SECCOMP_WRAP, nr, errno, bin, "run"]
}

/// --share-net's Landlock scope, both of its other outcomes, on a kernel that has it: where the
/// launcher's ABI query fails (landlock_create_ruleset answers ENOSYS) the run goes on with the
/// host's abstract sockets in reach and the warning says so; where the init's
/// landlock_restrict_self fails (EPERM), the run stops at step 12 with exit 125, naming the
/// call, and the task never starts. Control: the same wrapper refusing a call nobody makes
/// leaves the scope on.
#[test]
fn share_net_without_landlock_warns_and_a_scope_that_fails_stops_the_run() {
    if landlock_abi() < 6 {
        eprintln!("skipped: no Landlock ABI 6 here");
        return;
    }
    const CREATE_RULESET: &str = "444";
    const RESTRICT_SELF: &str = "446";
    let name = format!("airlock-isolation-nolandlock-{}", std::process::id());
    let addr = UnixAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    for who in BOTH {
        let wrapped = |nr: &str, errno: &str| {
            let mut argv = run_refusing(nr, errno);
            argv.extend(["--share-net", "--"]);
            argv.extend(py(ABSTRACT_PROBE, &[&name]));
            host_cmd(who, &argv).stdin(Stdio::null()).output().unwrap()
        };
        let ctx = format!("{who:?} control (nothing refused)");
        let control = wrapped("9999", "1");
        assert_exit(&control, 0, &ctx);
        assert_line(&control, "UNIX-CONNECT-FAILED:EPERM", &ctx);

        let ctx = format!("{who:?} landlock_create_ruleset ENOSYS");
        let absent = wrapped(CREATE_RULESET, "38");
        assert_exit(&absent, 0, &ctx);
        assert_line(&absent, "UNIX-CONNECT-OK", &ctx);
        assert!(
            stderr(&absent).contains(
                "shares the host's network, the host's abstract unix sockets included (no \
                 Landlock ABI 6 here to scope them"
            ),
            "{ctx}\n{}",
            show(&absent)
        );

        // The JSON report's warnings say so too: its readers may never see stderr.
        let json = host_cmd(who, &run_refusing(CREATE_RULESET, "38"))
            .args(["--json", "--share-net", "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_exit(&json, 0, &ctx);
        let rep: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let said = rep["warnings"].as_array().unwrap().iter().any(|w| {
            w.as_str()
                .unwrap()
                .contains("the host's abstract unix sockets included (no Landlock ABI 6")
        });
        assert!(said, "{ctx}: {rep}");

        let ctx = format!("{who:?} landlock_restrict_self EPERM");
        let failed = wrapped(RESTRICT_SELF, "1");
        assert_stopped(
            &failed,
            "step 12 scope abstract unix sockets: landlock_restrict_self(<ruleset>, 0): EPERM",
            "UNIX-CONNECT",
            &ctx,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 11. Processes left behind

#[test]
fn background_child_does_not_survive_airlock() {
    // Control: the host-side search finds a process with a given argv.
    let control_argv = ["sleep", "9.8763"];
    let control = Running(
        Command::new(control_argv[0])
            .arg(control_argv[1])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert_eq!(
        poll_for(Duration::from_secs(5), || pids_with_argv(&control_argv)
            .first()
            .copied()),
        Some(control.0.id()),
        "host control"
    );
    drop(control);

    for (who, arg) in [
        (Launcher::Root, "9.8765"),
        (Launcher::Unprivileged, "9.8766"),
    ] {
        let ctx = format!("{who:?}");
        let argv = ["sleep", arg];
        // The task leaves a background sleep (with its own stdio, so it cannot hold airlock's
        // pipes open) and exits once the test closes its stdin.
        let script =
            format!("sleep {arg} </dev/null >/dev/null 2>&1 & echo started; read _ || true");
        let (mut running, first) = start_and_read_line(who, &["run", "--", "sh", "-c", &script]);
        assert_eq!(first, "started\n", "{ctx}");
        // Positive control: while the sandbox lives, the sleep is visible on the host.
        assert!(
            poll_for(Duration::from_secs(5), || pids_with_argv(&argv)
                .first()
                .copied())
            .is_some(),
            "{ctx}: the background `sleep {arg}` never appeared on the host"
        );

        drop(running.0.stdin.take());
        let status = running.wait_for_exit(Duration::from_secs(10));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{ctx}: airlock did not exit 0 within 10 s: {status:?}"
        );
        let gone = poll_for(Duration::from_secs(2), || {
            pids_with_argv(&argv).is_empty().then_some(())
        });
        assert!(
            gone.is_some(),
            "{ctx}: `sleep {arg}` survived airlock's exit: {:?}",
            pids_with_argv(&argv)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 12. Hostname and interfaces

fn interfaces(net_dev: &str) -> Vec<String> {
    net_dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_string()))
        .collect()
}

#[test]
fn hostname_is_airlock_and_only_loopback_exists() {
    let script = "echo \"HOSTNAME:$(cat /proc/sys/kernel/hostname)\"; \
                  echo \"UNAME:$(uname -n)\"; cat /proc/net/dev";
    for who in BOTH {
        // Control: the host has its own name and more interfaces than lo.
        let host = host_sh(who, script);
        assert!(
            !lines(&host).contains(&"HOSTNAME:airlock".to_string())
                && lines(&host).iter().any(|l| l.starts_with("HOSTNAME:")),
            "{who:?} host control\n{}",
            show(&host)
        );
        let host_ifaces = interfaces(&stdout(&host));
        assert!(
            host_ifaces.len() > 1 && host_ifaces.contains(&"lo".to_string()),
            "{who:?} host control: {host_ifaces:?}"
        );

        let ctx = format!("{who:?} inside");
        let o = sh(who, &[], script);
        assert_line(&o, "HOSTNAME:airlock", &ctx);
        assert_line(&o, "UNAME:airlock", &ctx);
        assert_eq!(interfaces(&stdout(&o)), ["lo"], "{ctx}\n{}", show(&o));

        // Control with the feature off: --share-net shows the host's interfaces.
        let shared = sh(who, &["--share-net"], script);
        assert_eq!(
            interfaces(&stdout(&shared)),
            host_ifaces,
            "{who:?} --share-net\n{}",
            show(&shared)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 13. Exit codes

#[test]
fn exit_codes_follow_the_task_and_name_airlock_failures() {
    for who in BOTH {
        let ctx = format!("{who:?}");
        assert_exit(&run_inside(who, &[], &["true"]), 0, &ctx);
        assert_exit(&sh(who, &[], "exit 3"), 3, &ctx);
        assert_exit(&sh(who, &[], "kill -9 $$"), 137, &ctx);

        let o = run_inside(who, &[], &["airlock-no-such-cmd"]);
        assert_exit(&o, 127, &ctx);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{ctx}: {err:?}");
        assert!(
            err.contains("airlock-no-such-cmd") && err.contains("command not found"),
            "{ctx}: {err:?}"
        );

        // /etc/hostname exists inside and is not executable.
        let present = sh(
            who,
            &[],
            "test -f /etc/hostname && ! test -x /etc/hostname && echo PRESENT-NOT-EXECUTABLE",
        );
        assert_line(&present, "PRESENT-NOT-EXECUTABLE", &ctx);
        let o = run_inside(who, &[], &["/etc/hostname"]);
        assert_exit(&o, 126, &ctx);
        assert!(stderr(&o).contains("/etc/hostname"), "{ctx}\n{}", show(&o));

        let o = airlock(who, &["run", "--airlock-no-such-flag", "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_exit(&o, 2, &ctx);
    }
    // Control: the shell really dies of SIGKILL outside, which 137 encodes.
    let host = host_sh(Launcher::Root, "kill -9 $$");
    assert_eq!(host.status.signal(), Some(9));
}

// ---------------------------------------------------------------------------------------------
// 14. Environment

fn env_set(o: &Output) -> BTreeSet<String> {
    lines(o).into_iter().collect()
}

#[test]
fn environment_is_exactly_the_fixed_set() {
    const CALLER_VAR: &str = "AIRLOCK_TEST_CALLER_VAR";
    let fixed: BTreeSet<String> = SANDBOX_ENV.iter().map(|s| s.to_string()).collect();
    for who in BOTH {
        let ctx = format!("{who:?}");
        // Control: the caller's environment holds more than the fixed set.
        let host = host_cmd(who, &["env"])
            .env(CALLER_VAR, "x")
            .output()
            .unwrap();
        assert!(
            lines(&host).contains(&format!("{CALLER_VAR}=x")) && env_set(&host) != fixed,
            "{ctx} host control\n{}",
            show(&host)
        );

        let o = airlock_run(who, &[], &["env"])
            .env(CALLER_VAR, "x")
            .output()
            .unwrap();
        assert_eq!(env_set(&o), fixed, "{ctx}: env\n{}", show(&o));

        let o = airlock_run(who, &[], &["sh", "-c", "env"])
            .env(CALLER_VAR, "x")
            .output()
            .unwrap();
        let mut with_pwd = fixed.clone();
        with_pwd.insert("PWD=/work".into());
        assert_eq!(env_set(&o), with_pwd, "{ctx}: sh -c env\n{}", show(&o));

        let o = run_inside(who, &["--env", "AIRLOCK_SET=hello world"], &["env"]);
        let mut with_set = fixed.clone();
        with_set.insert("AIRLOCK_SET=hello world".into());
        assert_eq!(
            env_set(&o),
            with_set,
            "{ctx}: --env NAME=VALUE\n{}",
            show(&o)
        );
    }
}

/// The task can reopen its standard streams (/dev/stdin, /dev/stdout, /dev/stderr, as `tee
/// /dev/stderr` and `echo msg > /dev/stderr` do) when they are pipes or a fresh file of the
/// test's own, root's: pipes of mode 0600 (as Python's `capture_output` makes them) and a new
/// 0644 file, which the task's host uid (65534 for a root caller, and for the unprivileged
/// one) may not open. Control: the same script on the host as uid 65534 is refused on every
/// one. Before, a root caller's streams went through as they were and the task got
/// "Permission denied".
#[test]
fn the_task_can_reopen_a_root_callers_pipes_and_fresh_file() {
    let d = world_readable_dir("/tmp", "airlock-reopen-");
    let script = "cat /dev/stdin; echo out > /dev/stdout; echo err > /dev/stderr; \
                  echo tee | tee /dev/stderr";
    let feed = |mut c: Command| {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"in\n").unwrap();
        child.wait_with_output().unwrap()
    };
    let host = feed(host_cmd(Launcher::Unprivileged, &["sh", "-c", script]));
    assert!(
        stderr(&host).matches("Permission denied").count() >= 3,
        "host control\n{}",
        show(&host)
    );
    for who in BOTH {
        let ctx = format!("{who:?}");
        let o = feed(airlock_run(who, &[], &["sh", "-c", script]));
        assert_exit(&o, 0, &ctx);
        assert_eq!(
            (stdout(&o).as_str(), stderr(&o).as_str()),
            ("in\nout\ntee\n", "err\ntee\n"),
            "{ctx}"
        );
        let out = d.path().join("out");
        let _ = std::fs::remove_file(&out);
        let status = airlock_run(who, &[], &["sh", "-c", "echo file > /dev/stdout"])
            .stdout(std::fs::File::create(&out).unwrap())
            .status()
            .unwrap();
        assert!(status.success(), "{ctx}: {status:?}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "file\n", "{ctx}");
        let _ = std::fs::remove_file(&out);
        let host = host_cmd(
            Launcher::Unprivileged,
            &["sh", "-c", "echo file > /dev/stdout"],
        )
        .stdout(std::fs::File::create(&out).unwrap())
        .output()
        .unwrap();
        assert!(
            stderr(&host).contains("Permission denied"),
            "host control\n{}",
            show(&host)
        );
    }
}

/// A file redirected into stdin, or appended to from stdout or stderr, reaches the task as a
/// pipe the launcher relays: reopening the stream through /proc/self/fd gives no more access
/// than the redirection did (a read-only stdin opened for writing, an append-only stdout
/// truncated), and a directory on a stream, a path into the host's tree, is refused before
/// anything runs. /dev/stdin and /dev/stdout still work, also in --json mode; stdout and
/// stderr appended to one file keep their order; the caller's stdin offset moves by what the
/// task read; a file splice cannot read arrives whole; an appended stdout stops at
/// --file-size. The same probe run on the host (the control) does overwrite and truncate.
#[test]
fn a_file_on_a_standard_stream_cannot_be_reopened_for_more_access() {
    let d = world_readable_dir("/tmp", "airlock-streams-");
    let file = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        p
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let append = |p: &Path| std::fs::OpenOptions::new().append(true).open(p).unwrap();
    let probe = "(echo OVERWRITTEN > /proc/self/fd/0) 2>/dev/null; \
                 (: > /proc/self/fd/1) 2>/dev/null; echo appended";
    for who in BOTH {
        let ctx = format!("{who:?}");
        for inside in [true, false] {
            let (input, log) = (file("in", "original\n"), file("log", "line1\n"));
            let mut c = if inside {
                airlock_run(who, &[], &["sh", "-c", probe])
            } else {
                host_cmd(who, &["sh", "-c", probe])
            };
            let status = c
                .stdin(std::fs::File::open(&input).unwrap())
                .stdout(append(&log))
                .status()
                .unwrap();
            assert!(status.success(), "{ctx} inside={inside}: {status:?}");
            let want = if inside {
                ("original\n", "line1\nappended\n")
            } else {
                ("OVERWRITTEN\n", "appended\n")
            };
            assert_eq!(
                (read(&input).as_str(), read(&log).as_str()),
                want,
                "{ctx} {inside}"
            );
        }

        // A file opened to be written from its start (`>`) that the caller wrote to first, as
        // `{ echo token; airlock run ...; } > log` leaves it: the task can neither read the
        // caller's line back nor truncate it. A fresh empty one that the task's host uid does
        // not own (root's, 0666) still reaches the task as the file itself (seekable, so a
        // writer that seeks works); one it owns is relayed (a_task_cannot_change_the_mode_of_
        // the_callers_output).
        let secret = "caller-secret\n";
        let probe = "exec 3>&1; dd if=/proc/self/fd/3 iflag=nonblock bs=100 count=1 status=none \
                     >&2; (: > /proc/self/fd/1) 2>/dev/null; echo task";
        for inside in [true, false] {
            let log = file("log", "");
            let mut out = std::fs::File::create(&log).unwrap();
            out.write_all(secret.as_bytes()).unwrap();
            let mut c = if inside {
                airlock_run(who, &[], &["sh", "-c", probe])
            } else {
                host_cmd(who, &["sh", "-c", probe])
            };
            let o = c.stdout(out).stderr(Stdio::piped()).output().unwrap();
            assert!(o.status.success(), "{ctx} inside={inside}\n{}", show(&o));
            let (kept, leaked) = (read(&log) == "caller-secret\ntask\n", stderr(&o) == secret);
            assert_eq!(
                (kept, leaked),
                (inside, !inside),
                "{ctx} inside={inside}\n{}",
                show(&o)
            );
        }
        let log = file("log", "");
        let o = airlock_run(who, &[], &["sh", "-c", "test -f /dev/stdout && echo file"])
            .stdout(std::fs::File::create(&log).unwrap())
            .status()
            .unwrap();
        assert!(o.success(), "{ctx}: {o:?}");
        assert_eq!(read(&log), "file\n", "{ctx}");

        let o = airlock_run(who, &[], &["sh", "-c", "echo ran"])
            .stdin(std::fs::File::open(d.path()).unwrap())
            .output()
            .unwrap();
        assert_exit(&o, 2, &ctx);
        assert!(
            stderr(&o).contains("stdin is a directory"),
            "{ctx}\n{}",
            show(&o)
        );
        assert_eq!(stdout(&o), "", "{ctx}: the task ran");

        let (input, out) = (file("in", "original\n"), file("out", ""));
        let script = "cat /dev/stdin > /dev/stdout; echo 2 >&2; echo 3 > /dev/stderr; \
                      i=0; while [ $i -lt 300 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done";
        let mut want = String::from("original\n2\n3\n");
        for i in 0..300 {
            want.push_str(&format!("o{i}\ne{i}\n"));
        }
        let status = airlock_run(who, &[], &["sh", "-c", script])
            .stdin(std::fs::File::open(&input).unwrap())
            .stdout(append(&out))
            .stderr(append(&out))
            .status()
            .unwrap();
        assert!(status.success(), "{ctx}: {status:?}");
        assert!(read(&out) == want, "{ctx}: {}", read(&out));

        let o = run_inside(who, &["--json"], &["sh", "-c", "echo hi > /dev/stdout"]);
        assert_exit(&o, 0, &ctx);
        assert_eq!(report(&o)["stdout"], "hi\n", "{ctx}");

        // A relayed stdin gives the caller's offset back as far as the task read: a `while
        // read` loop around airlock keeps its place, and a task reading one line leaves the
        // rest to what follows.
        let lines = file("lines", "1\n2\n3\n4\n");
        let bin = common::binary().display().to_string();
        let script = format!(
            "while read l; do echo got $l; {bin} run -- true; done; \
             exec < {f}; read x; {bin} run -- sh -c 'read y; echo task $y'; cat",
            f = lines.display()
        );
        let o = host_cmd(who, &["sh", "-c", &script])
            .stdin(std::fs::File::open(&lines).unwrap())
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            "got 1\ngot 2\ngot 3\ngot 4\ntask 2\n3\n4\n",
            "{ctx}\n{}",
            show(&o)
        );
        // A file splice cannot read (proc's kallsyms) comes through whole.
        let size = |c: &mut Command| stdout(&c.output().unwrap());
        let host =
            size(host_cmd(who, &["sh", "-c", "wc -c < /proc/kallsyms"]).stdin(Stdio::null()));
        let inside = size(
            airlock_run(who, &[], &["wc", "-c"])
                .stdin(std::fs::File::open("/proc/kallsyms").unwrap()),
        );
        assert_eq!(inside, host, "{ctx}");
        // An appended stdout carries the task's --file-size: the file stops there, the
        // sandbox ends at once (the sleep does not run out, nor the timeout) and the run
        // ends as if the writer had died of SIGXFSZ, and airlock says why. Exactly the limit
        // goes through.
        for (n, pause, code) in [(65536, 0, 0), (1_000_000, 20, 128 + libc::SIGXFSZ)] {
            let big = file("big", "");
            let script = format!("head -c {n} /dev/zero; sleep {pause}");
            let o = airlock_run(
                who,
                &["--file-size", "64K", "--timeout", "15s"],
                &["sh", "-c", &script],
            )
            .stdout(append(&big))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
            assert_exit(&o, code, &ctx);
            assert_eq!(std::fs::metadata(&big).unwrap().len(), 64 * 1024, "{ctx}");
            let said = stderr(&o).contains("file size limit (65536 bytes)");
            assert_eq!(said, code != 0, "{ctx}\n{}", show(&o));
        }
        // Under a caller's soft file size limit below the task's (which the hard one sets),
        // the relay stops where the launcher must, and says that limit, not the task's 4 GiB.
        let soft = file("soft", "");
        let argv = ["prlimit", "--fsize=1024:unlimited", &bin, "run", "--"];
        let o = host_cmd(who, &argv)
            .args(["head", "-c", "5000", "/dev/zero"])
            .stdout(append(&soft))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_exit(&o, 128 + libc::SIGXFSZ, &ctx);
        assert_eq!(std::fs::metadata(&soft).unwrap().len(), 1024, "{ctx}");
        assert!(
            stderr(&o).contains("file size limit (1024 bytes)"),
            "{ctx}\n{}",
            show(&o)
        );
        // airlock's own messages are not bound by the task's --file-size: an appended stderr
        // already past it still gets the whole of one.
        let (out, err) = (file("out", ""), file("err", &"x".repeat(100)));
        let o = airlock_run(who, &["--file-size", "10"], &["no-such-command"])
            .stdout(append(&out))
            .stderr(append(&err))
            .status()
            .unwrap();
        assert_eq!(o.code(), Some(127), "{ctx}: {o:?}");
        assert!(
            read(&err).ends_with("no-such-command: command not found\n"),
            "{ctx}: {}",
            read(&err)
        );
    }
}

/// A pipe on a standard stream that the task's host uid owns (an unprivileged caller's own
/// pipes) reaches it through a pipe the launcher relays: reopening its stdin through
/// /proc/self/fd for writing cannot inject lines into what the caller reads next (a `while
/// read` loop), and reopening its stdout for reading cannot take what the caller wrote into
/// the pipe before. The relayed stdin gives back exactly what the task did not read, and the
/// output arrives whole and in order. The same probes run on the host (the control) inject
/// and steal. A root caller's pipes are root's, which the task cannot reopen at all.
#[test]
fn a_pipe_on_a_standard_stream_cannot_be_reopened_the_other_way() {
    let bin = common::binary().display().to_string();
    let inject = "echo INJECTED > /proc/self/fd/0";
    let steal = "exec 3>&1; dd if=/proc/self/fd/3 iflag=nonblock bs=100 count=1 status=none \
                 2>/dev/null | sed s/^/stolen:/ >&2";
    for who in BOTH {
        for inside in [true, false] {
            let run = |probe: &str| match inside {
                true => format!("{bin} run -- sh -c '{probe}'"),
                false => format!("sh -c '{probe}'"),
            };
            let script = format!(
                "printf 'item1\\nitem2\\n' | while read f; do echo got $f; {i} 2>/dev/null; \
                 done | head -4; (echo EARLIER; {s}) 2>&1 | (sleep 0.5; sed s/^/consumer:/)",
                i = run(inject),
                s = run(steal),
            );
            let o = host_cmd(who, &["sh", "-c", &script]).output().unwrap();
            let want = match inside {
                true => "got item1\ngot item2\nconsumer:EARLIER\n",
                false => {
                    "got item1\ngot item2\ngot INJECTED\ngot INJECTED\nconsumer:stolen:EARLIER\n"
                }
            };
            let ctx = format!("{who:?} inside={inside}\n{}", show(&o));
            if !inside && who == Launcher::Root {
                continue; // root's pipes: the control runs as root, which reopens anything
            }
            assert_eq!(stdout(&o), want, "{ctx}");
        }
        // The relayed stdin keeps the caller's place; the output comes whole, in order.
        let script = format!(
            "printf '1\\n2\\n3\\n' | while read l; do echo got $l; {bin} run -- true; done; \
             printf 'a\\nb\\nc\\n' | {{ read x; {bin} run -- sh -c 'read y; echo task $y'; cat; }}; \
             seq 1 200000 | {bin} run -- sh -c 'cat; echo end >&2' 2>&1 | tail -n 2; \
             {bin} run -- head -c 3000000 /dev/zero | (sleep 0.3; wc -c)"
        );
        let o = host_cmd(who, &["sh", "-c", &script]).output().unwrap();
        assert_eq!(
            stdout(&o),
            "got 1\ngot 2\ngot 3\ntask b\nc\n200000\nend\n3000000\n",
            "{who:?}\n{}",
            show(&o)
        );
        // A task that fills its own stdin pipe (reopened for writing) does not make the
        // launcher spin: airlock and the sandbox together use well under a second of CPU
        // while the task sleeps 3 s (a spinning relay used about 3 s).
        let script = format!(
            "(sleep 1; echo data; sleep 4) | /usr/bin/time -f '%U %S' {bin} run -- sh -c \
             'exec 3>/proc/self/fd/0; timeout 1 head -c 70000 /dev/zero >&3; sleep 3' \
             2>&1 >/dev/null | tail -n 1"
        );
        let o = host_cmd(who, &["bash", "-c", &script]).output().unwrap();
        let cpu: f64 = stdout(&o)
            .split_whitespace()
            .map(|t| t.parse::<f64>().unwrap_or(99.0))
            .sum();
        assert!(cpu < 1.0, "{who:?}: {cpu} s of CPU\n{}", show(&o));
        // Output the caller's reader does not take before the deadline ends the run as a
        // timeout (124), as it would have for a task blocked writing it; airlock says so.
        let script = format!(
            "{bin} run --timeout 2s -- head -c 200000 /dev/zero | (sleep 4; wc -c >/dev/null); \
             echo ${{PIPESTATUS[0]}}"
        );
        let o = host_cmd(who, &["bash", "-c", &script]).output().unwrap();
        assert_eq!(stdout(&o), "124\n", "{who:?}\n{}", show(&o));
        // A reader that takes all of stderr before stdout gets both whole: airlock waits on
        // every relayed pipe at once, not on a full stdout alone.
        let reader = format!(
            "import subprocess, time\n\
             p = subprocess.Popen(['{bin}', 'run', '--timeout', '15s', '--', 'sh', '-c', \
             'head -c 100000 /dev/zero >&2; head -c 100000 /dev/zero'], \
             stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n\
             time.sleep(1)\n\
             e = p.stderr.read(100000); o = p.stdout.read(); p.wait()\n\
             print(len(e), len(o), p.returncode)"
        );
        let o = host_cmd(who, &py(&reader, &[])).output().unwrap();
        assert_eq!(stdout(&o), "100000 100000 0\n", "{who:?}\n{}", show(&o));
    }
}

/// A relayed stdin whose reads block (a tracefs pipe, as a FUSE or network file may) holds
/// neither the launcher's timeout nor its exit: the task that does not read it ends at once,
/// the one that does is stopped by --timeout. Root only: the file takes root to open. The
/// pipe is a tracing instance's of its own (its buffer empty, its tracing on), so what the
/// machine's global trace buffer holds or whether its tracing is off (then the global pipe
/// gives EOF once read) cannot end the read.
#[test]
fn a_stdin_whose_reads_block_does_not_hold_the_launcher() {
    let tracefs = Tracefs::mount();
    let instance = tracefs.instance("airlock-test");
    let pipe = format!("{}/trace_pipe", instance.path());
    for (cmd, code) in [("true", 0), ("cat", 124)] {
        let started = Instant::now();
        let mut c = airlock_run(Launcher::Root, &["--timeout", "2s"], &[cmd]);
        let mut child = c
            .stdin(std::fs::File::open(&pipe).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if started.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.and_then(|s| s.code()), Some(code), "{cmd}");
    }
}

// ---------------------------------------------------------------------------------------------
// 15. IPC objects of the host

#[cfg(target_arch = "x86_64")]
/// With argv[1] `make`, creates the host's IPC objects of key argv[2] and name argv[3]: a
/// System V shared memory segment, message queue and semaphore set, a POSIX message queue and
/// a file in /dev/shm, each mode 0666 so that every uid may open them; with `remove`, removes
/// whichever of them exist. Prints nothing; fails on an error of `make`.
const HOST_IPC: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
mode, key, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0
def checked(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
if mode == 'make':
    flags = IPC_CREAT | IPC_EXCL | 0o666
    checked(libc.shmget(key, 4096, flags))
    checked(libc.msgget(key, flags))
    checked(libc.semget(key, 1, flags))
    os.close(checked(libc.syscall(L(240), name.encode(), L(os.O_RDONLY | os.O_CREAT | os.O_EXCL),
                                  L(0o666), None)))  # mq_open
    fd = os.open('/dev/shm/' + name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    os.fchmod(fd, 0o666)
    os.close(fd)
else:
    for get, ctl in ((lambda: libc.shmget(key, 0, 0), lambda i: libc.shmctl(i, IPC_RMID, None)),
                     (lambda: libc.msgget(key, 0), lambda i: libc.msgctl(i, IPC_RMID, None)),
                     (lambda: libc.semget(key, 0, 0), lambda i: libc.semctl(i, 0, IPC_RMID))):
        i = get()
        if i >= 0:
            ctl(i)
    libc.syscall(L(241), name.encode())  # mq_unlink
    try:
        os.unlink('/dev/shm/' + name)
    except FileNotFoundError:
        pass
"#;

#[cfg(target_arch = "x86_64")]
/// Opens the host's IPC objects of key argv[1] and name argv[2] (as HOST_IPC makes them):
/// `SHM:`, `MSG:`, `SEM:`, `MQ:` and `DEV-SHM:` each followed by OK or the errno's name.
const IPC_PROBE: &str = concat!(
    py_attempt!(),
    r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
key, name = int(sys.argv[1]), sys.argv[2]
def checked(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
attempt('SHM', lambda: checked(libc.shmget(key, 0, 0)))
attempt('MSG', lambda: checked(libc.msgget(key, 0)))
attempt('SEM', lambda: checked(libc.semget(key, 0, 0)))
attempt('MQ', lambda: os.close(checked(libc.syscall(L(240), name.encode(), L(os.O_RDONLY), L(0),
                                                    None))))
attempt('DEV-SHM', lambda: os.close(os.open('/dev/shm/' + name, os.O_RDONLY)))
"#
);

#[cfg(target_arch = "x86_64")]
/// The host's IPC objects HOST_IPC made, removed when dropped.
struct HostIpc {
    key: String,
    name: String,
}

#[cfg(target_arch = "x86_64")]
impl HostIpc {
    fn make() -> HostIpc {
        let pid = std::process::id();
        let ipc = HostIpc {
            key: (0x4149_0000 | (pid & 0xffff)).to_string(),
            name: format!("airlock-isolation-ipc-{pid}"),
        };
        ipc.host_ipc("remove");
        let o = ipc.host_ipc("make");
        assert!(
            o.status.success(),
            "making the host's IPC objects\n{}",
            show(&o)
        );
        ipc
    }

    fn host_ipc(&self, mode: &str) -> Output {
        run_host(
            Launcher::Root,
            &py(HOST_IPC, &[mode, &self.key, &self.name]),
        )
    }
}

#[cfg(target_arch = "x86_64")]
impl Drop for HostIpc {
    fn drop(&mut self) {
        self.host_ipc("remove");
    }
}

/// System V shared memory, message queues and semaphores and POSIX message queues of the
/// host are not reachable inside by their key or name (the sandbox's own IPC namespace), nor
/// is a file in the host's /dev/shm (a tmpfs of the sandbox's own). Control: on the host, the
/// same probe as the same user opens each of them.
#[cfg(target_arch = "x86_64")]
#[test]
fn host_ipc_objects_are_not_reachable() {
    let ipc = HostIpc::make();
    let probe = py(IPC_PROBE, &[&ipc.key, &ipc.name]);
    let kinds = ["SHM", "MSG", "SEM", "MQ", "DEV-SHM"];
    for who in BOTH {
        let host = run_host(who, &probe);
        let want: Vec<String> = kinds.iter().map(|k| format!("{k}:OK")).collect();
        assert_eq!(
            lines(&host),
            want,
            "host control as {who:?}\n{}",
            show(&host)
        );

        let ctx = format!("{who:?} inside");
        let o = run_inside(who, &[], &probe);
        let want: Vec<String> = kinds.iter().map(|k| format!("{k}:ENOENT")).collect();
        assert_eq!(lines(&o), want, "{ctx}\n{}", show(&o));
        assert_exit(&o, 0, &ctx);
    }
}

// ---------------------------------------------------------------------------------------------
// Pools of the host a task draws from

/// Start airlock as `who` with `args`, its stdin a pipe the returned guard holds open (the task
/// can wait on it), and read the first line the task prints.
fn start_and_read_line(who: Launcher, args: &[&str]) -> (Running, String) {
    let child = airlock(who, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let mut out = BufReader::new(running.0.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    (running, first)
}

/// How a pool test starts its sandbox: `airlock run`, and bwrap mode for the caps it shares
/// (the user namespace's inotify counts, devpts' `max`), which the rlimits are not.
const RUN_LAUNCH: &[&str] = &["run", "--timeout", "30s", "--"];
const BWRAP_LAUNCH: &[&str] = &[
    "bwrap",
    "--unshare-user",
    "--unshare-pid",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--",
];

/// Start a sandbox (`launch`, then python) whose task takes what `take` (Python, run while the
/// task lives) takes of a host pool and prints how much (`held N`), run `probe` (a shell line
/// printing `ok` when it could take one more from the same pool) on the host as `who` while the
/// task still holds it, then end the sandbox. Returns (held, the probe's output).
fn probe_while_held(who: Launcher, launch: &[&str], take: &str, probe: &str) -> (u64, String) {
    let script =
        format!("import os, sys\n{take}\nprint('held', n, flush=True)\nsys.stdin.read()\n");
    let mut args = launch.to_vec();
    args.extend([PYTHON, "-c", &script]);
    let (running, first) = start_and_read_line(who, &args);
    let held = first
        .strip_prefix("held ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{who:?}: the task printed {first:?}"));
    let probed = host_sh(who, probe);
    drop(running);
    (held, format!("{}{}", stdout(&probed), stderr(&probed)))
}

/// For each launcher and each of `launches`: the host `probe` succeeds before the run (control)
/// and while a task that ran `take` holds what it took, and the task took at most `most` of it.
fn assert_pool_not_emptied(
    launches: &[&[&str]],
    take: &str,
    probe: &str,
    most: u64,
    verb: &str,
    what: &str,
) {
    for (who, launch) in BOTH
        .into_iter()
        .flat_map(|w| launches.iter().map(move |l| (w, *l)))
    {
        let control = host_sh(who, probe);
        assert_eq!(
            stdout(&control).trim(),
            "ok",
            "control as {who:?}: {}",
            show(&control)
        );
        let (held, probed) = probe_while_held(who, launch, take, probe);
        let ctx = format!("{who:?} {}", launch[0]);
        assert_eq!(
            probed.trim(),
            "ok",
            "{ctx}: with the task holding {held}: {probed}"
        );
        assert!(held <= most, "{ctx}: the task {verb} {held} {what}");
    }
}

/// Where the host's /proc/sys is read-only (a bind of it over itself, in a mount namespace of
/// the test's own, as a container runtime makes it): airlock run stops at step 7, where the
/// kernel refuses the sandbox's own /proc (through which it writes the user namespace's
/// inotify caps), with the hint, and the task never runs; bwrap mode, which writes the caps at
/// step 4 through the host's /proc, runs without them, as bubblewrap always does (README, bwrap
/// section). Control: the same run outside that mount namespace runs the task.
#[test]
fn a_read_only_proc_sys_stops_airlock_run_and_bwrap_mode_runs_without_caps() {
    let bin = binary().display().to_string();
    let script = format!(
        "mount --bind -o ro /proc/sys /proc/sys || exit 99\n\
         {bin} run -- sh -c 'echo task ran'; echo \"run $?\"\n\
         {bin} bwrap --unshare-user --ro-bind / / cat /proc/sys/user/max_inotify_instances\n\
         echo \"bwrap $?\""
    );
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!out.contains("task ran"), "the task ran: {out}{err}");
    assert!(out.contains("run 125\n"), "{out}{err}");
    assert!(
        err.contains("step 7 build the filesystem: mount(\"proc\", \"/newroot/proc\"")
            && err.contains("EPERM")
            && err.contains("hint: the kernel refuses a new /proc"),
        "{err}"
    );
    assert!(out.ends_with("bwrap 0\n"), "{out}{err}");
    // Control.
    let o = run_inside(Launcher::Root, &[], &["sh", "-c", "echo task ran"]);
    assert_eq!(stdout(&o), "task ran\n", "{}", show(&o));
}

/// Runs argv[3:] under a seccomp filter that answers errno argv[2] to syscall number argv[1]:
/// what a container runtime's default profile does to clone3, unshare or the mount calls.
const UNDER_FILTER: &str = "import ctypes, os, struct, sys
nr, err = int(sys.argv[1]), int(sys.argv[2])
prog = [(0x20, 0, 0, 0), (0x15, 0, 1, nr), (0x06, 0, 0, 0x50000 | err), (0x06, 0, 0, 0x7fff0000)]
code = ctypes.create_string_buffer(b''.join(struct.pack('HBBI', *i) for i in prog))
fprog = ctypes.create_string_buffer(struct.pack('HxxxxxxQ', len(prog), ctypes.addressof(code)))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, fprog, 0, 0) == 0
os.execv(sys.argv[3], sys.argv[3:])";

/// Started under a filter of its caller's that refuses a call a step needs (clone3 with ENOSYS
/// or EPERM, the network namespace's unshare, open_tree), airlock fails that step before the
/// task, and the hint says the caller's filter may be the cause rather than (for ENOSYS) that
/// the kernel is too old. Control: the same filter on a syscall number no step makes.
#[test]
fn a_step_refused_by_the_callers_seccomp_filter_names_the_filter() {
    let bin = binary().display().to_string();
    let cases = [
        (435, 38, "step 1 create namespaces: clone3("),
        (435, 1, "step 1 create namespaces: clone3("),
        (272, 1, "unshare(CLONE_NEWNET): EPERM"),
        (428, 38, "step 5 copy host paths: open_tree("),
    ];
    for who in BOTH {
        let run = |nr: u32, err: u32| {
            let (nr, err) = (nr.to_string(), err.to_string());
            let mut c = host_command(who, "/usr/bin/python3");
            c.args([
                "-c",
                UNDER_FILTER,
                &nr,
                &err,
                &bin,
                "run",
                "--",
                "echo",
                "task ran",
            ]);
            run_bounded(c, None, Duration::from_secs(30))
        };
        for (nr, err, step) in cases {
            let r = run(nr, err);
            let said = stderr(&r.out);
            assert_eq!(r.code(), Some(125), "{who:?} {nr}/{err}: {}", r.show());
            assert!(
                !stdout(&r.out).contains("task ran"),
                "{who:?} {nr}/{err}: {}",
                r.show()
            );
            assert!(
                said.contains(step)
                    && said.contains("seccomp filter airlock runs under")
                    && !said.contains("needs Linux"),
                "{who:?} {nr}/{err}: {said}"
            );
        }
        let r = run(1000, 1);
        assert_eq!(stdout(&r.out), "task ran\n", "{who:?}: {}", r.show());
    }
}

/// airlock run by root of another user namespace: a rootless container's (65536 ids mapped
/// from 100000) runs its task, under rlimits, since that root may not write the host's cgroup
/// v1 hierarchies (it failed closed at step 1's mkdir, EACCES, before); `unshare -r`'s (root
/// alone mapped) cannot map the task's default host ids and fails at step 1 saying so.
#[test]
fn root_of_a_rootless_containers_user_namespace_runs_under_rlimits() {
    let bin = binary().display().to_string();
    let run = |map: &str, args: &[&str]| {
        let mut c = Command::new("/usr/bin/python3");
        c.args(["-c", IN_USERNS, map, "allow", &bin]).args(args);
        run_bounded(c, None, Duration::from_secs(30))
    };
    let status = "grep CapEff /proc/self/status";
    let r = run(
        "0 100000 65536",
        &["run", "--json", "--", "sh", "-c", status],
    );
    let report = r.report();
    assert_eq!(report["exit_code"], 0, "{}", r.show());
    assert_eq!(
        report["stdout"],
        "CapEff:\t0000000000000000\n",
        "{}",
        r.show()
    );
    for limit in ["memory", "pids"] {
        let mech = report["limits"][limit]["mechanism"].as_str().unwrap_or("");
        assert!(mech.starts_with("rlimit"), "{limit}: {}", r.show());
    }
    let r = run("0 100000 1", &["run", "--", "echo", "task ran"]);
    assert_eq!(r.code(), Some(125), "{}", r.show());
    assert!(!stdout(&r.out).contains("task ran"), "{}", r.show());
    assert!(
        stderr(&r.out).contains("fchown(<pipe>): EINVAL")
            && stderr(&r.out)
                .contains("(65534:65534, --host-uid and --host-gid) are not both mapped"),
        "{}",
        r.show()
    );
}

/// airlock run by root of a user namespace that maps the task's default host ids (0 and 65534)
/// but denies setgroups: the task would keep the caller's supplementary groups, which nothing
/// there can drop, so the run fails at step 6, as before bwrap mode learnt to let them stay
/// (the sign-off: airlock run let them stay too, and its task read /etc/shadow through group
/// shadow). Control: the same namespace allowing setgroups runs the task, its groups dropped.
#[test]
fn a_root_caller_whose_groups_cannot_be_dropped_does_not_run_a_task() {
    let bin = binary().display().to_string();
    let map = "0 0 1\n65534 65534 1\n";
    for (setgroups, code, said) in [
        (
            "deny",
            125,
            "step 6 become the sandbox user: setgroups([]): EPERM",
        ),
        ("allow", 0, "1000\n"),
    ] {
        let mut c = Command::new("/usr/bin/python3");
        c.args([
            "-c", IN_USERNS, map, setgroups, &bin, "run", "--", "id", "-G",
        ]);
        let r = run_bounded(c, None, Duration::from_secs(30));
        assert_eq!(r.code(), Some(code), "{setgroups}: {}", r.show());
        let out = format!("{}{}", stdout(&r.out), stderr(&r.out));
        assert!(out.contains(said), "{setgroups}: {}", r.show());
    }
}

/// A process as the host user `who` (the creator of a sandbox's user namespace) can make an
/// inotify instance.
const INOTIFY_PROBE: &str = "/usr/bin/python3 -c \"import ctypes, os
r = ctypes.CDLL(None, use_errno=True).inotify_init1(0)
print('ok' if r >= 0 else os.strerror(ctypes.get_errno()))\"";

/// Each inotify instance made in a user namespace counts against its creator in the parent too
/// (the kernel's ucounts), up to the creator's `fs.inotify.max_user_instances` (128): a task
/// making instances until EMFILE took every one of host root's for a root caller (as uid 65534,
/// of the caller's uid), so no daemon of that user on the host could watch a file while it ran
/// (seen on the unfixed code: the host probe answered "Too many open files"). The sandbox's user
/// namespace now has its own caps (`max_inotify_instances` 16, `max_inotify_watches`), written
/// while the init still may; the task can take 16, and the creator keeps the rest, in airlock run
/// and in bwrap mode alike, with a /proc of its own (through which the caps are written),
/// without one, and with `--proc` but no pid namespace of its own (the host's /proc bound there).
/// Control: the same probe on the host succeeds before the run.
#[test]
fn a_task_cannot_take_every_inotify_instance_of_its_host_user() {
    let take = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nn = 0\n\
                while n < 200 and libc.inotify_init1(0) >= 0:\n    n += 1";
    // BWRAP_LAUNCH with a /proc of its own, through which the init writes the caps (without
    // one, it writes them through the host's).
    let with_proc = [
        &BWRAP_LAUNCH[..BWRAP_LAUNCH.len() - 1],
        &["--proc", "/proc", "--"],
    ]
    .concat();
    // And --proc without a pid namespace of its own: the host's /proc bound there, so the caps
    // go through the host's /proc at step 4 (CapsVia::HostProc), not through that one.
    let host_proc: Vec<&str> = with_proc
        .iter()
        .copied()
        .filter(|a| *a != "--unshare-pid")
        .collect();
    let launches = [RUN_LAUNCH, BWRAP_LAUNCH, &with_proc, &host_proc];
    assert_pool_not_emptied(
        &launches,
        take,
        INOTIFY_PROBE,
        16,
        "held",
        "inotify instances",
    );
}

/// Opens a new devpts instance in a user and mount namespace of the host, as a container would,
/// and a terminal in it.
const PTY_PROBE: &str = "unshare -Urm sh -c 'mount -t devpts -o newinstance,ptmxmode=0666 devpts \
    /dev/pts && /usr/bin/python3 -c \"import os; os.open(\\\"/dev/pts/ptmx\\\", os.O_RDWR); \
    print(\\\"ok\\\")\"'";

/// Every devpts instance but the host's first draws terminals from one pool (`kernel.pty.max`
/// less `kernel.pty.reserve`, 3072 by default): a task opening /dev/ptmx until ENOSPC took them
/// all (seen on the unfixed code: 3071, and the container's ptmx answered ENOSPC), so no other
/// sandbox or container of the host could open a terminal while it ran. The sandbox's devpts has
/// `max=64` (bwrap mode's `--dev` too). Control: the same container opens one before the run.
#[test]
fn a_task_cannot_take_every_terminal_of_the_host() {
    let take = "n = 0\ntry:\n    while n < 4096:\n        os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY)\n\
                \x20       n += 1\nexcept OSError:\n    pass";
    let launches = [RUN_LAUNCH, BWRAP_LAUNCH];
    assert_pool_not_emptied(&launches, take, PTY_PROBE, 64, "held", "terminals");
}

/// A process as the host user `who` can create a POSIX timer (which needs a queued signal).
const TIMER_PROBE: &str = "/usr/bin/python3 -c \"import ctypes, os
t = ctypes.c_void_p()
r = ctypes.CDLL(None, use_errno=True).timer_create(1, None, ctypes.byref(t))
print('ok' if r == 0 else os.strerror(ctypes.get_errno()))\"";

/// Signals queued in a sandbox count against its user namespace's creator on the host too, up to
/// the creator's RLIMIT_SIGPENDING: a task queueing real-time signals to itself (blocked) until
/// EAGAIN took all of them (seen on the unfixed code: 96369 for a root caller, and then host
/// root's timer_create answered "Resource temporarily unavailable"), so no process of that user
/// on the host could create a POSIX timer or sigqueue(3) a signal while it ran. The task's
/// RLIMIT_SIGPENDING is now 1024. Control: the same probe on the host succeeds before the run.
#[test]
fn a_task_cannot_take_every_queued_signal_of_its_host_user() {
    let take = "import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])\n\
                libc = ctypes.CDLL(None, use_errno=True)\nn = 0\n\
                while n < 200000 and libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), 0) == 0:\n\
                \x20   n += 1";
    assert_pool_not_emptied(&[RUN_LAUNCH], take, TIMER_PROBE, 1024, "queued", "signals");
}

/// Creates one POSIX message queue of 10 messages of 8192 bytes in an IPC namespace of its own
/// (in a user namespace: the count goes up to the host user `who` all the same).
const MQUEUE_PROBE: &str = "unshare -Uri /usr/bin/python3 -c \"import ctypes, os
a = (ctypes.c_long * 8)(0, 10, 8192)
r = ctypes.CDLL(None, use_errno=True).syscall(240, b'probe', os.O_CREAT | os.O_RDWR, 0o600, a)
print('ok' if r >= 0 else os.strerror(ctypes.get_errno()))\"";

/// POSIX message queue bytes made in a sandbox count against its user namespace's creator on
/// the host too, up to the creator's RLIMIT_MSGQUEUE: a task creating queues until EMFILE took
/// all of them (seen on the unfixed code: 9 queues of 80 KiB for a root caller, and then a
/// queue of host root answered "Too many open files"). The task's RLIMIT_MSGQUEUE is now
/// 200 KiB. Control: the same probe on the host succeeds before the run.
#[test]
fn a_task_cannot_take_every_message_queue_byte_of_its_host_user() {
    let take = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
                a = (ctypes.c_long * 8)(0, 10, 8192)\nn = 0\n\
                while n < 100 and libc.syscall(240, b'q%d' % n, os.O_CREAT | os.O_RDWR, 0o600, a) >= 0:\n\
                \x20   n += 1";
    assert_pool_not_emptied(&[RUN_LAUNCH], take, MQUEUE_PROBE, 2, "made", "queues");
}

/// The file status flags of a stream the task gets as it is (a terminal here; a socket was,
/// before sockets were relayed) belong to the open file description it shares with the caller.
/// On the unfixed code a task's `fcntl(1, F_SETFL, O_NONBLOCK)` outlived the run: the caller's
/// end was left non-blocking, and its next writes there failed with EAGAIN once the reader
/// lagged. airlock now puts the flags back once the sandbox is gone. Control: the same command
/// run on the host leaves the flag set.
#[test]
fn a_task_cannot_leave_the_callers_stream_non_blocking() {
    let set = "import fcntl, os\n\
               fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)\n\
               print('set', flush=True)";
    let non_blocking = |fd: &std::fs::File| {
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        nix::fcntl::OFlag::from_bits_retain(flags).contains(nix::fcntl::OFlag::O_NONBLOCK)
    };
    let run = |mut c: Command| -> (bool, String) {
        let pty = nix::pty::openpty(None, None).unwrap();
        let term = std::fs::File::from(pty.slave);
        // uid 65534 must reach the terminal it writes to.
        std::os::unix::fs::fchown(&term, Some(65534), None).unwrap();
        let keep = term.try_clone().unwrap();
        let st = c.stdin(Stdio::null()).stdout(term).status().unwrap();
        assert!(st.success(), "{st}");
        drop(pty.master);
        (non_blocking(&keep), format!("{st}"))
    };
    let mut host = Command::new(PYTHON);
    host.args(["-c", set]);
    assert!(run(host).0, "control: the host's child leaves it set");
    for who in BOTH {
        let (left, st) = run(airlock(who, &["run", "--", PYTHON, "-c", set]));
        assert!(
            !left,
            "{who:?}: the caller's stream is non-blocking after the run ({st})"
        );
    }
}

/// What a task does with a socket on its stdin or stdout (python, `argv[1]` the act), said on
/// its stderr as `ACT:OK` or `ACT:<errno name>`: `shutdown` writes `before` and shuts the
/// stdout socket down both ways; `sendfds` sends a memfd over stdout (SCM_RIGHTS); `peercred`
/// asks stdout for its peer's credentials (SO_PEERCRED); `recvfds` receives on stdin what the
/// peer sent with a descriptor, and reads that descriptor (`OK:<bytes>:<its content>`), or,
/// refused, reads stdin (`<errno>:<what read gave>`).
const SOCKET_ACT: &str = r#"
import errno, os, socket, sys
act = sys.argv[1]
try:
    if act == 'shutdown':
        os.write(1, b'before\n')
        socket.socket(fileno=1).shutdown(socket.SHUT_RDWR)
    elif act == 'sendfds':
        m = os.memfd_create('big')
        os.write(m, b'MEMFD')
        socket.send_fds(socket.socket(fileno=1), [b'x'], [m])
    elif act == 'peercred':
        socket.socket(fileno=1).getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    elif act == 'recvfds':
        msg, fds, _, _ = socket.recv_fds(socket.socket(fileno=0), 100, 4)
        act += ':' + msg.decode().strip() + ':' + ''.join(os.pread(f, 100, 0).decode() for f in fds)
    r = 'OK'
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
    if act == 'recvfds':
        r += ':' + os.read(0, 100).decode().strip()
print(act + ':' + r, file=sys.stderr)
"#;

/// The caller of SOCKET_ACT (python: `argv[1]` the act, the rest the command prefix that runs
/// it, none for the host): gives it socketpairs as stdin and stdout (for `recvfds`, the peer
/// first sends `data` with a memfd holding `SECRET`), then says what its own end of stdout
/// received (bytes and descriptors) and whether it can still send on the socket the task had:
/// `status=N task=<its line> got=<bytes> fds=N after=OK:<what the peer read>|<errno name>`.
const SOCKET_CALLER: &str = r#"
import errno, os, socket, subprocess, sys
act, prefix = sys.argv[1], sys.argv[2:]
a, b = socket.socketpair()
c, d = socket.socketpair()
if act == 'recvfds':
    m = os.memfd_create('secret')
    os.write(m, b'SECRET')
    socket.send_fds(c, [b'data\n'], [m])
    os.close(m)
c.shutdown(socket.SHUT_WR)
p = subprocess.run(prefix + [sys.executable, '-c', os.environ['SOCKET_ACT'], act], stdin=d,
                   stdout=b, stderr=subprocess.PIPE, timeout=60)
a.setblocking(False)
got, fds = b'', []
try:
    while True:
        msg, f, _, _ = socket.recv_fds(a, 65536, 8)
        if not msg:
            break
        got, fds = got + msg, fds + f
except BlockingIOError:
    pass
try:
    b.send(b'after')
    after = 'OK:' + a.recv(10).decode()
except OSError as e:
    after = errno.errorcode.get(e.errno, str(e.errno))
print(f"status={p.returncode} task={p.stderr.decode().strip()} got={got.decode()!r} fds={len(fds)} after={after}")
"#;

/// A socket on a standard stream of a streamed run reaches the task as a pipe that airlock
/// relays, so the task cannot act on the caller's socket itself. On the unfixed code (the
/// socket passed as it was) a task's `shutdown(1, SHUT_RDWR)` outlived the run (the caller's
/// next send there failed with EPIPE: a service's journal stream), a task sent a descriptor
/// to the caller's peer over its stdout (SCM_RIGHTS: a 3 GiB memfd stayed in the peer's
/// queue after the run), read the peer's credentials (SO_PEERCRED), and received on its
/// stdin a descriptor the peer had sent the caller (a memfd of the caller's here) and read
/// it. Now each finds a pipe (ENOTSOCK), the caller's peer still reads what the task wrote,
/// the caller can still send after the run, no descriptor crosses either way, and the bytes
/// sent with the descriptor reach the task's read. Control: the same task run on the host
/// does each of those.
#[test]
fn a_socket_on_a_standard_stream_is_not_the_tasks_to_act_on() {
    let bin = common::binary().display().to_string();
    let cases = [
        (
            "shutdown",
            "status=0 task=shutdown:OK got='before\\n' fds=0 after=EPIPE",
            "status=0 task=shutdown:ENOTSOCK got='before\\n' fds=0 after=OK:after",
        ),
        (
            "sendfds",
            "status=0 task=sendfds:OK got='x' fds=1 after=OK:after",
            "status=0 task=sendfds:ENOTSOCK got='' fds=0 after=OK:after",
        ),
        (
            "peercred",
            "status=0 task=peercred:OK got='' fds=0 after=OK:after",
            "status=0 task=peercred:ENOTSOCK got='' fds=0 after=OK:after",
        ),
        (
            "recvfds",
            "status=0 task=recvfds:data:SECRET:OK got='' fds=0 after=OK:after",
            "status=0 task=recvfds:ENOTSOCK:data got='' fds=0 after=OK:after",
        ),
    ];
    for who in BOTH {
        for (act, host, inside) in cases {
            for (prefix, want) in [(vec![], host), (vec![bin.as_str(), "run", "--"], inside)] {
                let mut args = vec![act];
                args.extend(&prefix);
                let o = host_cmd(who, &py(SOCKET_CALLER, &args))
                    .env("SOCKET_ACT", SOCKET_ACT)
                    .output()
                    .unwrap();
                let ctx = match prefix.is_empty() {
                    true => "control (host)",
                    false => "airlock",
                };
                assert_eq!(stdout(&o).trim(), want, "{who:?} {act} {ctx}\n{}", show(&o));
            }
        }
    }
}

/// The caller of a task's streams as sockets (python, `argv[1]` airlock, `argv[2]` its bwrap
/// copy); one line per case, each saying what came of it.
const SOCKET_DATA: &str = r#"
import fcntl, functools, hashlib, os, random, socket, subprocess, sys, time
print = functools.partial(print, flush=True)
airlock, bwrap = sys.argv[1], sys.argv[2]
def run(args, **kw):
    return subprocess.run([airlock, 'run'] + args, timeout=120, **kw)
def drain(s):
    s.settimeout(60)
    got = b''
    while True:
        x = s.recv(1 << 20)
        if not x:
            return got
        got += x
# The peer sends three lines, the task reads one; its stdout and stderr are one socket.
a, b = socket.socketpair()
c, d = socket.socketpair()
c.sendall(b'l1\nl2\nl3\n')
c.shutdown(socket.SHUT_WR)
script = ('read x; [ -p /proc/self/fd/0 ] && [ -p /proc/self/fd/1 ] && echo pipes; echo got $x; '
          'i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo o$i; echo e$i >&2; done')
p = subprocess.Popen([airlock, 'run', '--', 'sh', '-c', script], stdin=d, stdout=b, stderr=b)
b.close()
want = 'pipes\ngot l1\n' + ''.join(f'o{i}\ne{i}\n' for i in range(1, 301))
got = drain(a).decode()
d.setblocking(False)
print(f'lines: status={p.wait()} ordered={got == want} left={d.recv(100)!r}')
if got != want:
    print(got[:300])
# 64 MiB out, whole and in order.
a, b = socket.socketpair()
gen = 'import random, sys; sys.stdout.buffer.write(random.Random(7).randbytes(64 << 20))'
p = subprocess.Popen([airlock, 'run', '--', sys.executable, '-c', gen], stdout=b)
b.close()
got = drain(a)
same = hashlib.sha256(got).digest() == hashlib.sha256(random.Random(7).randbytes(64 << 20)).digest()
print(f'64MiB: status={p.wait()} bytes={len(got)} same={same}')
# A non-blocking caller's socket that is read late, and stays non-blocking.
a, b = socket.socketpair()
b.setblocking(False)
p = subprocess.Popen([airlock, 'run', '--', 'head', '-c', '4000000', '/dev/zero'], stdout=b)
time.sleep(1)
n = 0
a.settimeout(10)
try:
    while n < 4000000:
        n += len(a.recv(1 << 20))
except TimeoutError:
    pass
nb = bool(fcntl.fcntl(b.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK)
print(f'nonblocking: status={p.wait()} bytes={n} still_nonblocking={nb}')
# A reader that takes nothing: the timeout ends the run, and airlock says what it kept.
a, b = socket.socketpair()
p = run(['--timeout', '2s', '--', 'head', '-c', '10000000', '/dev/zero'], stdout=b,
        stderr=subprocess.PIPE)
said = 'bytes were not delivered' in p.stderr.decode()
print(f'stalled: status={p.returncode} said={said}')
# The peer is gone: the task's writes fail as into a pipe with no reader (SIGPIPE).
a, b = socket.socketpair()
a.close()
print(f'gone: status={run(["--", "yes"], stdout=b).returncode}')
# A listening socket on stdin is refused; bwrap mode passes it as it is.
l = socket.socket(socket.AF_UNIX)
l.bind(b'\0airlock-test-listen-%d' % os.getpid())
l.listen()
p = run(['--', 'true'], stdin=l, stderr=subprocess.PIPE)
said = 'stdin is a listening socket' in p.stderr.decode()
probe = 'import os, stat; print(stat.S_ISSOCK(os.fstat(0).st_mode))'
q = subprocess.run([bwrap] + sys.argv[3:] + ['--', sys.executable, '-c', probe], stdin=l,
                   capture_output=True, timeout=60)
print(f'listening: status={p.returncode} said={said} bwrap={q.stdout.decode().strip()}')
"#;

/// A socket on a standard stream carries the data as it did, relayed: the task reads its
/// stdin socket through a pipe and the caller keeps what it did not read (the task reads one
/// of three lines: the other two are still in the socket after the run, as they were when
/// the task held the socket), stdout and stderr on one socket keep the task's order, 64 MiB
/// arrive whole, a caller's non-blocking socket read late gets everything and is left
/// non-blocking, a caller that reads nothing is ended by the run's --timeout (124) with a
/// word of what was kept, a peer that is gone makes the task die of SIGPIPE (141), as a pipe
/// without a reader does, and a listening socket is refused (exit 2), where bwrap mode (the
/// control) passes it. On the unfixed code the task found sockets, not pipes, on its stdin
/// and stdout (the first line), and the listening socket was passed.
#[test]
fn a_socket_on_a_standard_stream_carries_the_data_both_ways() {
    let bin = common::binary().display().to_string();
    let bwrap = bwrap_binary().display().to_string();
    let mut args = vec![bin.as_str(), bwrap.as_str()];
    args.extend_from_slice(MIN_ROOT);
    for who in BOTH {
        let o = host_cmd(who, &py(SOCKET_DATA, &args)).output().unwrap();
        assert_eq!(
            stdout(&o),
            "lines: status=0 ordered=True left=b'l2\\nl3\\n'\n\
             64MiB: status=0 bytes=67108864 same=True\n\
             nonblocking: status=0 bytes=4000000 still_nonblocking=True\n\
             stalled: status=124 said=True\n\
             gone: status=141\n\
             listening: status=2 said=True bwrap=True\n",
            "{who:?}\n{}",
            show(&o)
        );
    }
}

/// The caller of a task's stdout as a message socket (python, `argv[1]` airlock): for each of
/// SOCK_SEQPACKET and SOCK_DGRAM, the task writes SIZE zero bytes into a socket with the
/// kernel's default send buffer (6 MiB: past the 4 MiB after which the relay reads 256 KiB at
/// a time) and into one whose caller made its send buffer 8 KiB (200 kB); one line each.
const SOCKET_MESSAGES: &str = r#"
import socket, subprocess, sys
for name, typ in [('seqpacket', socket.SOCK_SEQPACKET), ('dgram', socket.SOCK_DGRAM)]:
    for sndbuf, size in [(None, 6 << 20), (8192, 200000)]:
        a, b = socket.socketpair(socket.AF_UNIX, typ)
        if sndbuf:
            b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        p = subprocess.Popen([sys.argv[1], 'run', '--', 'head', '-c', str(size), '/dev/zero'],
                             stdout=b, stderr=subprocess.PIPE)
        b.close()
        # A datagram socket has no end: read until the run is over and nothing is left.
        a.settimeout(0.5)
        n = 0
        while n < size:
            try:
                got = len(a.recv(1 << 20))
            except TimeoutError:
                got = None
            if not got and p.poll() is not None:
                break
            n += got or 0
        err = p.stderr.read().decode().strip()
        print(f'{name} sndbuf={sndbuf} status={p.wait()} bytes={n}/{size} {err}'.strip())
"#;

/// A message socket (SOCK_SEQPACKET, SOCK_DGRAM) on stdout takes no message larger than its
/// send buffer: the relay sends what the task wrote in pieces that fit. On the unfixed code
/// the relay sent as much as it had read from the pipe in one message (up to 256 KiB once
/// 4 MiB went through, 64 KiB before), send() failed with EMSGSIZE, the relay gave up ("writing
/// to its socket failed: Message too long"), the rest of the output was lost and the task died
/// of SIGPIPE (141): after 4 MiB with the kernel's default send buffer, at once with a caller's
/// 8 KiB one.
#[test]
fn a_socket_on_a_standard_stream_takes_messages_that_fit() {
    let bin = common::binary().display().to_string();
    for who in BOTH {
        let o = host_cmd(who, &py(SOCKET_MESSAGES, &[&bin]))
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            "seqpacket sndbuf=None status=0 bytes=6291456/6291456\n\
             seqpacket sndbuf=8192 status=0 bytes=200000/200000\n\
             dgram sndbuf=None status=0 bytes=6291456/6291456\n\
             dgram sndbuf=8192 status=0 bytes=200000/200000\n",
            "{who:?}\n{}",
            show(&o)
        );
    }
}

/// Node's `child_process.spawn` (libuv) gives a child unix socketpairs for stdio 'pipe', so
/// an agent that runs airlock from Node hands it sockets on every run: the task gets pipes
/// (`fifo`), and its stdout and stderr come back whole. Control: the same spawn of the task
/// without airlock shows that Node gave sockets. Skipped, said so, without node.
#[test]
fn a_run_spawned_by_node_gets_its_output_back() {
    if !Path::new("/usr/bin/node").exists() {
        eprintln!(
            "NOTE: /usr/bin/node is not installed: a_run_spawned_by_node_gets_its_output_back skipped"
        );
        return;
    }
    let spawn = "const p = require('child_process').spawn(process.argv[1], process.argv.slice(2));\n\
                 let out = '', err = '';\n\
                 p.stdout.on('data', d => out += d);\n\
                 p.stderr.on('data', d => err += d);\n\
                 p.on('close', code => console.log(JSON.stringify([code, out, err])));";
    let task = "echo hi; echo err >&2; stat -L -c %F /proc/self/fd/1";
    let bin = common::binary().display().to_string();
    for who in BOTH {
        let o = host_cmd(who, &["/usr/bin/node", "-e", spawn, "sh", "-c", task])
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            "[0,\"hi\\nsocket\\n\",\"err\\n\"]\n",
            "{who:?} control\n{}",
            show(&o)
        );
        let o = host_cmd(
            who,
            &[
                "/usr/bin/node",
                "-e",
                spawn,
                &bin,
                "run",
                "--",
                "sh",
                "-c",
                task,
            ],
        )
        .output()
        .unwrap();
        assert_eq!(
            stdout(&o),
            "[0,\"hi\\nfifo\\n\",\"err\\n\"]\n",
            "{who:?}\n{}",
            show(&o)
        );
    }
}

/// The position in a file on a standard stream the task gets as it is (an empty file its host
/// uid may write but does not own: here 0666, root's) belongs to the open file description it
/// shares with the caller, and `lseek` reaches past the task's --file-size, which caps only
/// what it writes. On the unfixed code a task under `--file-size 1M` wrote 5 bytes and left the
/// position at 1 TiB: the caller's next write there (`{ airlock run ...; echo after; } > log`)
/// made the file 1 TiB long, a hole that `cat` or an upload then reads whole (and a caller
/// under a file size limit of its own would have died of SIGXFSZ). airlock now moves a position
/// left past the file's end back to the end once the sandbox is gone. Control: the same probe
/// on the host, under the same limit, leaves it at 1 TiB.
#[test]
fn a_task_cannot_move_the_callers_output_past_its_end() {
    use std::io::Seek;
    let probe = "import os; os.write(1, b'task\\n'); os.lseek(1, 1 << 40, os.SEEK_SET)";
    let d = world_readable_dir("/tmp", "airlock-offset-");
    let out = d.path().join("out");
    // The caller's end of the file after the run: its position, and the file's length once the
    // caller wrote after the task.
    let run = |mut c: Command| -> (u64, u64, ExitStatus) {
        let f = fresh_output(&out, 0o666);
        let mut keep = f.try_clone().unwrap();
        let st = c.stdin(Stdio::null()).stdout(f).status().unwrap();
        let pos = keep.stream_position().unwrap();
        keep.write_all(b"after\n").unwrap();
        let len = keep.metadata().unwrap().len();
        let _ = std::fs::remove_file(&out);
        (pos, len, st)
    };
    let mut host = Command::new("prlimit");
    host.args(["--fsize=1048576", PYTHON, "-c", probe]);
    let (pos, len, st) = run(host);
    assert!(st.success(), "control: {st}");
    assert_eq!((pos, len), (1 << 40, (1 << 40) + 6), "control");
    for who in BOTH {
        let (pos, len, st) = run(airlock(
            who,
            &["run", "--file-size", "1M", "--", PYTHON, "-c", probe],
        ));
        assert!(st.success(), "{who:?}: {st}");
        assert_eq!(
            (pos, len),
            (5, 11),
            "{who:?}: the caller's position was moved"
        );
    }
}

/// Writes a byte to stdout, gives it the task's own group, then makes it setuid and open to all
/// (a write after it would clear the setuid bit); says the mode the file has then on stderr.
const CHMOD_STDOUT: &str = "import os\n\
os.write(1, b'x')\n\
os.fchown(1, -1, os.getgid())\n\
os.fchmod(1, 0o777)\n\
os.write(2, oct(os.fstat(1).st_mode & 0o7777).encode())";

/// The owner of a file may change its mode and group through any descriptor of it, and a
/// task's host uid owns an unprivileged caller's terminal and its fresh `>` file (or a root
/// caller's, made for the task's uid). On the unfixed code the task made both setuid and
/// writable by all (04777; the filter refuses the setuid bit now, see
/// `a_task_cannot_leave_a_setuid_or_setgid_program_in_a_writable_bind`, so the probe asks for
/// 0777), and they stayed so after the run: a program planted in the caller's output that any
/// local user could run as the caller, or rewrite, and a terminal any local user could open.
/// A fresh file the task's host uid owns is relayed now, and a stream passed as it
/// is (the terminal, 0620 of group `tty`) gets its group and mode back once the sandbox is
/// gone; a caller outside that group (uid 65534) cannot give it back, and the terminal loses
/// its group's bits instead (0600). Control: the same probe on the host as uid 65534 leaves
/// both at 0777, the terminal in its group.
#[test]
fn a_task_cannot_change_the_mode_of_the_callers_output() {
    use std::os::fd::OwnedFd;
    const NOBODY: u32 = 65534;
    const TTY: u32 = 5;
    let d = world_readable_dir("/tmp", "airlock-mode-");
    let mode = |m: &std::fs::Metadata| m.mode() & 0o7777;
    let on_file = |mut c: Command| -> (u32, Output) {
        let out = d.path().join("out");
        let f = fresh_output(&out, 0o644);
        std::os::unix::fs::fchown(&f, Some(NOBODY), Some(NOBODY)).unwrap();
        let o = c.stdout(f).stderr(Stdio::piped()).output().unwrap();
        (mode(&std::fs::metadata(&out).unwrap()), o)
    };
    let on_terminal = |mut c: Command| -> ((u32, u32), Output) {
        let pty = nix::pty::openpty(None, None).unwrap();
        let term = std::fs::File::from(pty.slave);
        std::os::unix::fs::fchown(&term, Some(NOBODY), Some(TTY)).unwrap();
        term.set_permissions(std::fs::Permissions::from_mode(0o620))
            .unwrap();
        let given = OwnedFd::from(term.try_clone().unwrap());
        let o = c.stdout(given).stderr(Stdio::piped()).output().unwrap();
        drop(pty.master);
        let m = term.metadata().unwrap();
        ((mode(&m), m.gid()), o)
    };
    let host = || host_cmd(Launcher::Unprivileged, &py(CHMOD_STDOUT, &[]));
    let (file, o) = on_file(host());
    assert_eq!(file, 0o777, "control, file: {}", show(&o));
    // Whether stdout is a regular file: the owned file is relayed, not merely put back after
    // the run (meanwhile it was the task's to make setuid, and for good if airlock was killed).
    const STDOUT_IS_FILE: &str =
        "import os, stat\nos.write(2, str(stat.S_ISREG(os.fstat(1).st_mode)).encode())";
    let (_, o) = on_file(host_cmd(Launcher::Unprivileged, &py(STDOUT_IS_FILE, &[])));
    assert_eq!(stderr(&o), "True", "control, file: {}", show(&o));
    let (term, o) = on_terminal(host());
    assert_eq!(term, (0o777, NOBODY), "control, terminal: {}", show(&o));
    for who in BOTH {
        let run = || airlock_run(who, &[], &py(CHMOD_STDOUT, &[]));
        let (file, o) = on_file(run());
        assert_exit(&o, 0, &format!("{who:?} file"));
        assert_eq!(file, 0o644, "{who:?}: the caller's file: {}", show(&o));
        let (_, o) = on_file(airlock_run(who, &[], &py(STDOUT_IS_FILE, &[])));
        assert_eq!(stderr(&o), "False", "{who:?}: relayed: {}", show(&o));
        let (term, o) = on_terminal(run());
        assert_exit(&o, 0, &format!("{who:?} terminal"));
        let back = match who {
            Launcher::Root => (0o620, TTY),
            Launcher::Unprivileged => (0o600, NOBODY),
        };
        assert_eq!(
            (term, stderr(&o).as_str()),
            (back, "0o777"),
            "{who:?}: the caller's terminal (its mode inside, then after): {}",
            show(&o)
        );
    }
}

/// Locks 1 MiB of a host file's pages (a read-only shared mapping of the Python binary, which
/// the host has cached): `ok`, or the error.
const MLOCK_PROBE: &str = "import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
fd = os.open(os.path.realpath('/usr/bin/python3'), os.O_RDONLY)
a = libc.mmap(None, 1 << 20, 1, 1, fd, 0)
print('ok' if libc.mlock(a, 1 << 20) == 0 else os.strerror(ctypes.get_errno()))";

/// Pages of a file mapping locked in memory are the page cache's: those the host had cached
/// stay charged to the cgroup that read them first, not to the sandbox's, and cannot be
/// reclaimed. On the unfixed code each process of the task could lock the caller's
/// RLIMIT_MEMLOCK (8 MiB): 40 processes under --memory 128m held 300 MiB of /usr locked while
/// the sandbox's cgroup counted 25 MiB. The task's RLIMIT_MEMLOCK is now 64 KiB. Control: the
/// same lock of 1 MiB succeeds on the host.
#[test]
fn a_task_cannot_lock_host_page_cache_past_its_memory_limit() {
    for who in BOTH {
        let control = run_host(who, &py(MLOCK_PROBE, &[]));
        assert_eq!(
            stdout(&control).trim(),
            "ok",
            "control as {who:?}: {}",
            show(&control)
        );
        let inside = run_inside(who, &[], &py(MLOCK_PROBE, &[]));
        assert_eq!(
            stdout(&inside).trim(),
            "Cannot allocate memory",
            "{who:?}: {}",
            show(&inside)
        );
    }
}

/// A root caller's task gets its cgroup namespace at step 12, once the init is in the run's
/// cgroup v1 (see containment.rs): a kernel or caller's filter that refuses that unshare stops
/// the run with exit 125, naming the step and the call, and the task never starts.
/// (`--share-net`: without it the network namespace's helper, which unshares first, stops the
/// run at step 10.) Control: the same wrapper refusing a call nobody makes runs the task.
#[test]
fn a_cgroup_namespace_that_cannot_be_made_stops_the_run() {
    const UNSHARE: &str = "272";
    let wrapped = |nr: &str| {
        host_cmd(Launcher::Root, &run_refusing(nr, "1"))
            .args(["--share-net", "--", "/bin/echo", "task-ran"])
            .output()
            .unwrap()
    };
    let control = wrapped("9999");
    assert_exit(&control, 0, "control (nothing refused)");
    assert_eq!(stdout(&control), "task-ran\n", "{}", show(&control));
    assert_stopped(
        &wrapped(UNSHARE),
        "step 12 create the cgroup namespace: unshare(CLONE_NEWCGROUP): EPERM",
        "task-ran",
        "unshare refused",
    );
}

/// Step 12 reads the caller's I/O priority to drop a real-time class (README, Limits). A
/// caller whose own seccomp filter answers ioprio_get with ENOSYS (a container runtime's
/// policy) hides that class, which the task would otherwise keep: the run stops at step 12
/// with exit 125, naming the call, and the task never starts. Control: the same wrapper
/// refusing a call nobody makes runs the task, which (a root caller in the real-time I/O
/// class) starts in class none.
#[test]
fn an_io_priority_that_cannot_be_read_stops_the_run() {
    const IOPRIO_GET: &str = "252";
    for who in BOTH {
        let wrapped = |nr: &str, errno: &str| {
            let mut argv = match who {
                Launcher::Root => vec!["ionice", "-c", "1", "-n", "0"],
                Launcher::Unprivileged => vec![],
            };
            argv.extend(run_refusing(nr, errno));
            argv.push("--");
            argv.extend(["/bin/sh", "-c", "echo task-ran; ionice"]);
            host_cmd(who, &argv).output().unwrap()
        };
        let ctx = format!("{who:?} control (nothing refused)");
        let control = wrapped("9999", "1");
        assert_exit(&control, 0, &ctx);
        assert_eq!(stdout(&control), "task-ran\nnone: prio 0\n", "{ctx}");

        let ctx = format!("{who:?} ioprio_get ENOSYS");
        let hidden = wrapped(IOPRIO_GET, "38");
        assert_stopped(
            &hidden,
            "step 12 drop a raised scheduling priority: ioprio_get(IOPRIO_WHO_PROCESS, 0): ENOSYS",
            "task-ran",
            &ctx,
        );
    }
}
