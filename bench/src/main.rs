//! `churnfs-bench`: the workloads W1..W7 of WORKLOADS.md, each a subcommand
//! that takes a directory on the filesystem under test and prints `key=value`
//! lines, and `suite`, which runs workloads × targets and writes the report.

mod plot;
mod report;
mod sizes;
mod suite;
mod util;
mod workloads;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use workloads::{pm, w1, w2, w3, w4, w5, w6, w7, w8, w9};

#[derive(Parser)]
#[command(name = "churnfs-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.trim()
                .parse()
                .map_err(|_| format!("'{p}' is not a number"))
        })
        .collect()
}

#[derive(Subcommand)]
enum Cmd {
    /// W1 open-unlinked: open N files with no name, hold them, close in order.
    W1 {
        #[arg(long)]
        dir: PathBuf,
        /// Comma-separated file counts, e.g. 1000,10000,100000,200000.
        #[arg(long, value_parser = parse_list::<u64>)]
        n: std::vec::Vec<u64>,
        /// Files one worker process holds at most (default: its descriptor limit).
        #[arg(long)]
        per_proc: Option<u64>,
        /// Bytes written into each file.
        #[arg(long, default_value_t = 0)]
        bytes: usize,
        /// Kill the daemon while the files are held (largest N only), mount
        /// again and wait for the orphans to be reclaimed.
        #[arg(long, requires_all = ["kill_cmd", "remount_cmd", "reclaimed_cmd"])]
        crash: bool,
        /// Shell command that kills the daemon and detaches the mount.
        #[arg(long)]
        kill_cmd: Option<String>,
        /// Shell command that mounts the same filesystem again.
        #[arg(long)]
        remount_cmd: Option<String>,
        /// Shell command that exits 0 once the orphans are reclaimed.
        #[arg(long)]
        reclaimed_cmd: Option<String>,
        #[arg(long, default_value_t = 300.0)]
        reclaim_timeout_secs: f64,
        /// Skip the larger N whose open and close, extrapolated from the
        /// levels done (at their measured growth), would end past this many
        /// seconds after the start.
        #[arg(long)]
        max_secs: Option<f64>,
        /// Repeat each level smaller than this many files (open all, close
        /// all) until it has closed about this many, and report its mean
        /// close cost: a level of 1,000 files closes in about a millisecond,
        /// too short to time once.
        #[arg(long)]
        repeat_to: Option<u64>,
    },
    #[command(hide = true)]
    W1Worker {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        count: u64,
        #[arg(long)]
        tag: String,
        #[arg(long, default_value = "auto")]
        mode: String,
        #[arg(long, default_value_t = 0)]
        bytes: usize,
    },
    /// W2 spool churn: create, write ~100 bytes, close, unlink; M times.
    W2 {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        iters: u64,
        /// Variant B: unlink before the close.
        #[arg(long)]
        unlink_first: bool,
        /// The daemon's PID for its RSS (default: found through the mount).
        #[arg(long)]
        pid: Option<u32>,
        /// Stop after this many seconds (checked every hundredth of the run).
        #[arg(long)]
        max_secs: Option<f64>,
        #[arg(long, default_value_t = 100)]
        bytes: usize,
    },
    /// W3 truncate storm: P processes shrink a 4 KiB file byte by byte, K rounds.
    W3 {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        rounds: u64,
        #[arg(long, value_parser = parse_list::<usize>, default_value = "1,2,4")]
        procs: std::vec::Vec<usize>,
    },
    #[command(hide = true)]
    W3Worker {
        #[arg(long)]
        file: PathBuf,
        #[arg(long)]
        rounds: u64,
    },
    /// W4 small-file create with fs_mark (two directories, two threads).
    W4 {
        #[arg(long)]
        dir: PathBuf,
        /// Files per thread per loop (fs_mark -n).
        #[arg(long)]
        files: u64,
        #[arg(long)]
        loops: u64,
        /// Subdirectories (fs_mark -D).
        #[arg(long)]
        subdirs: u64,
        #[arg(long, default_value = "fs_mark")]
        fs_mark: String,
    },
    /// W5 writeback mix: tar of small files, dd of a large one, sync.
    W5 {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        files: u64,
        #[arg(long)]
        dd_mib: u64,
        /// Where the generated tar is kept between runs.
        #[arg(long, default_value = "/tmp/churnfs-bench-cache")]
        cache: PathBuf,
    },
    /// W6 directory after churn: readdir and stat, churned against fresh.
    W6 {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        live: u64,
        #[arg(long)]
        churn: u64,
        /// Only measure directories made by an earlier run (after a remount).
        #[arg(long)]
        measure_only: bool,
        #[arg(long)]
        max_secs: Option<f64>,
    },
    /// W7 FUSE floor: stat of a missing name and of an existing file.
    W7 {
        #[arg(long)]
        dir: PathBuf,
        /// Seconds for each of the two loops.
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
    },
    /// W8 spool across two mounts of one namespace: files created in DIR
    /// are consumed (read, unlinked) through OTHER.
    W8 {
        #[arg(long)]
        dir: PathBuf,
        /// DIR as the second mount sees it.
        #[arg(long)]
        other: PathBuf,
        #[arg(long)]
        files: u64,
        /// The producer stops creating after this many seconds.
        #[arg(long, default_value_t = 60.0)]
        max_secs: f64,
    },
    /// W9 tree delete: `rm -rf` of a tree of small files (and some large
    /// ones) while W2 runs beside it.
    W9 {
        #[arg(long)]
        dir: PathBuf,
        /// Small files (1 KiB) in the tree.
        #[arg(long)]
        files: u64,
        /// Directories they are spread over.
        #[arg(long, default_value_t = 100)]
        dirs: u64,
        /// Large files (8 MiB).
        #[arg(long, default_value_t = 0)]
        large: u64,
        /// Seconds of W2 alone before the delete.
        #[arg(long, default_value_t = 3.0)]
        w2_secs: f64,
    },
    /// PM postmark: N files, T transactions, all deleted (one directory).
    Pm {
        #[arg(long)]
        dir: PathBuf,
        /// Files made before the transactions (postmark's `number`).
        #[arg(long)]
        files: u64,
        #[arg(long)]
        transactions: u64,
        #[arg(long, default_value = "postmark")]
        postmark: String,
    },
    /// W7's first misses in DIR and in AGAINST (the floor's mount) in
    /// alternating slices: their ratio pair by pair.
    W7Pair {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        against: PathBuf,
        /// Seconds in all, both sides together.
        #[arg(long, default_value_t = 20.0)]
        secs: f64,
        #[arg(long, default_value_t = 1000)]
        slice_ms: u64,
        /// Seconds of new names on each side before the slices.
        #[arg(long, default_value_t = 1.0)]
        warm_secs: f64,
    },
    /// Runs workloads × targets and writes bench/results/<date>-<size>.md.
    Suite(suite::SuiteArgs),
    /// Draws time series from a CSV of `series,x,y` lines as a PNG (log y).
    PlotSeries {
        #[arg(long)]
        csv: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "seconds")]
        x: String,
        #[arg(long)]
        y: String,
    },
}

