//! `churnfs`: make, mount, check and inspect churnfs filesystems.

mod error;
mod helper;
mod metrics;
mod mount;
mod opts;
mod stats;
mod store_dir;
mod volume;

use clap::{Parser, Subcommand};
use error::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "churnfs",
    version,
    about = "A FUSE filesystem whose costs do not grow with history"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// STORE is a local store's directory, or a shared volume's URL:
/// etcd://HOST:PORT[,HOST:PORT...]/VOLUME.
#[derive(Subcommand)]
enum Cmd {
    /// Create a new, empty filesystem: a local store in STORE_DIR (missing
    /// or empty), or a shared volume (etcd://HOST:PORT[,...]/VOLUME, with
    /// --data naming where its file data lives).
    Mkfs {
        #[arg(value_name = "STORE")]
        store: String,
        /// A shared volume's data store: s3://BUCKET/PREFIX (with
        /// ?endpoint=http(s)://HOST:PORT for a service other than AWS;
        /// credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or
        /// ~/.aws/credentials), or file:///ABSOLUTE/PATH (a directory every
        /// mount of the volume reaches).
        #[arg(long, value_name = "URL")]
        data: Option<String>,
        /// A shared volume's upload window: the longest a mount may take
        /// from the start of an upload to the commit naming it; gc's grace
        /// is at least twice it.
        #[arg(long, value_name = "MS", default_value_t = churnfs_shared::schema::UPLOAD_WINDOW_MS)]
        upload_window_ms: u32,
    },
    /// Mount STORE (a store directory or a volume URL) at MOUNTPOINT (an
    /// empty directory).
    #[command(after_help = opts::MOUNT_OPTIONS_HELP)]
    Mount {
        #[arg(value_name = "STORE")]
        store: String,
        mountpoint: PathBuf,
        /// Comma-separated options, as `-o key=value,flag` (listed below).
        #[arg(short = 'o', value_name = "OPTIONS")]
        options: Vec<String>,
        /// Return once the mount is ready; the daemon keeps serving it.
        #[arg(long)]
        background: bool,
        /// A shared volume's data store, when this machine reaches it
        /// elsewhere than the volume says.
        #[arg(long, value_name = "URL")]
        data: Option<String>,
    },
    /// Check a store's or volume's invariants (a store unmounted; a volume
    /// while mounted or not). Exit 0 clean, 1 problems found.
    Fsck {
        #[arg(value_name = "STORE")]
        store: String,
        /// Fix what can be fixed without guessing (a local store, unmounted):
        /// data and records of missing files, link and entry counts, names
        /// that point at nothing; files without a name go to /lost+found.
        /// One line per fix, then the store is checked again.
        #[arg(long)]
        repair: bool,
        /// A shared volume's data store, when not where the volume says.
        #[arg(long, value_name = "URL")]
        data: Option<String>,
    },
    /// Remove a shared volume's objects that no file names and that are
    /// older than the grace period (safe while the volume is mounted and
    /// written).
    Gc {
        #[arg(value_name = "VOLUME")]
        volume: String,
        /// Only objects older than this many seconds go; at least twice
        /// the volume's upload window [default: 3600].
        #[arg(long, value_name = "SECS")]
        grace: Option<u64>,
        /// Report what would go, remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// The volume's data store, when not where the volume says.
        #[arg(long, value_name = "URL")]
        data: Option<String>,
    },
    /// Print the counters and gauges of a mounted churnfs filesystem,
    /// grouped by part, the delete backlog and reclaim work first.
    Stats {
        mountpoint: PathBuf,
        /// Refresh every SECS seconds (default 1), like top: changed values
        /// with their rates per second.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1")]
        watch: Option<f64>,
        /// One JSON object (with --watch, one a line): each name's value,
        /// part, kind (counter or gauge) and, watching, rate per second.
        #[arg(long)]
        json: bool,
    },
    /// Write the manual pages (section 8) into DIR (`make install`).
    #[command(hide = true)]
    Man { dir: PathBuf },
}

/// Writes a file everyone may read (this process's umask keeps what it
/// makes private).
fn write_public(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let io = |e| CliError::Io(path.into(), e);
    std::fs::write(path, bytes).map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(io)
}

