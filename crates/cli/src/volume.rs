//! Shared volumes on the command line: `mkfs`, `mount` and `fsck` of
//! `etcd://HOST:PORT[,HOST:PORT...]/VOLUME`.

use crate::error::CliError;
use crate::mount::{check_mountpoint, serve, spawn_background, Served};
use crate::opts::MountOpts;
use crate::{stats, Result};
use churnfs_kv::EtcdKv;
use churnfs_shared::check::check_volume;
use churnfs_shared::objects::{open_store, Blobs};
use churnfs_shared::{MountArgs, SharedFs, VolumeUrl};
use churnfs_vfs::EngineError;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Reader threads of a shared-volume mount unless `threads` says.
const SHARED_THREADS: usize = 16;

/// How long connecting to the engine may take before the command gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The volume URL `s` names, if it names one.
pub fn url(s: &str) -> Option<Result<VolumeUrl>> {
    if !VolumeUrl::looks_like(s) {
        return None;
    }
    Some(VolumeUrl::parse(s).map_err(CliError::Other))
}

/// Connects; `op_timeout` is how long an operation may wait in all, so
/// that one request gives up well before (another member may answer).
fn connect(u: &VolumeUrl, op_timeout: Duration) -> Result<Arc<EtcdKv>> {
    let request = (op_timeout / 4).clamp(Duration::from_millis(500), Duration::from_secs(3));
    EtcdKv::connect(&u.endpoints, CONNECT_TIMEOUT, request)
        .map(Arc::new)
        .map_err(|e| CliError::Other(format!("{u}: metadata engine unreachable: {e}")))
}

fn volume_err(u: &VolumeUrl, e: EngineError) -> CliError {
    match e {
        EngineError::NotAStore(why) => {
            CliError::Other(format!("{u}: not a churnfs volume ({why})"))
        }
        EngineError::WrongVersion { found, expected } => CliError::Other(format!(
            "{u}: volume format version {found}, this churnfs reads version {expected}"
        )),
        EngineError::Exists => CliError::Other(format!("{u}: the volume exists already")),
        other => CliError::Other(format!("{u}: {other}")),
    }
}

pub fn mkfs(u: &VolumeUrl, data: Option<&str>, upload_window_ms: u32) -> Result<ExitCode> {
    let data = data.ok_or_else(|| {
        CliError::Other(format!(
            "{u}: a shared volume needs --data URL (s3://BUCKET/PREFIX?endpoint=URL or file:///ABSOLUTE/PATH) for its file data"
        ))
    })?;
    let kv = connect(u, Duration::from_secs(20))?;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let sb = SharedFs::mkfs(&*kv, &u.volume, data, upload_window_ms, uid, gid)
        .map_err(|e| volume_err(u, e))?;
    let uuid: String = sb.uuid.iter().map(|b| format!("{b:02x}")).collect();
    crate::out!(
        "churnfs: created volume {u} (format {}, uuid {uuid}, data {data})",
        sb.version
    );
    Ok(ExitCode::SUCCESS)
}

/// The URL a mount shows as its source: with one endpoint, since mount
/// options are comma-separated.
fn shown(u: &VolumeUrl) -> String {
    format!("etcd://{}/{}", u.endpoints[0], u.volume)
}

pub fn mount(
    u: &VolumeUrl,
    mnt: &Path,
    opts: MountOpts,
    background: Option<&[String]>,
    data: Option<String>,
) -> Result<ExitCode> {
    check_mountpoint(mnt)?;
    let mnt = std::fs::canonicalize(mnt).map_err(|e| CliError::Io(mnt.into(), e))?;
    if let Some(args) = background {
        return spawn_background(args, &stats::mount_file(&mnt, "log"), &mnt, &u.to_string());
    }
    bound_the_heap();
    let metrics = opts.metrics.map(crate::metrics::bind).transpose()?;
    let kv = connect(u, opts.shared.op_timeout)?;
    let mut cfg = opts.shared.clone();
    cfg.mountpoint = mnt.display().to_string();
    let fs = SharedFs::mount(
        kv,
        MountArgs {
            volume: &u.volume,
            data_url: data.as_deref(),
            cfg,
        },
    )
    .map_err(|e| volume_err(u, e))?;
    let mut acfg = opts.adapter.clone();
    acfg.fsname = shown(u);
    if !opts.threads_given {
        // Requests wait on the engine's round trips, not on a CPU: more
        // readers keep more of them in flight.
        acfg.threads = SHARED_THREADS;
    }
    serve(fs, &mnt, acfg, &stats::mount_file(&mnt, "sock"), metrics).map_err(|e| match e {
        Served::Mount(e) => CliError::Io(mnt.clone(), e),
        Served::Shutdown(e) => volume_err(u, e),
    })
}

