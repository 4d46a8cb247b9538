//! Workload sizes: `tiny` (smoke tests, seconds), `quick` (the whole suite in
//! minutes), `reference` (the sizes of WORKLOADS.md), `long` (reference with
//! W2 at 10M iterations).

/// Every workload the suite knows, in report order.
pub const WORKLOADS: &[&str] = &[
    "w1", "w1crash", "w2", "w2b", "w3", "w4", "w5", "w6", "w7", "w8", "w9", "pm",
];

#[derive(Clone, Debug)]
pub struct Size {
    pub name: &'static str,
    pub w1_ns: Vec<u64>,
    pub w2_iters: u64,
    /// W1 (before a larger N), W2 and W6 churn stop after this long on a
    /// slow target.
    pub max_secs: f64,
    pub w3_rounds: u64,
    pub w3_procs: Vec<usize>,
    /// Runs of W3: its phases last seconds, and one run's P=2 swings with
    /// where the scheduler put the callers (bench/README.md).
    pub w3_runs: usize,
    /// fs_mark -n (per thread), -L, -D.
    pub w4: (u64, u64, u64),
    /// Files in the tar, MiB written by dd.
    pub w5: (u64, u64),
    /// Live files, churn cycles.
    pub w6: (u64, u64),
    pub w7_secs: f64,
    /// W8: files the producer creates (it stops at `max_secs`).
    pub w8_files: u64,
    /// W9: small files, directories, large files.
    pub w9: (u64, u64, u64),
    /// Postmark: files, transactions.
    pub pm: (u64, u64),
    /// A workload run taking longer is killed and reported as timed out.
    pub timeout_secs: f64,
    /// Runs of W1, W2 and W6 (long), and of the others (short).
    pub long_runs: usize,
    pub short_runs: usize,
}

impl Size {
    pub fn get(name: &str) -> Option<Size> {
        let reference = Size {
            name: "reference",
            w1_ns: vec![1_000, 10_000, 100_000, 200_000],
            w2_iters: 1_000_000,
            max_secs: 240.0,
            w3_rounds: 60,
            w3_procs: vec![1, 2, 4],
            w3_runs: 5,
            w4: (20_000, 4, 10_000),
            w5: (50_000, 1024),
            w6: (10_000, 1_000_000),
            w7_secs: 5.0,
            w8_files: 20_000,
            w9: (100_000, 100, 100),
            pm: (10_000, 30_000),
            timeout_secs: 3600.0,
            long_runs: 1,
            short_runs: 3,
        };
        match name {
            "tiny" => Some(Size {
                name: "tiny",
                w1_ns: vec![100, 1_000],
                w2_iters: 2_000,
                max_secs: 20.0,
                w3_rounds: 1,
                w3_runs: 1,
                w4: (200, 2, 10),
                w5: (300, 8),
                w6: (100, 1_000),
                w7_secs: 0.3,
                w8_files: 200,
                w9: (500, 5, 1),
                pm: (100, 300),
                timeout_secs: 120.0,
                long_runs: 1,
                short_runs: 1,
                ..reference
            }),
            "quick" => Some(Size {
                name: "quick",
                w1_ns: vec![1_000, 10_000, 30_000],
                w2_iters: 10_000,
                max_secs: 30.0,
                w3_rounds: 2,
                w3_runs: 3,
                w4: (2_000, 2, 100),
                w5: (5_000, 256),
                w6: (1_000, 10_000),
                w7_secs: 1.0,
                w8_files: 2_000,
                w9: (10_000, 100, 4),
                pm: (1_000, 3_000),
                timeout_secs: 600.0,
                long_runs: 3,
                short_runs: 3,
                ..reference
            }),
            "reference" => Some(reference),
            "long" => Some(Size {
                name: "long",
                w2_iters: 10_000_000,
                max_secs: 4.0 * 3600.0,
                timeout_secs: 5.0 * 3600.0,
                ..reference
            }),
            _ => None,
        }
    }

    pub fn runs(&self, workload: &str) -> usize {
        match workload {
            "w1" | "w1crash" | "w2" | "w2b" | "w6" => self.long_runs,
            "w3" => self.w3_runs,
            _ => self.short_runs,
        }
    }

