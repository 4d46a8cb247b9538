//! PM postmark: the mail-server benchmark (Debian package `postmark`) in
//! one directory: N files of 500 B to 10 KB, then T transactions (each a
//! create or delete paired with a read or append), then every file
//! deleted. Postmark times itself in whole seconds, so the run is timed
//! here; its own counts of files created, read, appended and deleted are
//! reported beside the wall time.

use crate::util::{self, Out};
use std::path::PathBuf;
use std::process::Command;

pub struct Args {
    pub dir: PathBuf,
    pub files: u64,
    pub transactions: u64,
    pub postmark: String,
}

/// The first number of postmark's line `\t<n> <what> (...)`, for each
/// `what` asked for, in that order.
pub fn parse_counts(text: &str, what: &[&str]) -> Vec<Option<u64>> {
    what.iter()
        .map(|w| {
            text.lines().find_map(|l| {
                let mut it = l.split_whitespace();
                let n = it.next()?.parse().ok()?;
                (it.next()? == *w).then_some(n)
            })
        })
        .collect()
}

pub fn run(a: Args) -> Result<Out, String> {
    let Some(prog) = crate::workloads::w4::which(&a.postmark) else {
        util::skip("postmark is not installed (Debian package postmark; bench/install.sh)");
    };
    let mut out = Out::default();
    let dir = a.dir.join("postmark");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let config = format!(
        "set location {}\nset number {}\nset transactions {}\nset seed 42\nrun\nquit\n",
        dir.display(),
        a.files,
        a.transactions
    );
    let cfg = std::env::temp_dir().join(format!("churnfs-bench-pm-{}.cfg", std::process::id()));
    std::fs::write(&cfg, &config).map_err(|e| format!("{}: {e}", cfg.display()))?;
    out.put(
        "command",
        format!(
            "postmark CONFIG (set location {}; set number {}; set transactions {}; set seed 42; run)",
            dir.display(),
            a.files,
            a.transactions
        ),
    );
    let res = util::run_tool(Command::new(&prog).arg(&cfg), "postmark");
    let _ = std::fs::remove_file(&cfg);
    let (text, wall) = res?;
    let c = parse_counts(&text, &["created", "read", "appended", "deleted"]);
    let [Some(created), Some(read), Some(appended), Some(deleted)] = c[..] else {
        return Err("postmark printed no file counts".into());
    };
    // Postmark deletes what it made: anything left is a lost delete.
    let left = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .count();
    if left != 0 {
        return Err(format!("{left} files left after postmark's last phase"));
    }
    out.put("files", a.files);
    out.put("transactions", a.transactions);
    out.num("wall_s", wall);
    out.num("files_per_s", (created + deleted) as f64 / wall);
    out.put("created", created);
    out.put("read", read);
    out.put("appended", appended);
    out.put("deleted", deleted);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_postmark_counts() {
        let text = "Time:\n\t1 seconds total\n\t1 seconds of transactions (3000 per second)\n\nFiles:\n\t2458 created (2458 per second)\n\t\tCreation alone: 1000 files (1000 per second)\n\t1511 read (1511 per second)\n\t1485 appended (1485 per second)\n\t2458 deleted (2458 per second)\n";
        let got = super::parse_counts(text, &["created", "read", "appended", "deleted", "moved"]);
        assert_eq!(
            got,
            vec![Some(2458), Some(1511), Some(1485), Some(2458), None]
        );
    }
}
