//! File data on a real S3 server (SeaweedFS), with two mounts and a
//! 3-member etcd cluster: gc run again and again while both mounts write,
//! overwrite and delete, then every byte checked; kill -9 of a mount in the
//! middle of its uploads; the store unreachable and back; a damaged object.

use crate::support::{eventually, stat_of, Volume};
use churnfs_tests::Rng;
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// gc's grace on these volumes: twice their upload window.
const GRACE: u64 = 8;

fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    for c in v.chunks_mut(8) {
        let r = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&r[..c.len()]);
    }
    v
}

/// Writes, overwrites and deletes files `dir/w{who}-{n}` for as long as
/// `stop` is false; returns what each file should hold.
fn writer(dir: PathBuf, who: u32, seed: u64, stop: Arc<AtomicBool>) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let p = dir.join(format!("w{who}-{}", rng.below(12)));
        match rng.below(10) {
            0..=4 => {
                // A whole new content: inline, one object or several chunks.
                let n = match rng.below(4) {
                    0 => rng.below(4000) as usize,
                    1 => 4096 + rng.below(200_000) as usize,
                    _ => rng.below(9 << 20) as usize,
                };
                let data = bytes(&mut rng, n);
                std::fs::write(&p, &data).expect("write");
                model.insert(p, data);
            }
            5..=7 => {
                // Overwrite a range in place: new objects over old ones.
                let Some(cur) = model.get_mut(&p) else {
                    continue;
                };
                let off = rng.below(cur.len() as u64 + 1) as usize;
                let n = 1 + rng.below(300_000) as usize;
                let data = bytes(&mut rng, n);
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .expect("open");
                f.seek(SeekFrom::Start(off as u64)).expect("seek");
                f.write_all(&data).expect("overwrite");
                if rng.below(2) == 0 {
                    f.sync_all().expect("fsync");
                }
                drop(f);
                if cur.len() < off + n {
                    cur.resize(off + n, 0);
                }
                cur[off..off + n].copy_from_slice(&data);
            }
            _ => {
                if model.remove(&p).is_some() {
                    std::fs::remove_file(&p).expect("unlink");
                }
            }
        }
    }
    model
}

fn check_files(dir: &Path, model: &BTreeMap<PathBuf, Vec<u8>>, from: &Path) {
    for (p, want) in model {
        let on = dir.join(p.strip_prefix(from).expect("under the mount"));
        let got = std::fs::read(&on).unwrap_or_else(|e| panic!("{}: {e}", on.display()));
        assert!(
            got == *want,
            "{}: {} bytes, {} expected, or they differ",
            on.display(),
            got.len(),
            want.len()
        );
    }
}

#[test]
fn gc_run_again_and_again_under_two_writing_mounts_loses_no_byte() {
    let vol = Volume::on_s3(3);
    let s3 = vol.s3.as_ref().expect("on S3");
    let a = vol.mount("");
    let b = vol.mount("");
    std::fs::create_dir(a.path("d")).unwrap();
    // Objects no record names, as a crashed upload leaves: gc must take
    // them once past the grace, and nothing else.
    let orphans: Vec<String> = (0..5)
        .map(|n| {
            format!(
                "test/test/{:016x}/00000000/00000000000000ff-{n:016x}",
                9000 + n
            )
        })
        .collect();
    for o in &orphans {
        s3.put(o, b"left by an upload whose commit never came");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = [(a.path("d"), 1u32), (b.path("d"), 2u32)]
        .into_iter()
        .map(|(dir, who)| {
            let stop = stop.clone();
            std::thread::spawn(move || writer(dir, who, 77 + who as u64, stop))
        })
        .collect();
    let start = Instant::now();
    let mut runs = 0;
    while start.elapsed() < Duration::from_secs(25) {
        vol.gc(GRACE);
        runs += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let models: Vec<_> = writers
        .into_iter()
        .map(|w| w.join().expect("writer"))
        .collect();
    let last = vol.gc(GRACE);
    assert!(runs >= 5, "gc ran {runs} times");
    // Every byte, read on both mounts (b's reads of a's files and the other
    // way round go to the store).
    for (m, from) in models.iter().zip([a.path("d"), b.path("d")]) {
        check_files(&a.path("d"), m, &from);
        check_files(&b.path("d"), m, &from);
    }
    let left = s3.list("test/test/");
    for o in &orphans {
        assert!(
            !left.iter().any(|(k, _)| k == o),
            "orphan {o} outlived gc (last run: {last})"
        );
    }
    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}

#[test]
fn a_mount_killed_in_its_uploads_leaves_no_dangling_name_and_gc_takes_the_rest() {
    let vol = Volume::on_s3(3);
    let mut a = vol.mount("");
    let b = vol.mount("");
    // Large files written in a loop: uploads are always in flight.
    let mut dd = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while :; do head -c 30000000 /dev/urandom > {}/big$((i % 3)); i=$((i+1)); done",
            a.mnt.display()
        ))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("writer");
    assert!(
        eventually(Duration::from_secs(60), || stat_of(&a, "objects_put") >= 12),
        "the writer uploaded nothing"
    );
    a.kill9();
    let _ = dd.kill();
    let _ = dd.wait();
    // b reclaims the dead session; every object a committed record names
    // exists (fsck checks each one).
    assert!(
        eventually(Duration::from_secs(30), || stat_of(
            &b,
            "sessions_reclaimed"
        ) >= 1),
        "the dead session was not reclaimed"
    );
    vol.assert_fsck_clean();
    std::thread::sleep(Duration::from_secs(GRACE + 1));
    let out = vol.gc(GRACE);
    let report = vol.assert_fsck_clean();
    assert!(
        report.contains("(0 not named by any chunk)"),
        "objects left unnamed after gc ({out}): {report}"
    );
    drop(b);
}

