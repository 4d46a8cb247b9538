//! A store whose device fills up: the write that cannot be stored fails,
//! the engine stops (EIO) instead of going on with a half-written state, and
//! once space is back the next mount has everything that was durable.

use crate::support::Mount;
use std::fs;
use std::io::Write;
use std::process::Command;

fn sh(cmd: &str) {
    let st = Command::new("sh").arg("-ec").arg(cmd).status().unwrap();
    assert!(st.success(), "{cmd} failed");
}

struct TmpfsGuard(std::path::PathBuf);
impl Drop for TmpfsGuard {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn full_store_stops_the_engine_and_keeps_what_was_durable() {
    let mut guard = None;
    let mut m = Mount::new_with("commit_interval_ms=600000", |dir| {
        let store = dir.join("store");
        fs::create_dir(&store).unwrap();
        sh(&format!(
            "mount -t tmpfs -o size=24m tmpfs {}",
            store.display()
        ));
        guard = Some(TmpfsGuard(store));
    });
    let _guard = guard.unwrap();
    let mut keep = fs::File::create(m.path("keep")).unwrap();
    keep.write_all(b"durable before the disk filled").unwrap();
    keep.sync_all().unwrap();
    drop(keep);

    let mut big = fs::File::create(m.path("big")).unwrap();
    // Incompressible bytes: the store compresses its blocks.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut failed = None;
    for _ in 0..64 {
        if let Err(e) = big.write_all(&chunk) {
            failed = Some(e);
            break;
        }
    }
    let failed = failed
        .or_else(|| big.sync_all().err())
        .expect("64 MiB into a 24 MiB store succeeded");
    let code = failed.raw_os_error().unwrap();
    assert!(
        code == libc::ENOSPC || code == libc::EIO,
        "unexpected error {failed}"
    );
    // The engine stopped: later operations answer EIO, not a half-written state.
    let e = fs::metadata(m.path("keep")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    drop(big);
    m.unmount_any();

    // Space comes back; the next mount recovers everything durable.
    sh(&format!("mount -o remount,size=256m {}", m.store.display()));
    m.start();
    assert_eq!(
        fs::read(m.path("keep")).unwrap(),
        b"durable before the disk filled"
    );
    fs::write(m.path("after"), b"writable again").unwrap();
    m.unmount();
    m.assert_fsck_clean();
}
