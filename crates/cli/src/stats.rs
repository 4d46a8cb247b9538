//! Stats over a local socket: the daemon serves one `name value` line per
//! counter on `STORE/stats.sock` (a local store) or on a socket named after
//! the mountpoint in the runtime directory (a shared volume, which has no
//! directory of its own here); `churnfs stats MOUNTPOINT` finds it through
//! the mount's source in /proc/self/mountinfo.

use crate::error::CliError;
use crate::store_dir::sock_path;
use crate::Result;
use churnfs_fuse::StatsSource;
use churnfs_vfs::counters::Desc;
use std::collections::HashMap;
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

/// The socket that serves the counters of the churnfs mount at
/// `mountpoint`, and whether it is a shared volume's.
fn socket_of(mountpoint: &Path) -> Result<(PathBuf, bool)> {
    let source = mounted_source(mountpoint).ok_or_else(|| {
        CliError::BadMountpoint(mountpoint.into(), "not a mounted churnfs filesystem")
    })?;
    Ok(match source {
        Source::Store(store) => (sock_path(&store), false),
        Source::Volume(_) => {
            let mnt = std::fs::canonicalize(mountpoint)
                .map_err(|e| CliError::Io(mountpoint.into(), e))?;
            (mount_file(&mnt, "sock"), true)
        }
    })
}

/// One reading of every counter, as the daemon serves them.
fn read_all(path: &Path) -> Result<Vec<(String, u64)>> {
    let mut conn = UnixStream::connect(path).map_err(|e| CliError::Io(path.into(), e))?;
    let mut out = String::new();
    conn.read_to_string(&mut out)
        .map_err(|e| CliError::Io(path.into(), e))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect())
}

/// What each name is: the backend's catalogue (the embedded engine's or
/// the shared one's) and the FUSE adapter's.
fn catalogue(shared: bool) -> HashMap<&'static str, Desc> {
    let backend = if shared {
        churnfs_shared::stats::Stats::catalogue()
    } else {
        churnfs_engine::stats::Stats::catalogue()
    };
    backend
        .iter()
        .chain(churnfs_fuse::stats::Stats::catalogue())
        .map(|d| (d.name, *d))
        .collect()
}

/// The work left behind that users watch drain: deletes, frees, reclaim.
const GLANCE: &[&str] = &[
    "delete_backlog",
    "frees_pending",
    "unlinked_inodes",
    "large_frees_pending",
    "truncates_pending",
    "recovery_running",
    "compactions_pending",
    "delegations_held",
];

const OTHER: Desc = Desc {
    name: "",
    part: "other",
    help: "not in this build's catalogue",
    gauge: false,
};

/// The readings grouped by part, in the daemon's order.
fn grouped<'a>(
    now: &'a [(String, u64)],
    cat: &HashMap<&'static str, Desc>,
) -> Vec<(Desc, Vec<&'a (String, u64)>)> {
    let mut parts: Vec<(Desc, Vec<&(String, u64)>)> = Vec::new();
    for kv in now {
        let d = cat.get(kv.0.as_str()).copied().unwrap_or(OTHER);
        match parts.iter_mut().find(|(p, _)| p.part == d.part) {
            Some((_, v)) => v.push(kv),
            None => parts.push((d, vec![kv])),
        }
    }
    parts
}

fn glance(now: &[(String, u64)]) -> String {
    let items: Vec<String> = GLANCE
        .iter()
        .filter_map(|g| now.iter().find(|(k, _)| k == g))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    format!("# left to do: {}", items.join(", "))
}

/// The grouped view: a line of what is left to do, then each part under
/// its heading, a `name value` line per counter (scripts may read those).
fn text(now: &[(String, u64)], cat: &HashMap<&'static str, Desc>) -> String {
    let mut out = glance(now);
    out.push('\n');
    for (d, items) in grouped(now, cat) {
        out.push_str(&format!("\n# {}: {}\n", d.part, d.help));
        for (k, v) in items {
            out.push_str(&format!("{k} {v}\n"));
        }
    }
    out
}