fn finish(r: Result<util::Out, String>) -> ExitCode {
    match r {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            let e = e.replace('\n', " ");
            println!("error={e}");
            eprintln!("churnfs-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::W1 {
            dir,
            n,
            per_proc,
            bytes,
            crash,
            kill_cmd,
            remount_cmd,
            reclaimed_cmd,
            reclaim_timeout_secs,
            max_secs,
            repeat_to,
        } => {
            let crash = crash.then(|| w1::Crash {
                kill_cmd: kill_cmd.unwrap_or_default(),
                remount_cmd: remount_cmd.unwrap_or_default(),
                reclaimed_cmd: reclaimed_cmd.unwrap_or_default(),
                reclaim_timeout: Duration::from_secs_f64(reclaim_timeout_secs),
            });
            // The crash variant is measured at the largest N only.
            let ns = if crash.is_some() {
                n.iter().max().copied().into_iter().collect()
            } else {
                n
            };
            finish(w1::run(w1::Args {
                dir,
                ns,
                per_proc,
                bytes,
                crash,
                max_secs,
                repeat_to: repeat_to.unwrap_or(0),
            }))
        }
        Cmd::W1Worker {
            dir,
            count,
            tag,
            mode,
            bytes,
        } => {
            let mode = w1::Mode::parse(&mode).unwrap_or(w1::Mode::Auto);
            ExitCode::from(w1::worker(&dir, count, &tag, mode, bytes) as u8)
        }
        Cmd::W2 {
            dir,
            iters,
            unlink_first,
            pid,
            max_secs,
            bytes,
        } => finish(w2::run(w2::Args {
            dir,
            iters,
            unlink_first,
            pid,
            max_secs,
            bytes,
        })),
        Cmd::W3 { dir, rounds, procs } => finish(w3::run(w3::Args { dir, rounds, procs })),
        Cmd::W3Worker { file, rounds } => ExitCode::from(w3::worker(&file, rounds) as u8),
        Cmd::W4 {
            dir,
            files,
            loops,
            subdirs,
            fs_mark,
        } => finish(w4::run(w4::Args {
            dir,
            files,
            loops,
            subdirs,
            fs_mark,
        })),
        Cmd::W5 {
            dir,
            files,
            dd_mib,
            cache,
        } => finish(w5::run(w5::Args {
            dir,
            files,
            dd_mib,
            cache,
        })),
        Cmd::W6 {
            dir,
            live,
            churn,
            measure_only,
            max_secs,
        } => finish(w6::run(w6::Args {
            dir,
            live,
            churn,
            measure_only,
            max_secs,
        })),
        Cmd::W7 { dir, secs } => finish(w7::run(w7::Args { dir, secs })),
        Cmd::W8 {
            dir,
            other,
            files,
            max_secs,
        } => finish(w8::run(w8::Args {
            dir,
            other,
            files,
            max_secs,
        })),
        Cmd::W9 {
            dir,
            files,
            dirs,
            large,
            w2_secs,
        } => finish(w9::run(w9::Args {
            dir,
            files,
            dirs,
            large,
            w2_secs,
        })),
        Cmd::Pm {
            dir,
            files,
            transactions,
            postmark,
        } => finish(pm::run(pm::Args {
            dir,
            files,
            transactions,
            postmark,
        })),
        Cmd::W7Pair {
            dir,
            against,
            secs,
            slice_ms,
            warm_secs,
        } => finish(w7::run_pair(w7::PairArgs {
            dir,
            against,
            secs,
            slice_ms,
            warm_secs,
        })),
        Cmd::Suite(args) => suite::main(args),
        Cmd::PlotSeries {
            csv,
            out,
            title,
            x,
            y,
        } => match plot::series_csv(&csv, &out, &title, &x, &y) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("churnfs-bench: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
