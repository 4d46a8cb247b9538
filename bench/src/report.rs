//! The Markdown report: what was measured where, one table per workload with
//! medians (min–max) and the ratio of churnfs to each peer, history ratios,
//! and the plots.

use crate::sizes::Size;
use crate::suite::{kind_of, Kind};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Skipped(String),
    Failed(String),
}

pub struct Record {
    pub workload: String,
    pub target: String,
    pub run: usize,
    pub status: Status,
    pub kv: Vec<(String, String)>,
}

pub struct TargetInfo {
    pub name: String,
    pub desc: String,
    pub version: String,
    pub unavailable: Option<String>,
}

pub struct Meta {
    pub date: String,
    pub size: Size,
    pub machine: String,
    pub kernel: String,
    pub commit: String,
    pub suite_command: String,
    pub commands: Vec<(String, String)>,
    pub targets: Vec<TargetInfo>,
    pub workloads: Vec<String>,
    pub elapsed_s: f64,
    pub interrupted: bool,
    /// Folder of the plots, relative to the report.
    pub plot_dir: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Better {
    High,
    Low,
}

pub struct Col {
    pub key: String,
    pub label: String,
    pub better: Better,
}

fn col(key: impl Into<String>, label: impl Into<String>, better: Better) -> Col {
    Col {
        key: key.into(),
        label: label.into(),
        better,
    }
}

pub fn short_n(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// The workload's id as the tables show it.
pub fn short_title(w: &str) -> &'static str {
    match w {
        "w1" => "W1",
        "w1crash" => "W1 crash",
        "w2" => "W2",
        "w2b" => "W2B",
        "w3" => "W3",
        "w4" => "W4",
        "w5" => "W5",
        "w6" => "W6",
        "w7" => "W7",
        "w8" => "W8",
        "w9" => "W9",
        "pm" => "PM",
        _ => "?",
    }
}

pub fn title(w: &str) -> &'static str {
    match w {
        "w1" => "W1 open-unlinked",
        "w1crash" => "W1 open-unlinked at the largest N, daemon killed while the files are open",
        "w2" => "W2 spool churn (close, then unlink)",
        "w2b" => "W2 spool churn, variant B (unlink, then close)",
        "w3" => "W3 truncate storm",
        "w4" => "W4 small-file create (fs_mark)",
        "w5" => "W5 writeback mix",
        "w6" => "W6 directory after churn",
        "w7" => "W7 FUSE floor (stat)",
        "w8" => "W8 spool across two mounts (create on one, read and unlink on the other)",
        "w9" => "W9 tree delete (rm -rf beside W2)",
        "pm" => "PM postmark (files made, transactions, all deleted)",
        _ => "unknown workload",
    }
}