/// The volume's superblock and its data store, for fsck and gc.
fn open_volume(
    u: &VolumeUrl,
    data: Option<&str>,
) -> Result<(Arc<EtcdKv>, churnfs_shared::schema::Superblock, Blobs)> {
    let kv = connect(u, Duration::from_secs(20))?;
    let sb = SharedFs::read_superblock(&*kv, &u.volume).map_err(|e| volume_err(u, e))?;
    let url = data.unwrap_or(&sb.data_url).to_string();
    let store = open_store(&url).map_err(|e| CliError::Other(format!("{u}: {e}")))?;
    let blobs = Blobs::new(
        store,
        &url,
        &u.volume,
        Duration::from_secs(60),
        Arc::new(churnfs_shared::stats::Stats::default()),
    );
    Ok((kv, sb, blobs))
}

pub fn gc(
    u: &VolumeUrl,
    grace: Option<u64>,
    dry_run: bool,
    data: Option<&str>,
) -> Result<ExitCode> {
    let (kv, sb, blobs) = open_volume(u, data)?;
    let least = churnfs_shared::gc::min_grace(&sb);
    let grace = match grace {
        Some(s) => Duration::from_secs(s),
        None => least.max(Duration::from_secs(3600)),
    };
    if grace < least {
        return Err(CliError::Other(format!(
            "{u}: --grace {} is under twice the volume's upload window; give at least {}",
            grace.as_secs(),
            least.as_secs_f64().ceil() as u64
        )));
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} objects")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message("gc");
    let r = churnfs_shared::gc::collect(&*kv, &u.volume, &blobs, grace, dry_run, &mut |d, t| {
        bar.set_length(t);
        bar.set_position(d);
    })
    .map_err(|e| volume_err(u, e))?;
    bar.finish_and_clear();
    crate::out!(
        "{u}: {} objects ({} bytes): {} named, {} younger than {} s; {} {} unnamed objects ({} bytes)",
        r.objects,
        r.bytes,
        r.named,
        r.young,
        grace.as_secs(),
        if dry_run { "would remove" } else { "removed" },
        r.removed,
        r.removed_bytes
    );
    Ok(ExitCode::SUCCESS)
}

/// Makes freed file-data buffers go back to the system. A shared mount
/// moves data in buffers of up to 4 MiB (an object) across many threads;
/// with glibc's defaults a freed one raises the mmap threshold, later ones
/// come from per-thread arenas, and those keep what is freed: a large
/// write grew the daemon well past its configured bounds. A fixed threshold (every buffer above 256 KiB is its own mapping,
/// unmapped when freed) and few arenas keep the resident size at the
/// bounds (bench/results/2026-11-28-shared-data-rss.md).
fn bound_the_heap() {
    // SAFETY: mallopt only sets allocator parameters; called before this
    // process starts its threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

pub fn fsck(u: &VolumeUrl, data: Option<&str>) -> Result<ExitCode> {
    let (kv, _, blobs) = open_volume(u, data)?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message("checking");
    let report = check_volume(&*kv, &u.volume, Some(&blobs), &mut |n| {
        bar.set_message(format!("{n} keys read"));
        bar.tick();
    })
    .map_err(|e| volume_err(u, e))?;
    bar.finish_and_clear();
    for p in &report.problems {
        crate::out!("{u}: {p}");
    }
    let summary = format!(
        "{} inodes, {} names, {} chunks, {} objects ({} not named by any chunk), \
         {} live sessions, {} ended and not yet reclaimed, {} open-unlinked, {} queued deletes",
        report.inodes,
        report.names,
        report.chunks,
        report.objects,
        report.unreferenced_objects,
        report.sessions_live,
        report.sessions_ended,
        report.open_unlinked,
        report.queued
    );
    if report.is_clean() {
        crate::out!("{u}: clean ({summary})");
        Ok(ExitCode::SUCCESS)
    } else {
        crate::out!("{u}: {} problems found ({summary})", report.problems.len());
        Ok(ExitCode::from(1))
    }
}
