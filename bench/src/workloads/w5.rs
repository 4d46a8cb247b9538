//! W5 writeback mix: extract a tar of many small files, write a large file
//! with dd, then `sync`; a thread meanwhile measures the fsync latency of a
//! small file.

use crate::util::{self, Out};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Args {
    pub dir: PathBuf,
    pub files: u64,
    pub dd_mib: u64,
    pub cache: PathBuf,
}

const PER_DIR: u64 = 100;

fn octal(field: &mut [u8], v: u64) {
    let s = format!("{:0width$o}", v, width = field.len() - 1);
    field[..s.len()].copy_from_slice(s.as_bytes());
    field[s.len()] = 0;
}

fn header(name: &str, size: u64, dir: bool) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], if dir { 0o755 } else { 0o644 });
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 1_700_000_000);
    h[156] = if dir { b'5' } else { b'0' };
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| b as u64).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

/// Size of file `i`: 1 to 4 KiB, the same every time.
fn file_size(i: u64) -> u64 {
    1024 + (i * 7919) % 3072
}

/// Writes a ustar archive of `files` small files in directories of 100.
pub fn write_tar(path: &Path, files: u64) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut w = BufWriter::new(std::fs::File::create(&tmp)?);
    let data = vec![b'd'; 4096];
    let pad = [0u8; 512];
    for i in 0..files {
        if i % PER_DIR == 0 {
            w.write_all(&header(&format!("w5/d{:05}/", i / PER_DIR), 0, true))?;
        }
        let size = file_size(i);
        w.write_all(&header(
            &format!("w5/d{:05}/f{i:07}", i / PER_DIR),
            size,
            false,
        ))?;
        w.write_all(&data[..size as usize])?;
        let rem = (size % 512) as usize;
        if rem != 0 {
            w.write_all(&pad[..512 - rem])?;
        }
    }
    w.write_all(&pad)?;
    w.write_all(&pad)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn run_cmd(cmd: &mut Command, what: &str) -> Result<f64, String> {
    let t = Instant::now();
    let o = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!(
            "{what} failed ({}): {}",
            o.status,
            err.lines().last().unwrap_or("").trim()
        ));
    }
    Ok(secs)
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    std::fs::create_dir_all(&a.cache).map_err(|e| format!("{}: {e}", a.cache.display()))?;
    let tar = a.cache.join(format!("w5-{}.tar", a.files));
    if !tar.exists() {
        write_tar(&tar, a.files).map_err(|e| format!("{}: {e}", tar.display()))?;
    }
    out.put("files", a.files);
    out.put("dd_mib", a.dd_mib);

    let stop = Arc::new(AtomicBool::new(false));
    let probe_path = a.dir.join("fsync-probe");
    let probe = {
        let stop = stop.clone();
        let f = std::fs::File::create(&probe_path).map_err(|e| format!("probe: {e}"))?;
        std::thread::spawn(move || {
            let mut lat = Vec::new();
            let mut errors = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let ok = f.write_at(&[b'p'; 100], 0).is_ok() && f.sync_all().is_ok();
                if ok {
                    lat.push(t.elapsed().as_secs_f64() * 1e3);
                } else {
                    errors += 1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (lat, errors)
        })
    };

    let t0 = Instant::now();
    let phases = (|| -> Result<(f64, f64, f64), String> {
        let extract = run_cmd(
            Command::new("tar")
                .arg("-xf")
                .arg(&tar)
                .arg("-C")
                .arg(&a.dir),
            "tar -x",
        )?;
        let big = a.dir.join("big");
        let dd = run_cmd(
            Command::new("dd")
                .arg("if=/dev/zero")
                .arg(format!("of={}", big.display()))
                .args(["bs=1M", &format!("count={}", a.dd_mib), "status=none"]),
            "dd",
        )?;
        let sync = run_cmd(&mut Command::new("sync"), "sync")?;
        Ok((extract, dd, sync))
    })();
    let total = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (mut lat, errors) = probe.join().unwrap_or_default();
    let (extract, dd, sync) = phases?;
    out.num("extract_s", extract);
    out.num("dd_s", dd);
    out.num("sync_s", sync);
    out.num("total_s", total);
    lat.sort_by(f64::total_cmp);
    out.put("fsync_samples", lat.len());
    out.put("fsync_errors", errors);
    if !lat.is_empty() {
        out.num("fsync_p50_ms", util::percentile(&lat, 50.0));
        out.num("fsync_p99_ms", util::percentile(&lat, 99.0));
        out.num("fsync_max_ms", lat[lat.len() - 1]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tar_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let tar = dir.path().join("t.tar");
        super::write_tar(&tar, 150).unwrap();
        let o = std::process::Command::new("tar")
            .arg("-tf")
            .arg(&tar)
            .output()
            .unwrap();
        assert!(o.status.success());
        let names = String::from_utf8(o.stdout).unwrap();
        assert_eq!(names.lines().filter(|l| !l.ends_with('/')).count(), 150);
        assert_eq!(names.lines().filter(|l| l.ends_with('/')).count(), 2);
    }
}
