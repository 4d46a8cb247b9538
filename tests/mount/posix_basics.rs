//! POSIX behaviour through the kernel with std::fs and libc.

use crate::support::Mount;
use std::ffi::CString;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn errno_of<T>(r: std::io::Result<T>) -> i32 {
    r.err()
        .and_then(|e| e.raw_os_error())
        .expect("expected an error")
}

#[test]
fn files_dirs_links_and_errors() {
    let m = Mount::new("");
    let f = m.path("a.txt");
    fs::write(&f, b"hello world").unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"hello world");
    fs::create_dir(m.path("d")).unwrap();
    fs::create_dir(m.path("d/e")).unwrap();
    assert_eq!(fs::metadata(m.path("d")).unwrap().nlink(), 3);
    fs::hard_link(&f, m.path("d/hard")).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().nlink(), 2);
    std::os::unix::fs::symlink("../a.txt", m.path("d/sym")).unwrap();
    assert_eq!(
        fs::read_link(m.path("d/sym"))
            .unwrap()
            .as_os_str()
            .as_bytes(),
        b"../a.txt"
    );
    assert_eq!(fs::read(m.path("d/sym")).unwrap(), b"hello world");
    let mut names: Vec<_> = fs::read_dir(m.path("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, vec!["e", "hard", "sym"]);
    assert_eq!(errno_of(fs::create_dir(m.path("d"))), libc::EEXIST);
    assert_eq!(errno_of(fs::remove_dir(m.path("d"))), libc::ENOTEMPTY);
    assert_eq!(errno_of(fs::read(m.path("missing"))), libc::ENOENT);
    assert_eq!(errno_of(fs::write(m.path("a.txt/x"), b"")), libc::ENOTDIR);
    let long = "x".repeat(256);
    assert_eq!(errno_of(fs::write(m.path(&long), b"")), libc::ENAMETOOLONG);
    fs::write(m.path(&"y".repeat(255)), b"ok").unwrap();
    fs::rename(m.path("d/e"), m.path("e2")).unwrap();
    assert_eq!(fs::metadata(m.path("d")).unwrap().nlink(), 2);
    assert_eq!(
        errno_of(fs::rename(m.path("d"), m.path("d/inside"))),
        libc::EINVAL
    );
    fs::remove_file(m.path("d/hard")).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().nlink(), 1);
    fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o600);
    drop(m);
}

#[test]
fn data_truncate_sparse_and_limits() {
    let m = Mount::new("");
    let p = m.path("big");
    let mut fh = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    let chunk: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    fh.write_all(&chunk).unwrap();
    fh.seek(SeekFrom::Start(1_000_000)).unwrap();
    fh.write_all(b"tail").unwrap();
    fh.sync_all().unwrap();
    let mut back = Vec::new();
    fh.seek(SeekFrom::Start(0)).unwrap();
    fh.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 1_000_004);
    assert_eq!(&back[..200_000], &chunk[..]);
    assert!(back[200_000..1_000_000].iter().all(|b| *b == 0));
    fh.set_len(100).unwrap();
    fh.set_len(300_000).unwrap();
    let back = fs::read(&p).unwrap();
    assert_eq!(&back[..100], &chunk[..100]);
    assert!(back[100..].iter().all(|b| *b == 0));
    // A sparse petabyte file costs one block; shrinking it frees that block.
    fh.seek(SeekFrom::Start(1 << 50)).unwrap();
    fh.write_all(b"far").unwrap();
    fh.sync_all().unwrap();
    assert_eq!(fs::metadata(&p).unwrap().len(), (1 << 50) + 3);
    fh.set_len(10).unwrap();
    assert_eq!(fs::read(&p).unwrap(), &chunk[..10]);
    drop(fh);
    drop(m);
}

#[test]
fn unlinked_open_file_keeps_its_data_until_close() {
    let mut m = Mount::new("");
    let p = m.path("tmp");
    let mut fh = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    fh.write_all(&vec![7u8; 300_000]).unwrap();
    fs::remove_file(&p).unwrap();
    assert!(!p.exists());
    let mut back = Vec::new();
    fh.seek(SeekFrom::Start(0)).unwrap();
    fh.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 300_000);
    drop(fh);
    m.unmount();
    m.assert_fsck_clean();
}

#[test]
fn xattrs_through_the_kernel_on_a_default_mount() {
    let m = Mount::new("");
    let p = m.path("x");
    fs::write(&p, b"").unwrap();
    let path = CString::new(p.as_os_str().as_bytes()).unwrap();
    let name = CString::new("user.k").unwrap();
    // SAFETY: valid C strings and buffers for the duration of each call.
    unsafe {
        assert_eq!(
            libc::setxattr(path.as_ptr(), name.as_ptr(), b"v1".as_ptr().cast(), 2, 0),
            0
        );
        let mut buf = [0u8; 16];
        let n = libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        );
        assert_eq!(&buf[..n as usize], b"v1");
        assert_eq!(
            libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 1),
            -1
        );
        assert_eq!(*libc::__errno_location(), libc::ERANGE);
        let big = vec![1u8; 70_000];
        assert_eq!(
            libc::setxattr(
                path.as_ptr(),
                name.as_ptr(),
                big.as_ptr().cast(),
                big.len(),
                0
            ),
            -1
        );
        assert_eq!(*libc::__errno_location(), libc::E2BIG);
        assert_eq!(libc::removexattr(path.as_ptr(), name.as_ptr()), 0);
        assert_eq!(
            libc::getxattr(
                path.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len()
            ),
            -1
        );
        assert_eq!(*libc::__errno_location(), libc::ENODATA);
    }
    drop(m);
}

#[test]
fn a_mount_without_xattrs_refuses_them_and_keeps_the_file_usable() {
    // Extended attributes are on unless turned off (`-o xattr=0`).
    let m = Mount::new("xattr=0");
    let p = m.path("x");
    fs::write(&p, b"data").unwrap();
    let path = CString::new(p.as_os_str().as_bytes()).unwrap();
    let name = CString::new("user.k").unwrap();
    // SAFETY: valid C strings and buffers for the duration of each call.
    unsafe {
        for _ in 0..2 {
            // The first refusal is our ENOSYS; after it the kernel answers
            // EOPNOTSUPP itself.
            assert_eq!(
                libc::setxattr(path.as_ptr(), name.as_ptr(), b"v".as_ptr().cast(), 1, 0),
                -1
            );
            assert_eq!(*libc::__errno_location(), libc::EOPNOTSUPP);
            let mut buf = [0u8; 8];
            let n = libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 8);
            assert_eq!(n, -1);
            assert_eq!(*libc::__errno_location(), libc::EOPNOTSUPP);
        }
    }
    // Writes and truncates, which ask for security.capability, still work.
    let mut f = fs::OpenOptions::new().append(true).open(&p).unwrap();
    f.write_all(b" more").unwrap();
    f.set_len(4).unwrap();
    drop(f);
    assert_eq!(fs::read(&p).unwrap(), b"data");
    drop(m);
}
