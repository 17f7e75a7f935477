//! The one channel between the launcher and the sandbox's init: a SOCK_SEQPACKET socketpair,
//! so every message arrives whole. It carries only these messages, and the launcher treats
//! what arrives as data from a process it does not trust once the task has run.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, sendmsg,
};

use crate::sys::{SysResult, named};

/// For each input as copied in: (name, size, content hash).
pub type Handed = Vec<(String, u64, u64)>;

#[derive(Debug)]
pub enum Msg {
    /// launcher → init: the uid/gid maps are written; setup may go on.
    MapsReady,
    /// launcher → init: the `tasks` files of the run's cgroup v1 hierarchies (SCM_RIGHTS),
    /// which the init joins before it starts the task.
    JoinCgroup(Vec<OwnedFd>),
    /// init → launcher: a descriptor of the scratch directory (carried as SCM_RIGHTS), and for
    /// each input as copied in: (name, size, content hash), so the launcher can tell an input
    /// left as handed from one the task changed.
    Scratch(OwnedFd, Handed),
    /// init → launcher: an isolation step failed; the task never ran.
    SetupFailed(String),
    /// task → launcher: execve failed (exit code 126 or 127, message).
    ExecFailed(i32, String),
    /// init → launcher: the task ended (`false`, code) exited or (`true`, signal) was killed,
    /// having used `cpu_ms` of CPU time (with its reaped descendants).
    TaskEnded {
        signaled: bool,
        value: i32,
        cpu_ms: u64,
    },
}

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
        Msg::SetupFailed(text) => {
            buf.push(b'E');
            buf.extend_from_slice(text.as_bytes());
        }
        Msg::ExecFailed(code, text) => {
            buf.push(b'X');
            buf.extend_from_slice(&code.to_le_bytes());
            buf.extend_from_slice(text.as_bytes());
        }
        Msg::TaskEnded {
            signaled,
            value,
            cpu_ms,
        } => {
            buf.push(b'S');
            buf.push(*signaled as u8);
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

/// Receive one message. `Ok(None)`: the peer closed its end (or, non-blocking, nothing queued).
pub fn recv(sock: BorrowedFd, nonblocking: bool) -> SysResult<Option<Msg>> {
    let mut buf = vec![0u8; 64 * 1024];
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
        b'E' => Msg::SetupFailed(text(body)),
        b'X' => Msg::ExecFailed(int(body), text(body.get(4..).unwrap_or(&[]))),
        b'S' => Msg::TaskEnded {
            signaled: body.first() == Some(&1),
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
