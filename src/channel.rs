//! The one channel between the launcher and the sandbox's init: a SOCK_SEQPACKET socketpair,
//! so every message arrives whole. It carries only these messages, and the launcher treats
//! what arrives as data from a process it does not trust once the task has run.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, sendmsg,
};

use crate::sys::{SysError, SysResult, named};

/// For each input as copied in: (name, size, content hash).
pub type Handed = Vec<(String, u64, u64)>;

/// Failure texts are cut to this many bytes, so every message but the scratch hand-over fits
/// in a receive buffer of [`SMALL`] bytes.
const TEXT_MAX: usize = 3072;

/// Receive buffer for the messages the launcher sends (one byte and descriptors) and for
/// everything but the scratch hand-over.
pub const SMALL: usize = 4096;

/// Receive buffer the launcher needs for the init's messages, given the input names it passed:
/// the scratch hand-over carries 17 bytes plus the name for each input.
pub fn launcher_capacity<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    SMALL + names.map(|n| 17 + n.len()).sum::<usize>()
}

/// At most TEXT_MAX bytes of `text`, cut on a character boundary.
fn cut(text: &str) -> &[u8] {
    let mut end = text.len().min(TEXT_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text.as_bytes()[..end]
}

#[derive(Debug)]
pub enum Msg {
    /// launcher → init: the uid/gid maps are written; setup may go on.
    MapsReady,
    /// launcher → init: the `tasks` files of the run's cgroup v1 hierarchies (SCM_RIGHTS),
    /// which the init joins before it starts the task.
    JoinCgroup(Vec<OwnedFd>),
    /// launcher → init: the sandbox's network namespace, loopback up (SCM_RIGHTS), made while
    /// the init built the filesystem; or the call that failed making it.
    NetNs(Result<OwnedFd, SysError>),
    /// init → launcher: a descriptor of the scratch directory (carried as SCM_RIGHTS), and for
    /// each input as copied in: (name, size, content hash), so the launcher can tell an input
    /// left as handed from one the task changed.
    Scratch(OwnedFd, Handed),
    /// init → launcher: an isolation step failed; the task never ran.
    SetupFailed(String),
    /// init → launcher (airlock run): a signal that asks the run to end, passed on by the
    /// launcher while setup ran, ended setup; the task never started.
    Cancelled(i32),
    /// task → launcher: execve failed (exit code 126 or 127, message).
    ExecFailed(i32, String),
    /// init → launcher: the task ended (`false`, code) exited or (`true`, signal) was killed,
    /// having used `cpu_ms` of CPU time (with its reaped descendants).
    TaskEnded {
        signaled: bool,
        value: i32,
        cpu_ms: u64,
        /// A streamed run's scratch was full when the task ended (a JSON run's launcher
        /// looks itself, through the scratch it was handed).
        scratch_full: bool,
        /// The init killed the sandbox at its backstop, past the deadline, the launcher not
        /// having done it (stopped): the run timed out.
        timed_out: bool,
    },
}

/// The first byte of a [`Msg::NetNs`] that carries the namespace, which `sys::send_fd` sends
/// (the launcher's helper sends that message itself, allocating nothing).
pub const NETNS: u8 = b'N';

/// The first byte of the message (a pidfd) by which bwrap's --userns init says it is in the
/// namespaces it made (`sys::announce_self`), read by the launcher before any other.
pub const JOINED: u8 = b'J';

pub fn pair() -> SysResult<(OwnedFd, OwnedFd)> {
    named(
        nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        ),
        || "socketpair(AF_UNIX, SOCK_SEQPACKET)".into(),
    )
}

