//! The metrics endpoint (`-o metrics=ADDR:PORT`): `GET /metrics` answers
//! every counter and gauge of the mount, and the time its FUSE requests
//! took by opcode, in the OpenMetrics text format that Prometheus scrapes
//! (encoded by `prometheus-client`, served by `tiny_http`). The catalogue
//! is the one `churnfs stats` groups by (each layer's `counters!`): names
//! take the prefix `churnfs_`, counters the suffix `_total`, times are in
//! seconds (`_seconds`), and HELP says which part of the filesystem the
//! metric measures. docs/design.md "Metrics" lists them.

use crate::error::CliError;
use crate::Result;
use churnfs_fuse::StatsSource;
use churnfs_vfs::counters::Desc;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::net::SocketAddr;

/// The listening socket, bound before the filesystem is mounted: an
/// address in use fails the mount with nothing mounted.
pub struct Endpoint {
    server: tiny_http::Server,
    addr: SocketAddr,
}

pub fn bind(addr: SocketAddr) -> Result<Endpoint> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| CliError::Other(format!("metrics address {addr}: {e}")))?;
    Ok(Endpoint { server, addr })
}

/// What one counter of the catalogue is called and in what unit: counts
/// of `_us` and `_ns` become seconds (Some(value)), the rest stay whole.
fn shape(d: &Desc, v: u64) -> (&'static str, Option<Unit>, Option<f64>) {
    if let Some(stem) = d.name.strip_suffix("_us") {
        (stem, Some(Unit::Seconds), Some(v as f64 / 1e6))
    } else if let Some(stem) = d.name.strip_suffix("_ns") {
        (stem, Some(Unit::Seconds), Some(v as f64 / 1e9))
    } else if let Some(stem) = d.name.strip_suffix("_bytes") {
        (stem, Some(Unit::Bytes), None)
    } else {
        (d.name, None, None)
    }
}

struct Mount(StatsSource);

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("churnfs mount stats")
    }
}

