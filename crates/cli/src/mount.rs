//! `churnfs mount`: checks, the foreground daemon, and `--background`.

use crate::error::CliError;
use crate::opts::MountOpts;
use crate::{stats, store_dir, Result};
use churnfs_engine::Engine;
use churnfs_fuse::AdapterConfig;
use churnfs_vfs::Backend;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `--background` waits for the daemon to report the mount ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) fn check_mountpoint(mnt: &Path) -> Result<()> {
    let meta = std::fs::metadata(mnt)
        .map_err(|_| CliError::BadMountpoint(mnt.into(), "mountpoint does not exist"))?;
    if !meta.is_dir() {
        return Err(CliError::BadMountpoint(
            mnt.into(),
            "mountpoint is not a directory",
        ));
    }
    if stats::mounted_source(mnt).is_some() {
        return Err(CliError::BadMountpoint(
            mnt.into(),
            "a churnfs filesystem is already mounted here",
        ));
    }
    let mut entries = std::fs::read_dir(mnt).map_err(|e| CliError::Io(mnt.into(), e))?;
    if entries.next().is_some() {
        return Err(CliError::BadMountpoint(
            mnt.into(),
            "mountpoint is not an empty directory",
        ));
    }
    Ok(())
}

/// `background`: the arguments of the same mount in the foreground, for
/// the daemon started in the background.
pub fn mount(
    store: &Path,
    mnt: &Path,
    opts: MountOpts,
    background: Option<&[String]>,
) -> Result<ExitCode> {
    check_mountpoint(mnt)?;
    let store = std::fs::canonicalize(store)
        .map_err(|_| CliError::NotAStore(store.into(), "no such directory".into()))?;
    if let Some(args) = background {
        return spawn_background(
            args,
            &store_dir::log_path(&store),
            mnt,
            &store.display().to_string(),
        );
    }
    let metrics = opts.metrics.map(crate::metrics::bind).transpose()?;
    let _lock = store_dir::lock(&store)?;
    let kv = store_dir::open(&store)?;
    let mut ecfg = opts.engine.clone();
    ecfg.statfs_path = Some(store.clone());
    let engine = Engine::mount(kv, ecfg).map_err(|e| CliError::engine(&store, e))?;
    let mut acfg = opts.adapter.clone();
    acfg.fsname = store.display().to_string();
    crate::STORE_LOGS.store(true, std::sync::atomic::Ordering::Relaxed);
    serve(engine, mnt, acfg, &store_dir::sock_path(&store), metrics).map_err(|e| match e {
        Served::Mount(e) => CliError::Io(mnt.into(), e),
        Served::Shutdown(e) => CliError::engine(&store, e),
    })
}

/// How serving a mount failed.
pub(crate) enum Served {
    /// Mounting or serving (the kernel side).
    Mount(std::io::Error),
    /// The backend's shutdown (committing what was left).
    Shutdown(churnfs_vfs::EngineError),
}

/// Mounts `backend` at `mnt` and serves it until unmounted (by `umount`,
/// or by a signal: SIGINT, SIGTERM, SIGHUP); then shuts the backend down.
/// The stats socket `sock` serves the counters meanwhile, and `metrics`
/// (bound by the caller) the metrics endpoint.
pub(crate) fn serve(
    backend: Arc<dyn Backend>,
    mnt: &Path,
    acfg: AdapterConfig,
    sock: &Path,
    metrics: Option<crate::metrics::Endpoint>,
) -> std::result::Result<ExitCode, Served> {
    let adapter = churnfs_fuse::Adapter::new(backend.clone(), acfg);
    // The stats socket is bound before the mount appears, so that
    // `churnfs stats` answers as soon as the mountpoint is seen mounted.
    if let Err(e) = stats::serve(sock, adapter.stats_source()) {
        tracing::warn!("stats socket unavailable: {e}");
    }
    if let Some(m) = metrics {
        if let Err(e) = m.serve(adapter.stats_source()) {
            tracing::warn!("metrics endpoint not served: {e}");
        }
    }
    let mut session = churnfs_fuse::session(adapter, mnt).map_err(|e| {
        let _ = std::fs::remove_file(sock);
        let _ = backend.shutdown();
        Served::Mount(e)
    })?;
    // Under systemd (Type=notify) units ordered after this one start now:
    // the filesystem is mounted and INIT answered. Without NOTIFY_SOCKET
    // this does nothing.
    if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
        tracing::warn!("could not tell the service manager the mount is ready: {e}");
    }
    let mut unmounter = session.unmount_callable();
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
            .map_err(Served::Mount)?;
    let mnt_path = mnt.to_path_buf();
    std::thread::Builder::new()
        .name("churnfs-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                tracing::info!("signal {sig}: unmounting");
                if let Err(e) = unmount_retrying(&mut || unmounter.unmount(), &mnt_path) {
                    crate::err!(
                        "churnfs: unmount on signal {sig} failed: {e} (is the mount busy?)"
                    );
                }
            }
        })
        .map_err(Served::Mount)?;
    let served = session.run();
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    let _ = std::fs::remove_file(sock);
    let committed = backend.shutdown();
    served.map_err(Served::Mount)?;
    committed.map_err(Served::Shutdown)?;
    Ok(ExitCode::SUCCESS)
}

/// Unmounts on a signal. The kernel refuses an unmount (EBUSY) while the
/// RELEASE it sends after a close is still in flight, and a close returns
/// before that, so a refusal is retried with `fusermount3 -u` for up to five
/// seconds (fuser's unmounter gives up its mount after the first try).
fn unmount_retrying(
    first: &mut dyn FnMut() -> std::io::Result<()>,
    mnt: &Path,
) -> std::result::Result<(), String> {
    let mut last = match first() {
        Ok(()) => return Ok(()),
        Err(e) => e.to_string(),
    };
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        if stats::mounted_source(mnt).is_none() {
            return Ok(());
        }
        match Command::new("fusermount3")
            .arg("-u")
            .arg(mnt)
            .stderr(Stdio::null())
            .status()
        {
            Ok(st) if st.success() => return Ok(()),
            Ok(st) => last = format!("fusermount3 -u: {st}"),
            Err(e) => last = format!("fusermount3: {e}"),
        }
    }
    Err(last)
}

/// Starts the mount in the foreground (`args`) as a detached child (its log
/// in `log`) and waits until the mount is ready or the child fails (its
/// error line is shown).
pub(crate) fn spawn_background(
    args: &[String],
    log: &Path,
    mnt: &Path,
    what: &str,
) -> Result<ExitCode> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Other(format!("cannot find own executable: {e}")))?;
    let log = log.to_path_buf();
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&log)
        .map_err(|e| CliError::Io(log.clone(), e))?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file);
    // SAFETY: setsid is async-signal-safe and runs in the child before exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::Other(format!("cannot start the daemon: {e}")))?;
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let line = text
                .lines()
                .rev()
                .find(|l| l.starts_with("churnfs: "))
                .unwrap_or("churnfs: daemon exited");
            crate::err!("{line}");
            return Ok(ExitCode::from(
                status.code().unwrap_or(1).clamp(1, 255) as u8
            ));
        }
        if stats::mounted_source(mnt).is_some() {
            crate::out!(
                "churnfs: mounted {} at {} (daemon pid {})",
                what,
                mnt.display(),
                child.id()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if start.elapsed() > READY_TIMEOUT {
            return Err(CliError::Other(format!(
                "daemon pid {} did not mount within {READY_TIMEOUT:?}",
                child.id()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