/// The table's columns; the first is the headline the ratio is taken on.
pub fn columns(w: &str, size: &Size) -> Vec<Col> {
    use Better::*;
    let ns = &size.w1_ns;
    let (lo, hi) = (
        ns.first().copied().unwrap_or(0),
        ns.last().copied().unwrap_or(0),
    );
    match w {
        "w1" => {
            let mut v = vec![col(
                format!("n{hi}_close_us_per_file"),
                format!("close µs/file, N={}", short_n(hi)),
                Low,
            )];
            for &n in ns.iter().rev().skip(1) {
                v.push(col(
                    format!("n{n}_close_us_per_file"),
                    format!("close µs/file, N={}", short_n(n)),
                    Low,
                ));
            }
            v.push(col(
                "close_cost_ratio",
                format!("close cost N={} / N={}", short_n(hi), short_n(lo)),
                Low,
            ));
            // Rates at the largest N, and at the smallest too: the level
            // every target can hold (passthrough_ll stops near 10,000 open
            // files).
            let levels = if lo != hi { vec![hi, lo] } else { vec![hi] };
            for n in levels {
                for (key, label) in [("open", "opens"), ("close", "closes")] {
                    v.push(col(
                        format!("n{n}_{key}_per_s"),
                        format!("{label}/s, N={}", short_n(n)),
                        High,
                    ));
                }
            }
            v.push(col("umount_s", "umount s", Low));
            v.push(col("daemon_exit_s", "daemon exit s", Low));
            v
        }
        "w1crash" => vec![
            col("crash_reclaim_s", "reclaimed s after remount start", Low),
            col("crash_remount_s", "remount s", Low),
            col("crash_kill_s", "kill + detach s", Low),
            col("crash_open_s", "open s", Low),
            col("crash_recovered_unlinked", "recovered orphans", High),
        ],
        "w2" | "w2b" => vec![
            col("rate", "ops/s", High),
            col("tenth1", "first tenth ops/s", High),
            col("tenth10", "last tenth ops/s", High),
            col("last_over_first", "last / first tenth", High),
            col("rss_kb_added", "daemon RSS added KiB", Low),
            col("rss_kb_added_after_warm", "RSS added after warm KiB", Low),
            col("neg_dentries_added", "neg. dentries added", Low),
            col(
                "neg_dentries_of_mount",
                "mount's neg. dentries at umount",
                Low,
            ),
            col("sreclaimable_kb_added", "SReclaimable added KiB", Low),
            col("umount_s", "umount s", Low),
            col("daemon_exit_s", "daemon exit s", Low),
        ],
        "w3" => {
            let mut v = Vec::new();
            for &p in &size.w3_procs {
                v.push(col(
                    format!("p{p}_truncates_per_s"),
                    format!("truncates/s P={p}"),
                    High,
                ));
            }
            for &p in &size.w3_procs {
                v.push(col(format!("p{p}_secs"), format!("wall s P={p}"), Low));
            }
            for &p in size.w3_procs.iter().skip(1) {
                v.push(col(
                    format!("p{p}_over_p1"),
                    format!("P={p} / P=1 time"),
                    Low,
                ));
            }
            v
        }
        "w4" => vec![
            col("files_per_s", "files/s (fs_mark, mean of loops)", High),
            col("files_per_s_wall", "files/s (wall)", High),
            col("wall_s", "wall s", Low),
        ],
        "w5" => vec![
            col("total_s", "total s", Low),
            col("extract_s", "tar -x s", Low),
            col("dd_s", "dd s", Low),
            col("sync_s", "sync s", Low),
            col("fsync_p50_ms", "fsync p50 ms", Low),
            col("fsync_p99_ms", "fsync p99 ms", Low),
        ],
        "w6" => vec![
            col("stat_ratio", "stat churned / fresh", Low),
            col("readdir_ratio", "ls -f churned / fresh", Low),
            col("remount_stat_ratio", "stat ratio after remount", Low),
            col("remount_readdir_ratio", "ls -f ratio after remount", Low),
            col("churned_stat_ms", "stat all, churned ms", Low),
            col("fresh_stat_ms", "stat all, fresh ms", Low),
            col("churn_per_s", "churn cycles/s", High),
        ],
        "w8" => vec![
            col("files_per_s", "files/s through the spool", High),
            col("visible_p50_ms", "create to visible, median ms", Low),
            col("visible_p99_ms", "create to visible, p99 ms", Low),
            col("lost", "files lost", Low),
            col("duplicated", "files read again after unlink", Low),
        ],
        "w9" => vec![
            col("rm_files_per_s", "rm -rf files/s", High),
            col("rm_s", "rm -rf s", Low),
            col("drain_s", "backlog drained s", Low),
            col("w2_beside_ratio", "W2 beside / alone", High),
            col("w2_alone", "W2 alone ops/s", High),
            col("build_s", "tree built s", Low),
        ],
        "pm" => vec![
            col("wall_s", "postmark s", Low),
            col("files_per_s", "files created and deleted /s", High),
        ],
        "w7" => vec![
            col("missing_per_s", "stat missing /s", High),
            col("existing_per_s", "stat existing /s", High),
            col("missing_us", "µs per missing stat", Low),
            col("existing_us", "µs per existing stat", Low),
            col(
                "fresh_missing_us",
                "µs per first miss, first 5,000 names",
                Low,
            ),
            col(
                "first_missing_us",
                "µs per first miss (new name each call)",
                Low,
            ),
        ],
        _ => Vec::new(),
    }
}

