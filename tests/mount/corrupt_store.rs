//! Damaged stores: truncated and bit-flipped files. `fsck` and `mount` either
//! refuse with one clear line (never a panic), or, for damage that a crash
//! could also leave (a torn journal tail), recover a consistent prefix in
//! which every file reads back exactly what was written.

use crate::support::{churnfs, Mount};
use std::collections::BTreeMap;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn flip(path: &Path, at_fraction: f64) {
    let len = fs::metadata(path).unwrap().len();
    let mut f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(((len as f64) * at_fraction) as u64))
        .unwrap();
    f.write_all(&[0xff, 0x00, 0xa5, 0x5a]).unwrap();
}

fn no_panic(out: &std::process::Output, what: &str) {
    let code = out.status.code();
    assert!(
        code != Some(101) && code.is_some(),
        "{what}: churnfs crashed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn damaged_stores_are_refused_or_recovered_consistently() {
    let mut m = Mount::new("");
    let mut written = BTreeMap::new();
    for i in 0..150u32 {
        let data: Vec<u8> = (0..i * 97).map(|j| (j * 31 + i) as u8).collect();
        fs::write(m.path(&format!("f{i}")), &data).unwrap();
        written.insert(format!("f{i}"), data);
    }
    // Files of 4 MiB: their 64 KiB blocks go to fjall's blob files
    // (store::KV_SEPARATION_BYTES), and 16 MiB is more than one memtable,
    // so the store holds blob files to damage too.
    for i in 0..4u32 {
        let data: Vec<u8> = (0..4u32 << 20)
            .map(|j| (j.wrapping_mul(2_654_435_761) >> (8 + i)) as u8)
            .collect();
        let mut f = fs::File::create(m.path(&format!("big{i}"))).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        written.insert(format!("big{i}"), data);
    }
    // fjall writes a full memtable out on a thread of its own.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    m.unmount();
    let pristine = m.dir.path().join("pristine");
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(&m.store)
        .arg(&pristine)
        .status()
        .unwrap()
        .success());
    let mut db_files = Vec::new();
    files_under(&pristine.join("db"), &mut db_files);
    assert!(
        db_files
            .iter()
            .any(|f| f.components().any(|c| c.as_os_str() == "blobs")),
        "no blob file to damage: {db_files:?}"
    );
    let mut cases = 0;
    for file in db_files
        .iter()
        .filter(|f| fs::metadata(f).unwrap().len() > 16)
    {
        let rel = file.strip_prefix(&pristine).unwrap().to_path_buf();
        for (how, frac) in [("truncate", 0.5), ("flip", 0.1), ("flip", 0.6)] {
            cases += 1;
            let _ = fs::remove_dir_all(&m.store);
            assert!(std::process::Command::new("cp")
                .arg("-a")
                .arg(&pristine)
                .arg(&m.store)
                .status()
                .unwrap()
                .success());
            let target = m.store.join(&rel);
            if how == "truncate" {
                let len = fs::metadata(&target).unwrap().len();
                fs::OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .unwrap()
                    .set_len(len / 2)
                    .unwrap();
            } else {
                flip(&target, frac);
            }
            let what = format!("{how} {} at {frac}", rel.display());
            let fsck = churnfs(&["fsck", m.store.to_str().unwrap()]);
            no_panic(&fsck, &what);
            if !fsck.status.success() {
                let err = String::from_utf8_lossy(&fsck.stderr);
                let out = String::from_utf8_lossy(&fsck.stdout);
                assert!(
                    err.lines().count() == 1 || out.contains("problems found"),
                    "{what}: fsck did not say what is wrong in one line:\n{out}{err}"
                );
                let mnt = m.mnt.to_str().unwrap().to_string();
                let mount = churnfs(&["mount", m.store.to_str().unwrap(), &mnt, "--background"]);
                no_panic(&mount, &what);
                if !mount.status.success() {
                    assert_eq!(
                        String::from_utf8_lossy(&mount.stderr).lines().count(),
                        1,
                        "{what}: mount refusal is not one line"
                    );
                    continue;
                }
                // fsck saw problems but the store opens: reads must not lie.
                for (name, data) in &written {
                    if let Ok(got) = fs::read(m.path(name)) {
                        assert!(&got == data, "{what}: {name} reads wrong bytes");
                    }
                }
                let _ = std::process::Command::new("fusermount3")
                    .arg("-u")
                    .arg(&mnt)
                    .status();
                std::thread::sleep(std::time::Duration::from_millis(300));
                continue;
            }
            // Clean: a consistent prefix; every file present is intact.
            m.start();
            for (name, data) in &written {
                if let Ok(got) = fs::read(m.path(name)) {
                    assert!(
                        &got == data,
                        "{what}: {name} reads wrong bytes after a clean fsck"
                    );
                }
            }
            m.unmount();
        }
    }
    println!("corrupt stores: {cases} damage cases (truncations and bit flips of every store file), no panic, no wrong read");
    assert!(
        cases >= 6,
        "only {cases} damage cases: the store layout changed"
    );
}
