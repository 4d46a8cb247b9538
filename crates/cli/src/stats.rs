//! Stats over a local socket: the daemon serves `STORE/stats.sock`, one
//! `name value` line per counter, and `churnfs stats MOUNTPOINT` finds the
//! store through the mount's source in /proc/self/mountinfo.

use crate::error::CliError;
use crate::store_dir::sock_path;
use crate::Result;
use churnfs_fuse::StatsSource;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Serves the counters until the process exits.
pub fn serve(store: &Path, stats: StatsSource) -> std::io::Result<()> {
    let path = sock_path(store);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
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

/// The store directory behind a churnfs mount at `mountpoint`, if mounted.
pub fn mounted_store(mountpoint: &Path) -> Option<PathBuf> {
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
        // fusermount3 may drop the subtype, so a plain "fuse" mount counts
        // when its source is a churnfs store directory.
        let source = PathBuf::from(unescape(source));
        let is_store = source.join(churnfs_engine::store::DB_DIR).is_dir();
        if (*fstype == "fuse.churnfs" || *fstype == "fuse")
            && is_store
            && Path::new(&unescape(mp)) == want
        {
            return Some(source);
        }
    }
    None
}

pub fn print(mountpoint: &Path) -> Result<ExitCode> {
    let store = mounted_store(mountpoint).ok_or_else(|| {
        CliError::BadMountpoint(mountpoint.into(), "not a mounted churnfs filesystem")
    })?;
    let path = sock_path(&store);
    let mut conn = UnixStream::connect(&path).map_err(|e| CliError::Io(path.clone(), e))?;
    let mut out = String::new();
    conn.read_to_string(&mut out)
        .map_err(|e| CliError::Io(path, e))?;
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
}