/// The view `--watch` refreshes: values that are not zero, with the rate
/// per second of each counter since the last reading.
fn watched(
    mnt: &Path,
    now: &[(String, u64)],
    before: &HashMap<String, u64>,
    secs: f64,
    cat: &HashMap<&'static str, Desc>,
) -> String {
    let mut out = format!(
        "churnfs stats {} every {secs} s (Ctrl-C stops)\n{}\n",
        mnt.display(),
        glance(now)
    );
    for (d, items) in grouped(now, cat) {
        let shown: Vec<_> = items.iter().filter(|(_, v)| *v != 0).collect();
        if shown.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{:<12} {}\n", d.part.to_uppercase(), d.help));
        for (k, v) in shown {
            let kind = cat.get(k.as_str()).copied().unwrap_or(OTHER);
            let rate = match before.get(k) {
                Some(b) if !kind.gauge && secs > 0.0 => {
                    format!("{:>12.1}/s", v.saturating_sub(*b) as f64 / secs)
                }
                _ => String::new(),
            };
            out.push_str(&format!("  {k:<36} {v:>16} {rate}\n"));
        }
    }
    out
}

fn json(
    now: &[(String, u64)],
    before: Option<&HashMap<String, u64>>,
    secs: f64,
    cat: &HashMap<&'static str, Desc>,
) -> String {
    let mut m = serde_json::Map::new();
    for (k, v) in now {
        let d = cat.get(k.as_str()).copied().unwrap_or(OTHER);
        let mut o = serde_json::Map::new();
        o.insert("value".into(), (*v).into());
        o.insert("part".into(), d.part.into());
        o.insert(
            "kind".into(),
            if d.gauge { "gauge" } else { "counter" }.into(),
        );
        if let Some(b) = before.and_then(|b| b.get(k)) {
            if !d.gauge && secs > 0.0 {
                o.insert("rate".into(), (v.saturating_sub(*b) as f64 / secs).into());
            }
        }
        m.insert(k.clone(), o.into());
    }
    serde_json::Value::Object(m).to_string()
}

/// `churnfs stats MNT [--watch [SECS]] [--json]`.
pub fn print(mountpoint: &Path, watch: Option<f64>, as_json: bool) -> Result<ExitCode> {
    let (path, shared) = socket_of(mountpoint)?;
    let cat = catalogue(shared);
    let Some(secs) = watch else {
        let now = read_all(&path)?;
        let out = if as_json {
            json(&now, None, 0.0, &cat) + "\n"
        } else {
            text(&now, &cat)
        };
        let _ = std::io::stdout().write_all(out.as_bytes());
        return Ok(ExitCode::SUCCESS);
    };
    if !(0.1..=3600.0).contains(&secs) {
        return Err(CliError::Other(format!(
            "--watch {secs}: an interval from 0.1 to 3600 seconds"
        )));
    }
    let term = console::Term::stdout();
    let mut before: Option<HashMap<String, u64>> = None;
    loop {
        // A mount that went away ends the watch with its error.
        let now = read_all(&path)?;
        if as_json {
            let line = json(&now, before.as_ref(), secs, &cat);
            if writeln!(std::io::stdout(), "{line}").is_err() {
                return Ok(ExitCode::SUCCESS);
            }
        } else {
            let mut view = watched(
                mountpoint,
                &now,
                before.as_ref().unwrap_or(&HashMap::new()),
                secs,
                &cat,
            );
            // What fits the window: the work left and the first parts.
            if let Some((rows, cols)) = term.size_checked() {
                let cols = (cols as usize).max(20);
                let lines: Vec<String> = view
                    .lines()
                    .map(|l| l.chars().take(cols).collect())
                    .collect();
                let rows = rows.max(4) as usize;
                view = if lines.len() > rows {
                    let more = lines.len() - (rows - 1);
                    format!(
                        "{}\n({more} more lines: a taller window, or --json)",
                        lines[..rows - 1].join("\n")
                    )
                } else {
                    lines.join("\n")
                };
            }
            let _ = term.clear_screen();
            if term.write_str(&view).is_err() {
                return Ok(ExitCode::SUCCESS);
            }
        }
        before = Some(now.into_iter().collect());
        std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    }
}
