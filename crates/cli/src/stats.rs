//! Stats over a local socket: the daemon serves one `name value` line per
//! counter on `STORE/stats.sock` (a local store) or on a socket named after
//! the mountpoint in the runtime directory (a shared volume, which has no
//! directory of its own here); `churnfs stats MOUNTPOINT` finds it through
//! the mount's source in /proc/self/mountinfo.

use crate::error::CliError;
use crate::store_dir::sock_path;
use crate::Result;
use churnfs_fuse::StatsSource;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where this machine keeps the sockets and logs of its shared-volume
/// mounts: /run/churnfs for root, else $XDG_RUNTIME_DIR/churnfs, else
/// /tmp/churnfs-UID (made mode 0700).
pub fn run_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let d = if uid == 0 {
        PathBuf::from("/run/churnfs")
    } else if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        PathBuf::from(x).join("churnfs")
    } else {
        PathBuf::from(format!("/tmp/churnfs-{uid}"))
    };
    let _ = std::fs::create_dir_all(&d);
    d
}

/// The stats socket (`.sock`) or log (`.log`) of a shared-volume mount at
/// `mnt` (absolute): named by a hash of the mountpoint's path.
pub fn mount_file(mnt: &Path, ext: &str) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let h = xxhash_rust::xxh3::xxh3_64(mnt.as_os_str().as_bytes());
    run_dir().join(format!("mount-{h:016x}.{ext}"))
}

/// Serves the counters on socket `path` until the process exits.
pub fn serve(path: &Path, stats: StatsSource) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("churnfs-stats".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut out = String::new();
                for (k, v) in stats.snapshot() {
                    out.push_str(&format!("{k} {v}\n"));
                }
                let _ = conn.write_all(out.as_bytes());
            }
        })?;
    Ok(())
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a churnfs mount serves.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    /// A local store's directory.
    Store(PathBuf),
    /// A shared volume (its URL as the mount shows it).
    Volume(String),
}

/// What the churnfs mount at `mountpoint` serves, if one is mounted there.
pub fn mounted_source(mountpoint: &Path) -> Option<Source> {
    let want = std::fs::canonicalize(mountpoint).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(mp), Some(fstype), Some(source)) =
            (fields.get(4), fields.get(dash + 1), fields.get(dash + 2))
        else {
            continue;
        };
        if Path::new(&unescape(mp)) != want || !(*fstype == "fuse.churnfs" || *fstype == "fuse") {
            continue;
        }
        let source = unescape(source);
        if churnfs_shared::VolumeUrl::looks_like(&source) {
            return Some(Source::Volume(source));
        }
        // fusermount3 may drop the subtype, so a plain "fuse" mount counts
        // when its source is a churnfs store directory.
        let dir = PathBuf::from(source);
        if dir.join(churnfs_engine::store::DB_DIR).is_dir() {
            return Some(Source::Store(dir));
        }
    }
    None
}

pub fn print(mountpoint: &Path) -> Result<ExitCode> {
    let source = mounted_source(mountpoint).ok_or_else(|| {
        CliError::BadMountpoint(mountpoint.into(), "not a mounted churnfs filesystem")
    })?;
    let path = match source {
        Source::Store(store) => sock_path(&store),
        Source::Volume(_) => {
            let mnt = std::fs::canonicalize(mountpoint)
                .map_err(|e| CliError::Io(mountpoint.into(), e))?;
            mount_file(&mnt, "sock")
        }
    };
    let mut conn = UnixStream::connect(&path).map_err(|e| CliError::Io(path.clone(), e))?;
    let mut out = String::new();
    conn.read_to_string(&mut out)
        .map_err(|e| CliError::Io(path, e))?;
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
}
