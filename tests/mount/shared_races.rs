//! Two mounts racing in one volume: creates in one directory from both
//! never lose or duplicate a name; exclusive creates of the same names
//! succeed exactly once each; renames racing back and forth leave each
//! file exactly once.

use crate::support::Volume;
use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

fn names(dir: &PathBuf) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[test]
fn two_mounts_creating_and_renaming_in_one_directory_lose_nothing() {
    let vol = Volume::new(3);
    let a = vol.mount("entry_ttl_ms=0,attr_ttl_ms=0,negative_ttl_ms=0");
    let b = vol.mount("entry_ttl_ms=0,attr_ttl_ms=0,negative_ttl_ms=0");
    fs::create_dir(a.path("spool")).unwrap();
    fs::create_dir(a.path("other")).unwrap();
    const N: usize = 150;

    // Distinct names from both mounts, two threads each.
    let mut hs = Vec::new();
    for (m, tag) in [(a.mnt.clone(), "a"), (b.mnt.clone(), "b")] {
        for t in 0..2 {
            let d = m.join("spool");
            hs.push(thread::spawn(move || {
                for i in 0..N {
                    fs::write(d.join(format!("{tag}{t}-{i}")), format!("{tag}{t}{i}")).unwrap();
                }
            }));
        }
    }
    for h in hs {
        h.join().unwrap();
    }
    let want: BTreeSet<String> = ["a", "b"]
        .iter()
        .flat_map(|tag| (0..2).flat_map(move |t| (0..N).map(move |i| format!("{tag}{t}-{i}"))))
        .collect();
    assert_eq!(names(&a.path("spool")), want, "mount a's listing");
    assert_eq!(names(&b.path("spool")), want, "mount b's listing");

    // The same names, exclusively, from both: each made exactly once.
    let mut hs = Vec::new();
    for m in [a.mnt.clone(), b.mnt.clone()] {
        let d = m.join("other");
        hs.push(thread::spawn(move || {
            let mut won = 0;
            for i in 0..N {
                let r = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(d.join(format!("x{i}")));
                match r {
                    Ok(_) => won += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => panic!("exclusive create: {e}"),
                }
            }
            won
        }));
    }
    let won: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(won, N, "exclusive creates won {won} times for {N} names");
    assert_eq!(names(&b.path("other")).len(), N);

    // Renames racing: a moves spool/a0-i to other/, b moves it back.
    let mut hs = Vec::new();
    for (m, from, to) in [
        (a.mnt.clone(), "spool", "other"),
        (b.mnt.clone(), "other", "spool"),
    ] {
        hs.push(thread::spawn(move || {
            for _round in 0..3 {
                for i in 0..N {
                    let n = format!("a0-{i}");
                    match fs::rename(m.join(from).join(&n), m.join(to).join(&n)) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => panic!("rename: {e}"),
                    }
                }
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    let s = names(&a.path("spool"));
    let o = names(&a.path("other"));
    for i in 0..N {
        let n = format!("a0-{i}");
        assert!(
            s.contains(&n) ^ o.contains(&n),
            "{n} is in {} places after the race",
            s.contains(&n) as u8 + o.contains(&n) as u8
        );
        let p = if s.contains(&n) {
            a.path("spool")
        } else {
            a.path("other")
        };
        assert_eq!(fs::read_to_string(p.join(&n)).unwrap(), format!("a0{i}"));
    }
    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}