impl Collector for Mount {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let cat = self.0.catalogue();
        let values = self.0.snapshot();
        for (d, (name, v)) in cat.iter().zip(values) {
            debug_assert_eq!(d.name, name, "the catalogue follows the snapshot");
            let (name, unit, secs) = shape(d, v);
            let help = format!("{} ({}: {})", d.help, d.part, d.name);
            let unit = unit.as_ref();
            match (d.gauge, secs) {
                (true, Some(x)) => {
                    let g = ConstGauge::new(x);
                    g.encode(enc.encode_descriptor(name, &help, unit, g.metric_type())?)?;
                }
                (true, None) => {
                    let g = ConstGauge::new(v as i64);
                    g.encode(enc.encode_descriptor(name, &help, unit, g.metric_type())?)?;
                }
                (false, Some(x)) => {
                    let c = ConstCounter::new(x);
                    c.encode(enc.encode_descriptor(name, &help, unit, c.metric_type())?)?;
                }
                (false, None) => {
                    let c = ConstCounter::new(v);
                    c.encode(enc.encode_descriptor(name, &help, unit, c.metric_type())?)?;
                }
            }
        }
        let mut m = enc.encode_descriptor(
            "fuse_request_duration",
            "Time the daemon took to answer a FUSE request, from reading it to its reply, by opcode",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for op in self.0.latency() {
            let buckets: Vec<(f64, u64)> = op
                .buckets
                .iter()
                // Counts per bucket: prometheus-client cumulates them, and
                // writes f64::MAX as +Inf.
                .map(|(le, n)| (if le.is_finite() { *le } else { f64::MAX }, *n))
                .collect();
            let labels = [("opcode", op.name)];
            m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                op.sum_seconds,
                op.count,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
}

/// Renders the page `GET /metrics` answers.
pub fn render(stats: StatsSource) -> String {
    let mut reg = Registry::with_prefix("churnfs");
    reg.register_collector(Box::new(Mount(stats)));
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &reg) {
        tracing::warn!("metrics not encoded: {e}");
    }
    out
}

impl Endpoint {
    /// Serves `/metrics` on a thread of its own until the process exits.
    pub fn serve(self, stats: StatsSource) -> std::io::Result<()> {
        let Endpoint { server, addr } = self;
        tracing::info!("metrics served on http://{addr}/metrics");
        std::thread::Builder::new()
            .name("churnfs-metrics".into())
            .spawn(move || {
                for req in server.incoming_requests() {
                    let answered = if req.method() == &tiny_http::Method::Get
                        && req.url().split('?').next() == Some("/metrics")
                    {
                        let mut page = tiny_http::Response::from_string(render(stats.clone()));
                        if let Ok(h) = tiny_http::Header::from_bytes(
                            &b"Content-Type"[..],
                            &b"application/openmetrics-text; version=1.0.0; charset=utf-8"[..],
                        ) {
                            page = page.with_header(h);
                        }
                        req.respond(page)
                    } else {
                        req.respond(
                            tiny_http::Response::from_string("churnfs serves /metrics\n")
                                .with_status_code(404),
                        )
                    };
                    if let Err(e) = answered {
                        tracing::debug!("metrics request not answered: {e}");
                    }
                }
            })?;
        Ok(())
    }
}

/// The catalogue as docs/metrics.md shows it (a test keeps the file equal
/// to it): per backend, each part's metrics with their Prometheus names,
/// kinds and units.
#[cfg(test)]
fn catalogue_markdown() -> String {
    let mut out = String::from(
        "# Metrics\n\n\
         Every counter and gauge of a mount, as `churnfs stats MOUNTPOINT` groups them\n\
         and as `-o metrics=ADDR:PORT` serves them at `/metrics` (OpenMetrics text,\n\
         names prefixed `churnfs_`, counters suffixed `_total`, times in seconds).\n\
         Beside them, `churnfs_fuse_request_duration_seconds{opcode=...}` is a histogram\n\
         of the time the daemon took to answer each FUSE request, from reading it to\n\
         its reply (buckets from 1 µs to 5 s). This file is generated from the code\n\
         (`CHURNFS_WRITE_DOCS=1 cargo test -p churnfs metrics`).\n",
    );
    let sets: [(&str, &[Desc]); 3] = [
        (
            "Local store (the embedded engine)",
            churnfs_engine::stats::Stats::catalogue(),
        ),
        (
            "Shared volume (etcd and object storage)",
            churnfs_shared::stats::Stats::catalogue(),
        ),
        (
            "The FUSE adapter (both)",
            churnfs_fuse::stats::Stats::catalogue(),
        ),
    ];
    for (title, cat) in sets {
        out.push_str(&format!("\n## {title}\n"));
        let mut part = "";
        for d in cat {
            if d.part != part {
                part = d.part;
                out.push_str(&format!(
                    "\n### {part}\n\n{}.\n\n| stats name | Prometheus name | kind |\n|---|---|---|\n",
                    d.help
                ));
            }
            let (name, unit, _) = shape(d, 0);
            let mut full = format!("churnfs_{name}");
            if let Some(u) = unit {
                full.push('_');
                full.push_str(u.as_str());
            }
            if !d.gauge {
                full.push_str("_total");
            }
            let kind = if d.gauge { "gauge" } else { "counter" };
            out.push_str(&format!("| `{}` | `{full}` | {kind} |\n", d.name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_metric_of_a_mount_has_a_name_of_its_own() {
        let fuse = churnfs_fuse::stats::Stats::catalogue();
        for backend in [
            churnfs_engine::stats::Stats::catalogue(),
            churnfs_shared::stats::Stats::catalogue(),
        ] {
            let mut seen = HashSet::new();
            for d in backend.iter().chain(fuse) {
                let (name, unit, _) = shape(d, 0);
                let full = (name, unit.map(|u| u.as_str().to_string()));
                assert!(seen.insert(full.clone()), "{} twice: {full:?}", d.name);
                assert!(!d.help.is_empty() && !d.part.is_empty(), "{}", d.name);
            }
        }
    }

    #[test]
    fn docs_metrics_md_is_the_catalogue() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
        let want = catalogue_markdown();
        if std::env::var_os("CHURNFS_WRITE_DOCS").is_some() {
            std::fs::write(path, &want).expect("write docs/metrics.md");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/metrics.md differs from the catalogue: CHURNFS_WRITE_DOCS=1 cargo test -p churnfs metrics"
        );
    }
}
