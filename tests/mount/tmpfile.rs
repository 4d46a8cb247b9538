//! O_TMPFILE. The daemon decodes FUSE_TMPFILE itself on both transports
//! (wire.rs), so an unnamed file can be made, written, given a name with
//! linkat, or left to vanish at its close.
//!
//! The ring case needs the fuse module's `enable_uring` on, which is the
//! machine's setting; this test never changes it, since other mount tests
//! running beside it would take the ring too. The conformance script's
//! `uring` pass turns it on and runs this test with `CHURNFS_TEST_RING=1`,
//! which makes the ring case mandatory (`make test` therefore runs it).

use crate::support::{stat_of, Mount};
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn ring_offered() -> bool {
    std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .is_ok_and(|v| v.trim() == "Y")
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// open(dir, O_TMPFILE | O_RDWR | extra, mode).
fn open_tmpfile(dir: &Path, extra: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let p = c(dir);
    // SAFETY: a valid NUL-terminated path; the descriptor is owned at once.
    let fd = unsafe { libc::open(p.as_ptr(), libc::O_TMPFILE | libc::O_RDWR | extra, mode) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// linkat of the descriptor's /proc link, following it: names the file.
fn link_fd(fd: &OwnedFd, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let from = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    let to = c(to);
    // SAFETY: valid NUL-terminated paths.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits (at most 10 s) until the daemon freed an inode after `before`.
fn wait_freed(m: &Mount, before: u64) {
    let start = std::time::Instant::now();
    while stat_of(m, "unlinked_freed") == before {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "an unnamed tmpfile was not freed after its close"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn tmpfile_over_dev_fuse() {
    tmpfile_cases("uring=0", "uring=1");
}

#[test]
fn tmpfile_over_the_ring() {
    let required = std::env::var_os("CHURNFS_TEST_RING").is_some();
    if !ring_offered() {
        assert!(!required, "CHURNFS_TEST_RING set but enable_uring is off");
        eprintln!("tmpfile_over_the_ring: enable_uring off; run by tests/conformance/run.sh uring");
        return;
    }
    tmpfile_cases("uring=1", "uring=0");
}

/// Made, written, named, left unnamed, refused a name (O_EXCL), also where
/// the kernel checks permissions; fsck clean, and the named file kept
/// across a remount over the `other` transport.
fn tmpfile_cases(transport: &str, other: &str) {
    use std::io::{Read, Seek, Write};
    let mut m = Mount::new(transport);
    let dir = m.path("");
    // Named with linkat: an ordinary file from then on.
    let fd = open_tmpfile(&dir, 0, 0o640).expect("O_TMPFILE");
    let mut f = std::fs::File::from(fd);
    f.write_all(b"made without a name").unwrap();
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    assert_eq!(stat_of(&m, "unlinked_inodes"), 1);
    let fd: OwnedFd = f.into();
    link_fd(&fd, &m.path("named")).unwrap();
    drop(fd);
    assert_eq!(
        std::fs::read(m.path("named")).unwrap(),
        b"made without a name"
    );
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(m.path("named")).unwrap();
    assert_eq!(meta.nlink(), 1);
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    // Left unnamed: gone at its close, with its data.
    let freed = stat_of(&m, "unlinked_freed");
    let fd = open_tmpfile(&dir, 0, 0o600).unwrap();
    let mut f = std::fs::File::from(fd);
    f.write_all(&vec![7u8; 300_000]).unwrap();
    f.rewind().unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 300_000);
    drop(f);
    wait_freed(&m, freed);
    // O_EXCL: the kernel never lets it be linked.
    let fd = open_tmpfile(&dir, libc::O_EXCL, 0o600).unwrap();
    let err = link_fd(&fd, &m.path("excl")).expect_err("linked an O_EXCL tmpfile");
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    drop(fd);
    assert_eq!(stat_of(&m, "op_tmpfile"), 3);
    assert_eq!(stat_of(&m, "tmpfiles"), 3);
    // The transport asked for is the one that served.
    assert_eq!(
        stat_of(&m, "ring_requests") > 0,
        transport == "uring=1",
        "{transport}"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("named")]);
    m.unmount();
    m.assert_fsck_clean();
    // Where the kernel checks permissions it sends no OPEN or RELEASE; a
    // tmpfile then lives on the kernel's reference alone.
    let mut k = Mount::new(&format!("{transport},permissions=kernel"));
    let fd = open_tmpfile(&k.path(""), 0, 0o600).expect("O_TMPFILE, kernel permissions");
    let mut f = std::fs::File::from(fd);
    f.write_all(b"kernel checked").unwrap();
    let fd: OwnedFd = f.into();
    link_fd(&fd, &k.path("k")).unwrap();
    drop(fd);
    assert_eq!(std::fs::read(k.path("k")).unwrap(), b"kernel checked");
    let freed = stat_of(&k, "unlinked_freed");
    drop(open_tmpfile(&k.path(""), 0, 0o600).unwrap());
    wait_freed(&k, freed);
    assert_eq!(stat_of(&k, "open_handles"), 0);
    k.unmount();
    k.assert_fsck_clean();
    // The named one is there after a remount over the other transport
    // (the ring's only when the kernel offers it).
    m.options = other.into();
    m.start();
    assert_eq!(
        std::fs::read(m.path("named")).unwrap(),
        b"made without a name"
    );
    m.unmount();
    m.assert_fsck_clean();
}
