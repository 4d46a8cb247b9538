//! W4 small-file create: `fs_mark -S0 -s 0 -D D -L L -n N -d A -d B` (two
//! threads, no sync, empty files), files/s per loop and in total.

use crate::util::{self, Out};
use std::path::PathBuf;
use std::process::Command;

pub struct Args {
    pub dir: PathBuf,
    pub files: u64,
    pub loops: u64,
    pub subdirs: u64,
    pub fs_mark: String,
}

/// The program path if `name` is on PATH (or is a path that exists).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The Files/sec column of fs_mark's result rows (rows of numbers only).
pub fn parse_rates(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let cols: Vec<f64> = l
                .split_whitespace()
                .map(str::parse::<f64>)
                .collect::<Result<_, _>>()
                .ok()?;
            (cols.len() >= 5).then(|| cols[3])
        })
        .collect()
}

pub fn run(a: Args) -> Result<Out, String> {
    let Some(prog) = which(&a.fs_mark) else {
        util::skip("fs_mark is not installed (Debian package fsmark; bench/install.sh)");
    };
    let mut out = Out::default();
    let da = a.dir.join("A");
    let db = a.dir.join("B");
    for d in [&da, &db] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    // fs_mark refuses directory names of 40 bytes or more, so it runs in the
    // target directory with relative names; its log goes to /tmp.
    let log = std::env::temp_dir().join(format!("churnfs-bench-fsmark-{}.log", std::process::id()));
    let mut cmd = Command::new(&prog);
    cmd.current_dir(&a.dir)
        .args(["-S0", "-s", "0", "-D", &a.subdirs.to_string()])
        .args(["-L", &a.loops.to_string(), "-n", &a.files.to_string()])
        .args(["-d", "A", "-d", "B", "-l"])
        .arg(&log);
    out.put(
        "command",
        format!(
            "cd {} && fs_mark -S0 -s 0 -D {} -L {} -n {} -d A -d B -l {}",
            a.dir.display(),
            a.subdirs,
            a.loops,
            a.files,
            log.display()
        ),
    );
    let res = util::run_tool(&mut cmd, "fs_mark");
    let _ = std::fs::remove_file(&log);
    let (text, wall) = res?;
    let rates = parse_rates(&text);
    if rates.is_empty() {
        return Err("fs_mark printed no result rows".into());
    }
    for (i, r) in rates.iter().enumerate() {
        out.num(format!("loop{}_files_per_s", i + 1), *r);
    }
    out.num(
        "files_per_s",
        rates.iter().sum::<f64>() / rates.len() as f64,
    );
    let total = a.files * 2 * a.loops;
    out.put("files_total", total);
    out.num("wall_s", wall);
    out.num("files_per_s_wall", total as f64 / wall);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_fs_mark_rows() {
        let text = "#  fs_mark -S0\n\nFSUse%        Count         Size    Files/sec     App Overhead\n    69          400            0       4043.0             4423\n    69          800            0       4487.9             5813\n";
        assert_eq!(super::parse_rates(text), vec![4043.0, 4487.9]);
    }
}