/// The manual pages: churnfs(8), one per subcommand, and the mount(8)
/// helper's, which is churnfs-mount's.
fn write_man_pages(dir: &std::path::Path) -> Result<ExitCode> {
    use clap::CommandFactory;
    let io = |p: &std::path::Path, e| CliError::Io(p.into(), e);
    if !dir.is_dir() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(dir, mode).map_err(|e| io(dir, e))?;
    }
    let cmd = Cli::command().name("churnfs");
    let render = |c: clap::Command, name: &str| -> Result<()> {
        let path = dir.join(format!("{name}.8"));
        let mut buf = Vec::new();
        clap_mangen::Man::new(c)
            .section("8")
            .render(&mut buf)
            .map_err(|e| io(&path, e))?;
        write_public(&path, &buf)
    };
    render(cmd.clone(), "churnfs")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("churnfs-{}", sub.get_name());
        render(sub.clone().name(name.clone()), &name)?;
    }
    for helper in helper::NAMES {
        let path = dir.join(format!("{helper}.8"));
        write_public(&path, b".so man8/churnfs-mount.8\n")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Default log filter: our own crates at warn, the store's (fjall,
/// lsm-tree) at error. The store's lines pass only once a mount is
/// serving (`STORE_LOGS`): before that, and in mkfs, fsck and stats, every
/// store error reaches the user once, as our one-line message that includes
/// it. While serving, a failure inside the store that we only see the
/// consequence of (a background worker that crashed and poisoned the
/// database) must be in the log itself.
const DEFAULT_LOG: &str = "off,churnfs=warn,churnfs_engine=warn,churnfs_fuse=warn,\
     churnfs_shared=warn,churnfs_kv=warn,fjall=error,lsm_tree=error";

/// Set by `mount` once the store is open and the filesystem serving.
pub static STORE_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The most verbose `log` level that `hint` (the filter's own bound; `None`
/// when it has none) can let through.
fn log_level_cap(hint: Option<tracing_subscriber::filter::LevelFilter>) -> log::LevelFilter {
    use tracing_subscriber::filter::LevelFilter as T;
    match hint {
        None | Some(T::TRACE) => log::LevelFilter::Trace,
        Some(T::DEBUG) => log::LevelFilter::Debug,
        Some(T::INFO) => log::LevelFilter::Info,
        Some(T::WARN) => log::LevelFilter::Warn,
        Some(T::ERROR) => log::LevelFilter::Error,
        Some(_) => log::LevelFilter::Off,
    }
}

fn from_store(target: &str) -> bool {
    target.starts_with("fjall") || target.starts_with("lsm_tree")
}

fn main() -> ExitCode {
    // The store's files are private to the user who mounts it.
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0o077) };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CHURNFS_LOG")
        .unwrap_or_else(|_| DEFAULT_LOG.into());
    let most = log_level_cap(filter.max_level_hint());
    let store_gate = tracing_subscriber::filter::filter_fn(|m| {
        !from_store(m.target()) || STORE_LOGS.load(std::sync::atomic::Ordering::Relaxed)
    });
    use tracing_subscriber::prelude::*;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| QuietStderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(filter)
                .with_filter(store_gate),
        )
        .init();
    // `init` hands the `log` crate's records (fuser's, fjall's) to tracing
    // with the `log` macros' own level check wide open, so that every
    // request paid for a record the filter then refused: fuser logs each
    // request at debug. The cap makes those macros stop at their one
    // comparison unless the filter could let them through.
    log::set_max_level(most);
    let argv: Vec<String> = std::env::args().collect();
    if argv.first().is_some_and(|a| helper::called_as_helper(a)) {
        let r = helper::parse(&argv[1..]).and_then(|h| {
            if h.fake {
                return Ok(ExitCode::SUCCESS);
            }
            let mut fg = vec![
                "mount".to_string(),
                h.store.clone(),
                h.mountpoint.display().to_string(),
                "-o".to_string(),
                h.options.join(","),
            ];
            if let Some(d) = &h.data {
                fg.extend(["--data".to_string(), d.clone()]);
            }
            mount_cmd(&h.store, &h.mountpoint, &h.options, Some(&fg), h.data)
        });
        return finish(r);
    }
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Mkfs {
            store,
            data,
            upload_window_ms,
        } => match volume::url(&store) {
            Some(u) => u.and_then(|u| volume::mkfs(&u, data.as_deref(), upload_window_ms)),
            None if data.is_some() => Err(CliError::Other(
                "--data is for shared volumes (etcd://...); a local store keeps its data".into(),
            )),
            None => store_dir::mkfs(std::path::Path::new(&store)),
        },
        Cmd::Mount {
            store,
            mountpoint,
            options,
            background,
            data,
        } => {
            let fg: Vec<String> = argv
                .iter()
                .skip(1)
                .filter(|a| *a != "--background")
                .cloned()
                .collect();
            mount_cmd(&store, &mountpoint, &options, background.then_some(&fg[..]), data)
        }
        Cmd::Fsck {
            store,
            data,
            repair,
        } => match volume::url(&store) {
            Some(_) if repair => Err(CliError::Other(format!(
                "{store}: --repair works on a local store; a shared volume's fsck only reports"
            ))),
            Some(u) => u.and_then(|u| volume::fsck(&u, data.as_deref())),
            None => store_dir::fsck(std::path::Path::new(&store), repair),
        },
        Cmd::Gc {
            volume,
            grace,
            dry_run,
            data,
        } => match volume::url(&volume) {
            Some(u) => u.and_then(|u| volume::gc(&u, grace, dry_run, data.as_deref())),
            None => Err(CliError::Other(format!(
                "{volume:?} is not a volume URL: gc is for shared volumes (etcd://HOST:PORT/VOLUME); a local store frees its own data"
            ))),
        },
        Cmd::Stats {
            mountpoint,
            watch,
            json,
        } => stats::print(&mountpoint, watch, json),
        Cmd::Man { dir } => write_man_pages(&dir),
    };
    finish(r)
}