pub fn send(sock: BorrowedFd, msg: &Msg) -> SysResult<()> {
    let mut buf = Vec::with_capacity(64);
    let mut fds: Vec<RawFd> = Vec::new();
    match msg {
        Msg::MapsReady => buf.push(b'M'),
        Msg::JoinCgroup(tasks) => {
            buf.push(b'C');
            fds.extend(tasks.iter().map(|f| f.as_raw_fd()));
        }
        Msg::Scratch(fd, inputs) => {
            buf.push(b'F');
            fds.push(fd.as_raw_fd());
            for (name, size, hash) in inputs {
                buf.extend_from_slice(&size.to_le_bytes());
                buf.extend_from_slice(&hash.to_le_bytes());
                buf.extend_from_slice(name.as_bytes());
                buf.push(0);
            }
        }
        // One encoder for this message: the helper that makes the namespace sends it too.
        Msg::NetNs(Ok(fd)) => {
            return named(
                crate::sys::send_fd(sock.as_raw_fd(), NETNS, fd.as_raw_fd()),
                || "sendmsg(<channel>, 'N')".into(),
            );
        }
        Msg::NetNs(Err(e)) => {
            buf.push(b'n');
            buf.extend_from_slice(&(e.errno as i32).to_le_bytes());
            buf.extend_from_slice(cut(&e.call));
        }
        Msg::SetupFailed(text) => {
            buf.push(b'E');
            buf.extend_from_slice(cut(text));
        }
        Msg::Cancelled(sig) => {
            buf.push(b'Q');
            buf.extend_from_slice(&sig.to_le_bytes());
        }
        Msg::ExecFailed(code, text) => {
            buf.push(b'X');
            buf.extend_from_slice(&code.to_le_bytes());
            buf.extend_from_slice(cut(text));
        }
        Msg::TaskEnded {
            signaled,
            value,
            cpu_ms,
            scratch_full,
            timed_out,
        } => {
            buf.push(b'S');
            buf.push(*signaled as u8 | (*scratch_full as u8) << 1 | (*timed_out as u8) << 2);
            buf.extend_from_slice(&value.to_le_bytes());
            buf.extend_from_slice(&cpu_ms.to_le_bytes());
        }
    }
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    named(
        sendmsg::<()>(
            sock.as_raw_fd(),
            &[IoSlice::new(&buf)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ),
        || format!("sendmsg(<channel>, {:?})", buf[0] as char),
    )?;
    Ok(())
}

/// Receive one message of at most `capacity` bytes (a longer one is an error). `Ok(None)`: the
/// peer closed its end (or, non-blocking, nothing queued). The buffer is sized by the caller
/// because zeroing one larger than the message costs page faults on every launch.
pub fn recv(sock: BorrowedFd, nonblocking: bool, capacity: usize) -> SysResult<Option<Msg>> {
    let mut buf = vec![0u8; capacity];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if nonblocking {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let mut iov = [IoSliceMut::new(&mut buf)];
    let r = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), flags);
    let (len, mut fds) = match r {
        Err(nix::errno::Errno::EAGAIN) if nonblocking => return Ok(None),
        Err(e) => return named(Err(e), || "recvmsg(<channel>)".into()),
        Ok(m) => {
            let mut fds = Vec::new();
            for c in m.cmsgs().into_iter().flatten() {
                if let ControlMessageOwned::ScmRights(raw) = c {
                    fds.extend(raw.into_iter().map(owned));
                }
            }
            // Descriptors the kernel could not pass are lost: an error, never a short list.
            if m.flags.contains(MsgFlags::MSG_CTRUNC) {
                return named(Err(nix::errno::Errno::EMSGSIZE), || {
                    "recvmsg(<channel>): descriptors truncated (MSG_CTRUNC)".into()
                });
            }
            if m.flags.contains(MsgFlags::MSG_TRUNC) {
                return named(Err(nix::errno::Errno::EMSGSIZE), || {
                    format!("recvmsg(<channel>): message longer than {capacity} bytes (MSG_TRUNC)")
                });
            }
            (m.bytes, fds)
        }
    };
    if len == 0 {
        return Ok(None);
    }
    let body = &buf[1..len];
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let int = |b: &[u8]| {
        b.get(..4)
            .map(|x| i32::from_le_bytes(x.try_into().unwrap()))
            .unwrap_or(0)
    };
    Ok(Some(match buf[0] {
        b'M' => Msg::MapsReady,
        b'C' => Msg::JoinCgroup(fds),
        b'F' => match fds.pop() {
            Some(fd) => Msg::Scratch(fd, parse_inputs(body)),
            None => Msg::SetupFailed("scratch descriptor missing from message".into()),
        },
        NETNS => match fds.pop() {
            Some(fd) => Msg::NetNs(Ok(fd)),
            None => Msg::SetupFailed("namespace descriptor missing from message".into()),
        },
        b'n' => Msg::NetNs(Err(SysError {
            call: text(body.get(4..).unwrap_or(&[])),
            errno: nix::errno::Errno::from_raw(int(body)),
        })),
        b'E' => Msg::SetupFailed(text(body)),
        b'X' => Msg::ExecFailed(int(body), text(body.get(4..).unwrap_or(&[]))),
        b'Q' => Msg::Cancelled(int(body)),
        b'S' => Msg::TaskEnded {
            signaled: body.first().is_some_and(|b| b & 1 != 0),
            scratch_full: body.first().is_some_and(|b| b & 2 != 0),
            timed_out: body.first().is_some_and(|b| b & 4 != 0),
            value: int(body.get(1..).unwrap_or(&[])),
            cpu_ms: body
                .get(5..13)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .unwrap_or(0),
        },
        other => Msg::SetupFailed(format!("unexpected message {other:#x} on channel")),
    }))
}