/// What the runs of one workload on one target gave.
#[derive(Default)]
pub struct Agg {
    pub runs: usize,
    pub ok: usize,
    pub values: BTreeMap<String, Vec<f64>>,
    pub text: BTreeMap<String, String>,
    pub skipped: Option<String>,
    pub failed: Option<String>,
}

impl Agg {
    pub fn median(&self, key: &str) -> Option<f64> {
        let v = self.values.get(key)?;
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        })
    }

    pub fn range(&self, key: &str) -> Option<(f64, f64)> {
        let v = self.values.get(key)?;
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }
}

pub fn aggregate(records: &[Record], w: &str, t: &str) -> Agg {
    let mut a = Agg::default();
    for r in records.iter().filter(|r| r.workload == w && r.target == t) {
        a.runs += 1;
        match &r.status {
            Status::Ok => {
                a.ok += 1;
                for (k, v) in &r.kv {
                    match v.parse::<f64>() {
                        Ok(x) => a.values.entry(k.clone()).or_default().push(x),
                        Err(_) => {
                            a.text.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            Status::Skipped(why) => a.skipped = Some(why.clone()),
            Status::Failed(why) => {
                if a.failed.is_none() {
                    a.failed = Some(why.clone());
                }
            }
        }
    }
    a
}

/// A number for a table: grouped digits for large values, three significant
/// digits for small ones.
pub fn fmt_val(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 10_000.0 {
        let s = format!("{:.0}", a);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 {
            format!("-{out}")
        } else {
            out
        }
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a == 0.0 {
        "0".into()
    } else {
        let digits = (-a.log10().floor()) as usize + 2;
        format!("{v:.digits$}")
    }
}

fn cell(a: &Agg, key: &str) -> String {
    let Some(m) = a.median(key) else {
        return "–".into();
    };
    match a.range(key) {
        Some((lo, hi)) if a.values[key].len() > 1 && lo != hi => {
            format!("{} ({}–{})", fmt_val(m), fmt_val(lo), fmt_val(hi))
        }
        _ => fmt_val(m),
    }
}

/// The churnfs target the peers are compared with: churnfs in shared mode
/// when the run has it with a result for `w` (its peers are the shared
/// filesystems), else the first local churnfs target (store on tmpfs before
/// store on disk) with one.
pub fn reference_target(records: &[Record], w: &str, targets: &[String]) -> Option<String> {
    [Kind::Shared, Kind::Churnfs].iter().find_map(|k| {
        targets
            .iter()
            .filter(|t| kind_of(t) == *k)
            .find(|t| aggregate(records, w, t).ok > 0)
            .cloned()
    })
}

fn notes(a: &Agg, w: &str, size: &Size) -> String {
    let mut n = Vec::new();
    if a.ok == 0 {
        if let Some(why) = a.failed.as_ref().or(a.skipped.as_ref()) {
            let verb = if a.failed.is_some() { "failed: " } else { "" };
            n.push(format!("{verb}{why}"));
        }
    } else if a.ok < a.runs {
        n.push(format!(
            "{} of {} runs failed: {}",
            a.runs - a.ok,
            a.runs,
            a.failed.clone().unwrap_or_default()
        ));
    }
    if a.ok > 0 {
        if let Some(m) = a.text.get("mode") {
            if m != "tmpfile" {
                n.push("O_TMPFILE refused: create + unlink".into());
            }
        }
        if w == "w1" {
            if let (Some(at), Some(why)) = (a.median("failed_at_n"), a.text.get("failed_why")) {
                n.push(format!(
                    "N ≥ {} failed: {}",
                    fmt_val(at),
                    why.replace('_', " ")
                ));
            }
            if let (Some(c), Some(p)) =
                (a.median("capped_before_n"), a.median("capped_predicted_s"))
            {
                // The cap is on the whole workload: what the smaller levels
                // spent counts with what N would take.
                let spent = a
                    .median("capped_spent_s")
                    .map(|s| format!(" after the {} s the smaller N took", fmt_val(s)))
                    .unwrap_or_default();
                n.push(format!(
                    "N ≥ {} not run: at the growth measured so far it would take about {} s more{spent}, past the time cap of {} s",
                    fmt_val(c),
                    fmt_val(p),
                    fmt_val(size.max_secs)
                ));
            }
        }
        if matches!(w, "w2" | "w2b") {
            if let Some(d) = a.median("done") {
                if d < size.w2_iters as f64 {
                    n.push(format!(
                        "stopped by the time cap after {} of {} iterations",
                        fmt_val(d),
                        fmt_val(size.w2_iters as f64)
                    ));
                }
            }
        }
        if w == "w6" {
            if let Some(d) = a.median("churn") {
                if d < size.w6.1 as f64 {
                    n.push(format!(
                        "churn stopped by the time cap after {} cycles",
                        fmt_val(d)
                    ));
                }
            }
            if let Some(note) = a.text.get("remount_note") {
                n.push(note.clone());
            }
        }
        if a.ok > 1 {
            n.push(format!("{} runs", a.ok));
        }
    }
    n.join("; ").replace('|', "/")
}

/// One line for the progress output: the headline of a finished run.
pub fn summary_line(w: &str, kv: &[(String, String)]) -> String {
    let keys: &[&str] = match w {
        "w1" => &["close_cost_ratio", "mode"],
        "w1crash" => &["crash_remount_s", "crash_reclaim_s"],
        "w2" | "w2b" => &["rate", "last_over_first", "umount_s"],
        "w3" => &["p1_truncates_per_s", "p4_over_p1"],
        "w4" => &["files_per_s"],
        "w5" => &["total_s", "fsync_p99_ms"],
        "w6" => &["stat_ratio", "remount_stat_ratio"],
        "w7" => &["missing_per_s", "existing_per_s"],
        "w8" => &["files_per_s", "visible_p99_ms", "lost", "duplicated"],
        "w9" => &["rm_s", "drain_s", "w2_beside_ratio"],
        "pm" => &["wall_s", "files_per_s"],
        _ => &[],
    };
    let mut parts = Vec::new();
    for k in keys {
        if let Some((_, v)) = kv.iter().rev().find(|(a, _)| a == k) {
            parts.push(format!("{k}={v}"));
        }
    }
    if let Some((_, v)) = kv.iter().find(|(a, _)| a.ends_with("_close_us_per_file")) {
        parts.insert(0, format!("first_close_us_per_file={v}"));
    }
    parts.join(" ")
}

/// Every run's lines: `workload target run key=value`.
pub fn raw(records: &[Record]) -> String {
    let mut s = String::new();
    for r in records {
        let st = match &r.status {
            Status::Ok => "ok".to_string(),
            Status::Skipped(w) => format!("skipped {w}"),
            Status::Failed(w) => format!("failed {w}"),
        };
        let _ = writeln!(s, "{} {} {} status={st}", r.workload, r.target, r.run);
        for (k, v) in &r.kv {
            let _ = writeln!(s, "{} {} {} {k}={v}", r.workload, r.target, r.run);
        }
    }
    s
}

fn ratio_cell(refv: Option<f64>, v: Option<f64>) -> String {
    match (refv, v) {
        (Some(r), Some(v)) if v != 0.0 => format!("{}×", fmt_val(r / v)),
        _ => "–".into(),
    }
}

pub fn markdown(meta: &Meta, records: &[Record], plots: &[(String, String)]) -> String {
    let targets: Vec<String> = meta.targets.iter().map(|t| t.name.clone()).collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# churnfs benchmark, size `{}`, {}\n",
        meta.size.name, meta.date
    );
    if meta.interrupted {
        let _ = writeln!(
            s,
            "**Interrupted: this report holds the runs done before the stop.**\n"
        );
    }
    let _ = writeln!(s, "- machine: {}", meta.machine);
    let _ = writeln!(s, "- kernel: `{}`", meta.kernel);
    let _ = writeln!(s, "- commit: `{}`", meta.commit);
    let _ = writeln!(s, "- suite command: `{}`", meta.suite_command);
    let _ = writeln!(
        s,
        "- suite time: {:.0} s; every run mounts its target fresh and tears it down after",
        meta.elapsed_s
    );
    let _ = writeln!(
        s,
        "- cells are medians with (min–max) over the runs; ratios compare medians of \
         the same suite run: `churnfs/peer` is the churnfs value over the peer's \
         (for rates above 1× is better for churnfs, for times and costs below 1× is); \
         ↑ marks a column where higher is better, ↓ one where lower is\n"
    );

    let _ = writeln!(s, "## Targets\n");
    let _ = writeln!(s, "| target | what | version | status |");
    let _ = writeln!(s, "|---|---|---|---|");
    for t in &meta.targets {
        let st = t
            .unavailable
            .as_ref()
            .map_or("ran".to_string(), |w| format!("cannot run here: {w}"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            t.name,
            t.desc.replace('|', "/"),
            t.version.replace('|', "/"),
            st.replace('|', "/")
        );
    }
    let _ = writeln!(s);

    // At a glance: the headline of every workload per target.
    let _ = writeln!(s, "## At a glance\n");
    let mut head = String::from("| target |");
    let mut sep = String::from("|---|");
    for w in &meta.workloads {
        if let Some(c) = columns(w, &meta.size).first() {
            let _ = write!(head, " {} {} |", short_title(w), c.label);
            sep.push_str("---|");
        }
    }
    let _ = writeln!(s, "{head}\n{sep}");
    for t in &targets {
        let mut row = format!("| {t} |");
        for w in &meta.workloads {
            let Some(c) = columns(w, &meta.size).into_iter().next() else {
                continue;
            };
            let a = aggregate(records, w, t);
            let v = a.median(&c.key);
            let reference = reference_target(records, w, &targets);
            let refv = reference
                .as_ref()
                .and_then(|r| aggregate(records, w, r).median(&c.key));
            let txt = match v {
                Some(v) if reference.as_deref() != Some(t.as_str()) && refv.is_some() => {
                    format!("{} ({})", fmt_val(v), ratio_cell(refv, Some(v)))
                }
                Some(v) => fmt_val(v),
                None if a.skipped.is_some() && a.failed.is_none() => "n/a".into(),
                None if a.runs == 0 => " ".into(),
                // Ran, but stopped before the headline's level (W1).
                None if a.ok > 0 => "partial".into(),
                None => "failed".into(),
            };
            let _ = write!(row, " {txt} |");
        }
        let _ = writeln!(s, "{row}");
    }
    let _ = writeln!(
        s,
        "\nIn parentheses: churnfs/peer. `n/a`: the workload does not apply; `partial`: it stopped \
         before the headline's level (see its table).\n"
    );

    // History ratios: does the cost grow with what came before?
    let _ = writeln!(s, "## History ratios (1 means no memory of the past)\n");
    let hist: Vec<(&str, &str, &str)> = vec![
        (
            "w1",
            "close_cost_ratio",
            "W1 close cost, largest N / smallest N",
        ),
        ("w2", "last_over_first", "W2 rate, last tenth / first tenth"),
        (
            "w2b",
            "last_over_first",
            "W2B rate, last tenth / first tenth",
        ),
        ("w6", "stat_ratio", "W6 stat time, churned / fresh"),
        ("w6", "readdir_ratio", "W6 ls -f time, churned / fresh"),
        (
            "w6",
            "remount_stat_ratio",
            "W6 stat, churned / fresh, after remount",
        ),
    ]
    .into_iter()
    .filter(|(w, _, _)| meta.workloads.iter().any(|x| x == w))
    .collect();
    if hist.is_empty() {
        let _ = writeln!(s, "(no workload with a history ratio was run)\n");
    } else {
        let mut head = String::from("| target |");
        let mut sep = String::from("|---|");
        for (_, _, label) in &hist {
            let _ = write!(head, " {label} |");
            sep.push_str("---|");
        }
        let _ = writeln!(s, "{head}\n{sep}");
        for t in &targets {
            let mut row = format!("| {t} |");
            for (w, k, _) in &hist {
                let a = aggregate(records, w, t);
                let _ = write!(row, " {} |", cell(&a, k));
            }
            let _ = writeln!(s, "{row}");
        }
        let _ = writeln!(s);
    }

    for w in &meta.workloads {
        let cols = columns(w, &meta.size);
        let _ = writeln!(s, "## {}\n", title(w));
        if let Some((_, c)) = meta.commands.iter().find(|(x, _)| x == w) {
            let _ = writeln!(s, "`{c}`\n");
        }
        // A workload that runs another program names its command line.
        let inner = records
            .iter()
            .filter(|r| r.workload == *w)
            .find_map(|r| r.kv.iter().find(|(k, _)| k == "command"));
        if let Some((_, c)) = inner {
            let _ = writeln!(s, "which runs, for example: `{c}`\n");
        }
        let reference = reference_target(records, w, &targets);
        let ratio_label = match &reference {
            Some(r) => format!("{r}/peer ({})", cols.first().map_or("", |c| &c.label)),
            None => "churnfs/peer".into(),
        };
        let mut head = String::from("| target |");
        let mut sep = String::from("|---|");
        for c in &cols {
            let arrow = match c.better {
                Better::High => "↑",
                Better::Low => "↓",
            };
            let _ = write!(head, " {} {arrow} |", c.label);
            sep.push_str("---:|");
        }
        let _ = writeln!(s, "{head} {ratio_label} | notes |\n{sep}---:|---|");
        let refv = reference.as_ref().and_then(|r| {
            cols.first()
                .and_then(|c| aggregate(records, w, r).median(&c.key))
        });
        for t in &targets {
            let a = aggregate(records, w, t);
            if a.runs == 0 {
                continue;
            }
            let mut row = format!("| {t} |");
            for c in &cols {
                let _ = write!(row, " {} |", cell(&a, &c.key));
            }
            let v = cols.first().and_then(|c| a.median(&c.key));
            let ratio = if reference.as_deref() == Some(t.as_str()) {
                "1×".to_string()
            } else {
                ratio_cell(refv, v)
            };
            let _ = writeln!(row, " {ratio} | {} |", notes(&a, w, &meta.size));
            s.push_str(&row);
        }
        let _ = writeln!(s);
        for (pw, (ptitle, path)) in plots
            .iter()
            .filter_map(|p| p.1.split('-').next().map(|w| (w.to_string(), p)))
        {
            if pw == *w {
                let _ = writeln!(s, "![{ptitle}]({}/{path})\n", meta.plot_dir);
            }
        }
    }

    let _ = writeln!(s, "## Exact commands\n");
    let _ = writeln!(
        s,
        "Each run: `bench/targets/TARGET.sh up STATE` (STATE a fresh `mktemp -d` under /tmp, \
         the mount at STATE/mnt), then the workload in `$MNT/bench` (in `$MNT` on the floor), then \
         `bench/targets/TARGET.sh umount STATE` (timed, with the daemon's exit) and \
         `bench/targets/TARGET.sh down STATE`. W6 runs `remount` and `--measure-only` \
         between them. The raw `key=value` lines of every run are in the `.kv` file \
         beside this report.\n"
    );
    let _ = writeln!(s, "```");
    for (_, c) in &meta.commands {
        let _ = writeln!(s, "{c}");
    }
    let _ = writeln!(s, "```");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(w: &str, t: &str, run: usize, kv: &[(&str, &str)]) -> Record {
        Record {
            workload: w.into(),
            target: t.into(),
            run,
            status: Status::Ok,
            kv: kv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn medians_ranges_and_ratios() {
        let mut records = vec![
            rec("w7", "churnfs-tmpfs", 1, &[("missing_per_s", "100")]),
            rec("w7", "churnfs-tmpfs", 2, &[("missing_per_s", "300")]),
            rec("w7", "churnfs-tmpfs", 3, &[("missing_per_s", "200")]),
            rec("w7", "ext4", 1, &[("missing_per_s", "400")]),
        ];
        records.push(Record {
            workload: "w7".into(),
            target: "juicefs".into(),
            run: 1,
            status: Status::Skipped("not installed".into()),
            kv: Vec::new(),
        });
        let a = aggregate(&records, "w7", "churnfs-tmpfs");
        assert_eq!(a.median("missing_per_s"), Some(200.0));
        assert_eq!(a.range("missing_per_s"), Some((100.0, 300.0)));
        assert_eq!(cell(&a, "missing_per_s"), "200 (100–300)");
        let meta = Meta {
            date: "2026-01-01".into(),
            size: Size::get("tiny").unwrap(),
            machine: "m".into(),
            kernel: "k".into(),
            commit: "c".into(),
            suite_command: "s".into(),
            commands: vec![("w7".into(), "churnfs-bench w7".into())],
            targets: ["churnfs-tmpfs", "ext4", "juicefs"]
                .iter()
                .map(|n| TargetInfo {
                    name: n.to_string(),
                    desc: String::new(),
                    version: String::new(),
                    unavailable: None,
                })
                .collect(),
            workloads: vec!["w7".into()],
            elapsed_s: 1.0,
            interrupted: false,
            plot_dir: "p".into(),
        };
        let md = markdown(&meta, &records, &[("W7".into(), "w7-stat.png".into())]);
        assert!(md.contains("| ext4 | 400 |"), "{md}");
        assert!(md.contains("0.500×"), "{md}");
        assert!(md.contains("not installed"), "{md}");
        assert!(md.contains("![W7](p/w7-stat.png)"), "{md}");
    }

    #[test]
    fn a_w1_that_stops_at_a_level_keeps_the_levels_before() {
        let size = Size::get("reference").unwrap();
        let records = vec![rec(
            "w1",
            "passthrough_ll",
            1,
            &[
                ("n1000_open_per_s", "10150"),
                ("n1000_close_per_s", "30679"),
                ("n1000_close_us_per_file", "32.6"),
                ("failed_at_n", "10000"),
                ("failed_why", "create_after_9988_files:_errno_24"),
            ],
        )];
        let a = aggregate(&records, "w1", "passthrough_ll");
        assert_eq!(
            notes(&a, "w1", &size),
            "N ≥ 10,000 failed: create after 9988 files: errno 24"
        );
        let cols = columns("w1", &size);
        let keys: Vec<&str> = cols.iter().map(|c| c.key.as_str()).collect();
        assert!(keys.contains(&"n1000_open_per_s"), "{keys:?}");
        assert!(keys.contains(&"n1000_close_per_s"), "{keys:?}");
        assert_eq!(cell(&a, "n1000_open_per_s"), "10,150");
        assert_eq!(cell(&a, "n200000_open_per_s"), "–");
    }

    #[test]
    fn numbers() {
        assert_eq!(fmt_val(1410886.0), "1,410,886");
        assert_eq!(fmt_val(123.4), "123");
        assert_eq!(fmt_val(1.234), "1.23");
        assert_eq!(fmt_val(0.01234), "0.0123");
        assert_eq!(short_n(200_000), "200k");
        assert_eq!(short_n(1_000_000), "1M");
    }
}