    /// The workload's arguments after `churnfs-bench`, for directory `dir`.
    pub fn args(&self, workload: &str, dir: &str, pid: Option<u32>) -> Vec<String> {
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let s = |x: &str| x.to_string();
        let mut a = match workload {
            "w1" | "w1crash" => vec![
                s("w1"),
                s("--dir"),
                s(dir),
                s("--n"),
                list(&self.w1_ns),
                s("--max-secs"),
                self.max_secs.to_string(),
                // Every level closes about as many files as the largest.
                s("--repeat-to"),
                self.w1_ns.iter().max().copied().unwrap_or(0).to_string(),
            ],
            "w2" | "w2b" => {
                let mut a = vec![s("w2"), s("--dir"), s(dir)];
                a.extend([s("--iters"), self.w2_iters.to_string()]);
                a.extend([s("--max-secs"), self.max_secs.to_string()]);
                if workload == "w2b" {
                    a.push(s("--unlink-first"));
                }
                if let Some(p) = pid {
                    a.extend([s("--pid"), p.to_string()]);
                }
                a
            }
            "w3" => {
                let procs: Vec<u64> = self.w3_procs.iter().map(|&p| p as u64).collect();
                vec![
                    s("w3"),
                    s("--dir"),
                    s(dir),
                    s("--rounds"),
                    self.w3_rounds.to_string(),
                    s("--procs"),
                    list(&procs),
                ]
            }
            "w4" => vec![
                s("w4"),
                s("--dir"),
                s(dir),
                s("--files"),
                self.w4.0.to_string(),
                s("--loops"),
                self.w4.1.to_string(),
                s("--subdirs"),
                self.w4.2.to_string(),
            ],
            "w5" => vec![
                s("w5"),
                s("--dir"),
                s(dir),
                s("--files"),
                self.w5.0.to_string(),
                s("--dd-mib"),
                self.w5.1.to_string(),
            ],
            "w6" => vec![
                s("w6"),
                s("--dir"),
                s(dir),
                s("--live"),
                self.w6.0.to_string(),
                s("--churn"),
                self.w6.1.to_string(),
                s("--max-secs"),
                self.max_secs.to_string(),
            ],
            "w7" => vec![
                s("w7"),
                s("--dir"),
                s(dir),
                s("--secs"),
                self.w7_secs.to_string(),
            ],
            // The suite adds `--other` (the second mount's directory).
            "w8" => vec![
                s("w8"),
                s("--dir"),
                s(dir),
                s("--files"),
                self.w8_files.to_string(),
                s("--max-secs"),
                self.max_secs.to_string(),
            ],
            "w9" => vec![
                s("w9"),
                s("--dir"),
                s(dir),
                s("--files"),
                self.w9.0.to_string(),
                s("--dirs"),
                self.w9.1.to_string(),
                s("--large"),
                self.w9.2.to_string(),
            ],
            "pm" => vec![
                s("pm"),
                s("--dir"),
                s(dir),
                s("--files"),
                self.pm.0.to_string(),
                s("--transactions"),
                self.pm.1.to_string(),
            ],
            other => panic!("unknown workload {other}"),
        };
        if workload == "w1crash" {
            a.push(s("--crash"));
            // A block of data in each file (past churnfs's 2,048 inline
            // bytes): a crash then leaves space to reclaim. An empty file
            // unlinked while open never reaches churnfs's store, so with
            // empty files the reclaim would have nothing to do.
            a.extend([s("--bytes"), s("4096")]);
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_builds_every_workload() {
        for name in ["tiny", "quick", "reference", "long"] {
            let size = Size::get(name).unwrap();
            for w in WORKLOADS {
                assert!(size.args(w, "/x", Some(1)).len() >= 3, "{name} {w}");
                assert!(size.runs(w) >= 1);
            }
        }
        assert_eq!(Size::get("reference").unwrap().w1_ns.last(), Some(&200_000));
        assert!(Size::get("huge").is_none());
    }
}