/// `churnfs mount`, and the mount(8) helper.
fn mount_cmd(
    store: &str,
    mountpoint: &std::path::Path,
    options: &[String],
    background: Option<&[String]>,
    data: Option<String>,
) -> Result<ExitCode> {
    let o = opts::MountOpts::parse(options)?;
    for k in &o.retired {
        tracing::warn!(
            "option {k} is no longer a mount option (the reader policy is fixed); ignored"
        );
    }
    match volume::url(store) {
        Some(u) => u.and_then(|u| volume::mount(&u, mountpoint, o, background, data)),
        None if data.is_some() => Err(CliError::Other(
            "--data is for shared volumes (etcd://...)".into(),
        )),
        None => mount::mount(std::path::Path::new(store), mountpoint, o, background),
    }
}

fn finish(r: Result<ExitCode>) -> ExitCode {
    match r {
        Ok(code) => code,
        Err(e) => {
            err!("churnfs: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// stderr for the log, where a failed write (a full disk under the log file,
/// a closed pipe) is dropped: tracing-subscriber would otherwise report it
/// with `eprintln!`, which panics when stderr itself fails.
struct QuietStderr;

impl std::io::Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) type Result<T, E = CliError> = std::result::Result<T, E>;

/// Prints a line to stdout; a failed write (closed pipe, full disk) is ignored,
/// never a panic (`println!` would panic, and a daemon must not die of its log).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// Like `out!`, to stderr.
#[macro_export]
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(directives: &str) -> log::LevelFilter {
        log_level_cap(tracing_subscriber::EnvFilter::new(directives).max_level_hint())
    }

    #[test]
    fn the_log_cap_follows_the_filter() {
        // The default lets nothing below warn through, so fuser's
        // per-request debug records stop at the `log` macro.
        assert_eq!(cap(DEFAULT_LOG), log::LevelFilter::Warn);
        assert_eq!(cap("off"), log::LevelFilter::Off);
        assert_eq!(cap("off,fuser=debug"), log::LevelFilter::Debug);
        assert_eq!(cap("trace"), log::LevelFilter::Trace);
    }
}
