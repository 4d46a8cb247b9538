//! kill -9 of the daemon at random moments during churn with periodic
//! fsyncs: after each kill the store must pass fsck, and every file whose
//! fsync returned must be intact after the next mount.

use crate::support::Mount;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ROUNDS: u32 = 20;

struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn body(round: u32, i: u32) -> Vec<u8> {
    format!("round {round} file {i}\n")
        .repeat(1 + (i % 400) as usize)
        .into_bytes()
}

#[test]
fn kill9_during_churn_loses_no_fsynced_file() {
    let seed = std::env::var("KILL9_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::process::id() as u64 * 0x9E37_79B9 + 1);
    println!("kill9 seed {seed} (replay with KILL9_SEED={seed})");
    let mut rng = Rng(seed);
    let mut m = Mount::new("commit_interval_ms=50");
    // name → contents, for every file whose fsync returned and that is still meant to exist.
    let durable: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
    for round in 0..ROUNDS {
        // Files go into a subdirectory, so that a write racing the kill
        // cannot land in the bare mountpoint once the mount is detached.
        let _ = fs::create_dir(m.path("w"));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (stop, durable, mnt) = (stop.clone(), durable.clone(), m.path("w"));
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("r{round:02}_{i:05}");
                    let data = body(round, i);
                    let r = (|| -> std::io::Result<()> {
                        let mut f = fs::File::create(mnt.join(&name))?;
                        f.write_all(&data)?;
                        if i.is_multiple_of(5) {
                            f.sync_all()?;
                            durable.lock().unwrap().insert(name.clone(), data.clone());
                        }
                        if i % 7 == 3 {
                            // Churn: remove an older, never-fsynced file.
                            let old = format!("r{round:02}_{:05}", i - 2);
                            if !durable.lock().unwrap().contains_key(&old) {
                                fs::remove_file(mnt.join(old))?;
                            }
                        }
                        Ok(())
                    })();
                    if r.is_err() {
                        return; // the daemon is gone
                    }
                    i += 1;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(30 + rng.next_u64() % 300));
        m.kill9();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        m.assert_fsck_clean();
        m.start();
        for (name, data) in durable.lock().unwrap().iter() {
            let got = fs::read(m.path("w").join(name))
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {name} lost: {e}"));
            assert!(got == *data, "seed {seed} round {round}: {name} changed");
        }
    }
    let n = durable.lock().unwrap().len();
    assert!(
        n > ROUNDS as usize,
        "only {n} fsynced files in {ROUNDS} rounds: the test did not exercise fsync"
    );
    m.unmount();
    m.assert_fsck_clean();
}