fn parse_inputs(mut b: &[u8]) -> Handed {
    let mut out = Vec::new();
    while b.len() > 16 {
        let size = u64::from_le_bytes(b[..8].try_into().unwrap());
        let hash = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let rest = &b[16..];
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        out.push((
            String::from_utf8_lossy(&rest[..end]).into_owned(),
            size,
            hash,
        ));
        b = rest.get(end + 1..).unwrap_or(&[]);
    }
    out
}

/// The content hash both sides use for inputs (SipHash with fixed keys: same binary, same
/// result).
pub fn content_hash(data: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    h.write(data);
    h.finish()
}

fn owned(raw: RawFd) -> OwnedFd {
    crate::sys::own_fd(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn buffers_sized_by_the_receiver_hold_every_message() {
        let (a, b) = pair().unwrap();
        // The scratch hand-over with many long input names fits the launcher's capacity.
        let names: Vec<String> = (0..300).map(|i| format!("{i:0>200}")).collect();
        let handed: Handed = names.iter().map(|n| (n.clone(), 7, 9)).collect();
        let dir = OwnedFd::from(std::fs::File::open("/").unwrap());
        send(a.as_fd(), &Msg::Scratch(dir, handed.clone())).unwrap();
        let cap = launcher_capacity(names.iter().map(String::as_str));
        match recv(b.as_fd(), false, cap).unwrap() {
            Some(Msg::Scratch(_, got)) => assert_eq!(got, handed),
            other => panic!("expected the scratch hand-over, got {other:?}"),
        }
        // A failure text of any length is cut so that it fits the small buffer.
        let long = "é".repeat(50_000);
        send(a.as_fd(), &Msg::SetupFailed(long.clone())).unwrap();
        match recv(b.as_fd(), false, SMALL).unwrap() {
            Some(Msg::SetupFailed(t)) => {
                assert!(t.len() <= TEXT_MAX && t.len() > TEXT_MAX - 4, "{}", t.len());
                assert!(long.starts_with(&t));
            }
            other => panic!("expected a setup failure, got {other:?}"),
        }
    }

    #[test]
    fn namespace_messages_carry_a_descriptor_or_the_failed_call() {
        use std::os::fd::AsRawFd;
        let (a, b) = pair().unwrap();
        let ino = |fd: &OwnedFd| nix::sys::stat::fstat(fd).unwrap().st_ino;
        let net = OwnedFd::from(std::fs::File::open("/proc/self/ns/net").unwrap());
        let want = ino(&net);
        send(a.as_fd(), &Msg::NetNs(Ok(net))).unwrap();
        match recv(b.as_fd(), false, SMALL).unwrap() {
            Some(Msg::NetNs(Ok(fd))) => {
                assert_eq!(ino(&fd), want);
                assert!(fd.as_raw_fd() > 2);
            }
            other => panic!("expected a network namespace, got {other:?}"),
        }
        let failed = SysError {
            call: "unshare(0x40000000)".into(),
            errno: nix::errno::Errno::ENOSPC,
        };
        send(a.as_fd(), &Msg::NetNs(Err(failed))).unwrap();
        match recv(b.as_fd(), false, SMALL).unwrap() {
            Some(Msg::NetNs(Err(e))) => {
                assert_eq!(
                    (e.call.as_str(), e.errno),
                    ("unshare(0x40000000)", nix::errno::Errno::ENOSPC)
                )
            }
            other => panic!("expected the failed call, got {other:?}"),
        }
        // A descriptor message without its descriptor is a failure, never a bare number.
        nix::sys::socket::send(a.as_raw_fd(), b"N", MsgFlags::empty()).unwrap();
        match recv(b.as_fd(), false, SMALL).unwrap() {
            Some(Msg::SetupFailed(t)) => assert!(t.contains("missing"), "{t}"),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_message_longer_than_the_buffer_is_an_error_not_a_short_read() {
        let (a, b) = pair().unwrap();
        let handed: Handed = (0..100)
            .map(|i| (format!("input-{i:0>60}"), 1, 2))
            .collect();
        let dir = OwnedFd::from(std::fs::File::open("/").unwrap());
        send(a.as_fd(), &Msg::Scratch(dir, handed)).unwrap();
        let err = recv(b.as_fd(), false, SMALL).unwrap_err();
        assert_eq!(err.errno, nix::errno::Errno::EMSGSIZE);
        assert!(err.call.contains("MSG_TRUNC"), "{}", err.call);
    }
}