#[test]
fn an_unreachable_store_fails_writes_in_bound_serves_cached_reads_and_comes_back() {
    let mut vol = Volume::on_s3(3);
    let a = vol.mount("");
    let mut rng = Rng::new(5);
    let old = bytes(&mut rng, 3 << 20);
    std::fs::write(a.path("old"), &old).unwrap();
    assert_eq!(std::fs::read(a.path("old")).unwrap(), old);
    vol.s3.as_mut().expect("on S3").pause();
    // The kernel's pages go: reads of "old" reach the daemon, whose read
    // cache has the objects.
    std::fs::write("/proc/sys/vm/drop_caches", b"3").unwrap();
    assert_eq!(
        std::fs::read(a.path("old")).expect("a cached read while the store is away"),
        old
    );
    let t0 = Instant::now();
    let r = (|| {
        let mut f = std::fs::File::create(a.path("new"))?;
        f.write_all(&bytes(&mut rng, 2 << 20))?;
        f.sync_all()
    })();
    let waited = t0.elapsed();
    let e = r.expect_err("fsync with the store unreachable");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    // op_timeout_ms=8000 (support.rs): the write waits about that long.
    assert!(waited < Duration::from_secs(40), "waited {waited:?}");
    vol.s3.as_mut().expect("on S3").resume();
    let data = bytes(&mut rng, 2 << 20);
    assert!(
        eventually(Duration::from_secs(30), || std::fs::write(
            a.path("new"),
            &data
        )
        .is_ok()),
        "writes did not come back with the store"
    );
    assert_eq!(std::fs::read(a.path("new")).unwrap(), data);
    drop(a);
    vol.assert_fsck_clean();
}

#[test]
fn a_damaged_object_reads_as_eio_naming_the_file_never_as_data() {
    let vol = Volume::on_s3(1);
    let s3 = vol.s3.as_ref().expect("on S3");
    let a = vol.mount("");
    let mut rng = Rng::new(9);
    let data = bytes(&mut rng, 6 << 20);
    std::fs::write(a.path("f"), &data).unwrap();
    let ino = std::fs::metadata(a.path("f")).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.ino()
    });
    let objects = s3.list("test/test/");
    assert!(objects.len() >= 2, "objects: {objects:?}");
    // The same number of bytes, other contents: only the checksum tells.
    // Every object under the volume (which of them the file names depends
    // on how its writes were flushed; the others are gone from its records).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for (key, size) in &objects {
        let damaged = vec![0x5a; *size as usize];
        s3.put(key, &damaged);
        // The server answers the new bytes before the filesystem is asked.
        while s3.get(key) != damaged {
            assert!(
                std::time::Instant::now() < deadline,
                "the S3 server still serves the old bytes of {key}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // A fresh mount has nothing cached.
    let b = vol.mount("");
    let err = match std::fs::read(b.path("f")) {
        Ok(got) => panic!(
            "damaged objects read as data: {} bytes, {} as written",
            got.len(),
            if got == data {
                "the same"
            } else {
                "not the same"
            }
        ),
        Err(e) => e,
    };
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    let log = b.log();
    let ino = ino.unwrap();
    assert!(
        log.contains(&format!("ino {ino}")) && log.contains("damaged"),
        "the log does not name inode {ino} and the damage:\n{log}"
    );
    drop(a);
    drop(b);
}
