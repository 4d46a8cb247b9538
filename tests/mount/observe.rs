//! Watching a mount: the metrics endpoint (`-o metrics=ADDR:PORT`) read by
//! a real Prometheus client (curl fetches the page, the Python
//! `prometheus_client` OpenMetrics parser, which refuses a malformed page,
//! reads it), and `churnfs stats` grouped, as JSON and watching.

use crate::support::{churnfs, churnfs_bin, Mount};
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("address").port()
}

fn curl(url: &str) -> (String, String) {
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code} %{content_type}", url])
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').expect("curl's status line");
    (body.to_string(), status.to_string())
}

/// Families the parser found: name -> (type, help, samples as
/// (sample name, labels as k=v joined by ',', value)).
type Families = HashMap<String, (String, String, Vec<(String, String, f64)>)>;

const PARSE: &str = r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
for f in text_string_to_metric_families(sys.stdin.read()):
    print("F\t%s\t%s\t%s" % (f.name, f.type, f.documentation))
    for s in f.samples:
        labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()))
        print("S\t%s\t%s\t%s\t%r" % (f.name, s.name, labels, s.value))
"#;

fn parse(page: &str) -> Families {
    let mut py = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    py.stdin
        .take()
        .expect("stdin")
        .write_all(page.as_bytes())
        .expect("write the page");
    let out = py.wait_with_output().expect("python3");
    assert!(
        out.status.success(),
        "the Prometheus client refused the page: {}\n{page}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut fams = Families::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "F" => {
                fams.insert(f[1].into(), (f[2].into(), f[3].into(), Vec::new()));
            }
            "S" => fams.get_mut(f[1]).expect("family first").2.push((
                f[2].into(),
                f[3].into(),
                f[4].parse().expect("a value"),
            )),
            _ => unreachable!("{line}"),
        }
    }
    fams
}

fn sample(fams: &Families, family: &str, name: &str, labels: &str) -> f64 {
    let (_, _, samples) = fams
        .get(family)
        .unwrap_or_else(|| panic!("no family {family}"));
    samples
        .iter()
        .find(|(n, l, _)| n == name && l == labels)
        .unwrap_or_else(|| panic!("no sample {name}{{{labels}}} in {family}: {samples:?}"))
        .2
}

#[test]
fn the_metrics_endpoint_serves_every_counter_and_request_times_to_a_prometheus_client() {
    let port = free_port();
    let m = Mount::new(&format!("metrics=127.0.0.1:{port}"));
    for i in 0..25 {
        std::fs::write(m.path(&format!("f{i}")), b"data").unwrap();
    }
    std::fs::remove_file(m.path("f0")).unwrap();
    let (page, status) = curl(&format!("http://127.0.0.1:{port}/metrics"));
    assert!(
        status.starts_with("200 application/openmetrics-text"),
        "{status}"
    );
    let fams = parse(&page);
    // Counters and gauges told apart, with HELP saying which part.
    let (kind, help, _) = &fams["churnfs_op_create"];
    assert_eq!(kind, "counter");
    assert!(help.contains("fuse: op_create"), "{help}");
    assert!(sample(&fams, "churnfs_op_create", "churnfs_op_create_total", "") >= 25.0);
    assert_eq!(fams["churnfs_kernel_known_inodes"].0, "gauge");
    assert_eq!(fams["churnfs_dirty_items_max"].0, "gauge");
    // Microseconds are served as seconds, in the name too.
    assert_eq!(fams["churnfs_commit_max_seconds"].0, "gauge");
    // Request times per opcode: a histogram whose +Inf bucket is its count.
    let h = "churnfs_fuse_request_duration_seconds";
    assert_eq!(fams[h].0, "histogram");
    let creates = sample(&fams, h, &format!("{h}_count"), "opcode=create");
    assert!(creates >= 25.0, "{creates} creates timed");
    assert_eq!(
        sample(&fams, h, &format!("{h}_bucket"), "le=+Inf,opcode=create"),
        creates
    );
    assert!(sample(&fams, h, &format!("{h}_sum"), "opcode=create") > 0.0);
    // Every name `churnfs stats` shows is a family of the page.
    let stats = churnfs(&["stats", m.mnt.to_str().unwrap()]);
    let names: Vec<String> = String::from_utf8_lossy(&stats.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(' ').next().map(str::to_string))
        .collect();
    assert!(names.len() > 100, "{} names from stats --json", names.len());
    for n in &names {
        let family = format!(
            "churnfs_{}",
            n.strip_suffix("_us")
                .or_else(|| n.strip_suffix("_ns"))
                .map_or(n.clone(), |s| format!("{s}_seconds"))
        );
        assert!(fams.contains_key(&family), "{n}: no family {family}");
    }
    // Another path is not found.
    assert!(curl(&format!("http://127.0.0.1:{port}/"))
        .1
        .starts_with("404"));
}

#[test]
fn a_metrics_address_in_use_fails_the_mount_in_one_line_with_nothing_mounted() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = held.local_addr().expect("address");
    let dir = tempfile::Builder::new()
        .prefix("churnfs-test-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let (store, mnt) = (dir.path().join("store"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    assert!(churnfs(&["mkfs", store.to_str().unwrap()]).status.success());
    let out = Command::new(churnfs_bin())
        .args([
            "mount",
            store.to_str().unwrap(),
            mnt.to_str().unwrap(),
            "-o",
        ])
        .arg(format!("metrics={addr}"))
        .output()
        .expect("run churnfs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(&format!("metrics address {addr}")), "{err}");
    assert!(!crate::support::is_mounted(&mnt));
    let bad = Command::new(churnfs_bin())
        .args(["mount", store.to_str().unwrap(), mnt.to_str().unwrap()])
        .args(["-o", "metrics=localhost"])
        .output()
        .expect("run churnfs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not ADDRESS:PORT"));
}

#[test]
fn stats_groups_by_part_leads_with_the_work_left_and_watches_with_rates() {
    let m = Mount::new("");
    for i in 0..10 {
        std::fs::write(m.path(&format!("f{i}")), b"x").unwrap();
    }
    let mnt = m.mnt.to_str().unwrap();
    let out = churnfs(&["stats", mnt]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("# left to do: "), "{first}");
    assert!(first.contains("unlinked_inodes 0"), "{first}");
    // Headings in the order of the parts, each counter under its own.
    let at = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{text}"))
    };
    assert!(at("# inodes: ") < at("\nicache_hits "));
    assert!(at("\nicache_hits ") < at("# names: "));
    assert!(at("# fuse: ") < at("\nop_create "));
    // Watching, as JSON lines: the second reading has rates.
    let mut w = Command::new(churnfs_bin())
        .args(["stats", mnt, "--watch", "0.2", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run churnfs");
    let mut lines =
        std::io::BufRead::lines(std::io::BufReader::new(w.stdout.take().expect("stdout")));
    let one = lines.next().expect("a reading").expect("read");
    std::fs::write(m.path("g"), b"y").unwrap();
    let two = lines.next().expect("a second reading").expect("read");
    let _ = w.kill();
    let _ = w.wait();
    assert!(!one.contains("\"rate\""), "{one}");
    assert!(
        two.contains("\"op_create\":{\"kind\":\"counter\",\"part\":\"fuse\",\"rate\":"),
        "{two}"
    );
    assert!(
        two.contains("\"kernel_known_inodes\":{\"kind\":\"gauge\",\"part\":\"inodes\",\"value\":")
    );
}
