//! PNG plots: W1 close cost per file against N (log x), W2 rate per tenth,
//! W3 truncates/s against P, bars for W4–W7. Text is drawn with a TrueType
//! font read at run time from the system (Debian package fonts-dejavu-core).

use crate::report::{aggregate, fmt_val, short_n, Meta, Record};
use plotters::prelude::*;
use std::path::Path;

const W: u32 = 1100;
const H: u32 = 650;

/// Font files tried in order; `BENCH_FONT` names another.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

fn load_font() -> Result<(), String> {
    let mut paths: Vec<String> = std::env::var("BENCH_FONT").into_iter().collect();
    paths.extend(FONTS.iter().map(|s| s.to_string()));
    for p in &paths {
        if let Ok(bytes) = std::fs::read(p) {
            // plotters keeps the font for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err(format!(
        "no TrueType font found (tried {}); install fonts-dejavu-core or set BENCH_FONT",
        paths.join(", ")
    ))
}

type Series = Vec<(String, Vec<(f64, f64)>)>;

/// Ten colours that stay apart from each other on white.
const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (90, 90, 90),
    (188, 189, 34),
    (23, 190, 207),
];

fn color(i: usize) -> RGBAColor {
    let (r, g, b) = COLORS[i % COLORS.len()];
    RGBColor(r, g, b).to_rgba()
}

/// An axis label: the table's number format without trailing zeros.
fn tick(v: &f64) -> String {
    let s = fmt_val(*v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn e<T: std::fmt::Display>(x: T) -> String {
    x.to_string()
}

fn bounds(series: &Series) -> Option<(f64, f64, f64, f64)> {
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *y > 0.0)
        .collect();
    if pts.is_empty() {
        return None;
    }
    let f = |g: fn(f64, f64) -> f64, init: f64, sel: fn(&(f64, f64)) -> f64| {
        pts.iter().map(sel).fold(init, g)
    };
    Some((
        f(f64::min, f64::INFINITY, |p| p.0),
        f(f64::max, f64::NEG_INFINITY, |p| p.0),
        f(f64::min, f64::INFINITY, |p| p.1),
        f(f64::max, f64::NEG_INFINITY, |p| p.1),
    ))
}

/// Draws the lines and their legend on a chart whose axes are already set.
macro_rules! draw_lines {
    ($chart:expr, $series:expr) => {{
        for (i, (name, pts)) in $series.iter().enumerate() {
            let color = color(i);
            let pts: Vec<(f64, f64)> = pts.iter().copied().filter(|p| p.1 > 0.0).collect();
            $chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(e)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            $chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(e)?;
        }
        $chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(e)?;
    }};
}

/// A line chart with a log y axis, and a log x axis if `log_x`.
fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &Series,
    log_x: bool,
) -> Result<bool, String> {
    let Some((x0, x1, y0, y1)) = bounds(series) else {
        return Ok(false);
    };
    let root = BitMapBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (ylo, yhi) = (y0 / 2.0, y1 * 3.0);
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90);
    let yfmt = tick;
    if log_x {
        let mut chart = b
            .build_cartesian_2d((x0 / 1.5..x1 * 1.5).log_scale(), (ylo..yhi).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|v: &f64| short_n(v.round() as u64))
            .y_label_formatter(&yfmt)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(e)?;
        draw_lines!(chart, series);
    } else {
        let pad = ((x1 - x0) * 0.05).max(0.5);
        let mut chart = b
            .build_cartesian_2d(x0 - pad..x1 + pad, (ylo..yhi).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|v: &f64| {
                if (v - v.round()).abs() < 1e-6 {
                    format!("{}", v.round())
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&yfmt)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(e)?;
        draw_lines!(chart, series);
    }
    root.present().map_err(e)?;
    Ok(true)
}

/// A line chart (log y) of the series in a CSV of `series,x,y` lines (a
/// first line that does not parse is a header).
pub fn series_csv(csv: &Path, out: &Path, title: &str, x: &str, y: &str) -> Result<(), String> {
    load_font()?;
    let text = std::fs::read_to_string(csv).map_err(|err| format!("{}: {err}", csv.display()))?;
    let mut series: Series = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        let (Some(name), Some(Ok(px)), Some(Ok(py))) = (
            f.first(),
            f.get(1).map(|v| v.trim().parse::<f64>()),
            f.get(2).map(|v| v.trim().parse::<f64>()),
        ) else {
            continue;
        };
        match series.iter_mut().find(|(n, _)| n == name) {
            Some((_, pts)) => pts.push((px, py)),
            None => series.push((name.to_string(), vec![(px, py)])),
        }
    }
    if !lines(out, title, x, y, &series, false)? {
        return Err(format!("{}: no points to draw", csv.display()));
    }
    Ok(())
}

/// Grouped bars: one group per category, one bar per series; log y if `log_y`.
fn bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    cats: &[String],
    series: &[(String, Vec<Option<f64>>)],
    log_y: bool,
) -> Result<bool, String> {
    let vals: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if vals.is_empty() {
        return Ok(false);
    }
    let vmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let vmax = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let root = BitMapBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let n = cats.len() as f64;
    let xr = -0.5..n - 0.5;
    let names = cats.to_vec();
    let xfmt = move |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    let k = series.len().max(1) as f64;
    let width = 0.8 / k;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90);
    macro_rules! body {
        ($chart:expr, $base:expr, $top:expr) => {{
            $chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(cats.len() + 1)
                .x_label_formatter(&xfmt)
                .y_desc(y_desc)
                .y_label_formatter(&tick)
                .label_style(("sans-serif", 13))
                .draw()
                .map_err(e)?;
            for (j, (name, vs)) in series.iter().enumerate() {
                let color = color(j);
                let rects: Vec<_> = vs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.filter(|v| v.is_finite() && *v > 0.0).map(|v| (i, v)))
                    .map(|(i, v)| {
                        let x0 = i as f64 - 0.4 + j as f64 * width;
                        Rectangle::new([(x0, $base), (x0 + width * 0.95, v)], color.filled())
                    })
                    .collect();
                $chart
                    .draw_series(rects)
                    .map_err(e)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                    });
                let labels: Vec<_> = vs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.filter(|v| v.is_finite() && *v > 0.0).map(|v| (i, v)))
                    .map(|(i, v)| {
                        let x0 = i as f64 - 0.4 + j as f64 * width;
                        Text::new(fmt_val(v), (x0, $top(v)), ("sans-serif", 13))
                    })
                    .collect();
                $chart.draw_series(labels).map_err(e)?;
            }
            if series.len() > 1 {
                $chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 14))
                    .position(SeriesLabelPosition::UpperRight)
                    .draw()
                    .map_err(e)?;
            }
        }};
    }
    if log_y {
        let (lo, hi) = (vmin / 3.0, vmax * 4.0);
        let mut chart = b.build_cartesian_2d(xr, (lo..hi).log_scale()).map_err(e)?;
        body!(chart, lo, |v: f64| v * 1.6);
    } else {
        let hi = vmax * 1.2;
        let mut chart = b.build_cartesian_2d(xr, 0.0..hi).map_err(e)?;
        body!(chart, 0.0, |v: f64| v + hi * 0.04);
    }
    root.present().map_err(e)?;
    Ok(true)
}

/// Draws every plot the records allow into `dir`; returns (title, file name).
pub fn all(dir: &Path, meta: &Meta, records: &[Record]) -> Result<Vec<(String, String)>, String> {
    load_font()?;
    std::fs::create_dir_all(dir).map_err(|x| format!("{}: {x}", dir.display()))?;
    let targets: Vec<String> = meta.targets.iter().map(|t| t.name.clone()).collect();
    let has = |w: &str| meta.workloads.iter().any(|x| x == w);
    let tag = format!("size {}, {}", meta.size.name, meta.date);
    let mut out = Vec::new();
    let mut add = |drawn: Result<bool, String>, title: String, file: &str| -> Result<(), String> {
        if drawn? {
            out.push((title, file.to_string()));
        }
        Ok(())
    };

    let per_target = |w: &str, f: &dyn Fn(&crate::report::Agg) -> Vec<(f64, f64)>| -> Series {
        targets
            .iter()
            .map(|t| (t.clone(), f(&aggregate(records, w, t))))
            .filter(|(_, p)| !p.is_empty())
            .collect()
    };

    if has("w1") {
        let s = per_target("w1", &|a| {
            meta.size
                .w1_ns
                .iter()
                .filter_map(|&n| {
                    a.median(&format!("n{n}_close_us_per_file"))
                        .map(|v| (n as f64, v))
                })
                .collect()
        });
        let title = format!("W1 close cost per file against N open-unlinked files ({tag})");
        add(
            lines(
                &dir.join("w1-close-cost.png"),
                &title,
                "N files held open, unlinked (log)",
                "close µs per file (log)",
                &s,
                true,
            ),
            title,
            "w1-close-cost.png",
        )?;
    }
    for (w, name) in [("w2", "close, then unlink"), ("w2b", "unlink, then close")] {
        if !has(w) {
            continue;
        }
        let s = per_target(w, &|a| {
            (1..=10)
                .filter_map(|k| a.median(&format!("tenth{k}")).map(|v| (k as f64, v)))
                .collect()
        });
        let title = format!("W2 spool churn ({name}): rate per tenth of the run ({tag})");
        let file = format!("{w}-tenths.png");
        add(
            lines(
                &dir.join(&file),
                &title,
                "tenth of the run",
                "create-write-close-unlink per s (log)",
                &s,
                false,
            ),
            title,
            &file,
        )?;
    }
    if has("w3") {
        let s = per_target("w3", &|a| {
            meta.size
                .w3_procs
                .iter()
                .filter_map(|&p| {
                    a.median(&format!("p{p}_truncates_per_s"))
                        .map(|v| (p as f64, v))
                })
                .collect()
        });
        let title = format!("W3 truncate storm: truncates/s against P processes ({tag})");
        add(
            lines(
                &dir.join("w3-truncates.png"),
                &title,
                "P processes",
                "truncates per s, all processes (log)",
                &s,
                false,
            ),
            title,
            "w3-truncates.png",
        )?;
    }
    type BarSpec<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Vec<(&'a str, &'a str)>,
        bool,
        &'a str,
    );
    let bar_specs: Vec<BarSpec> = vec![
        (
            "w4",
            "W4 fs_mark small-file create",
            "files per s (log)",
            vec![("files_per_s", "files/s")],
            true,
            "w4-files-per-s.png",
        ),
        (
            "w5",
            "W5 writeback mix: time of each phase",
            "seconds (log)",
            vec![("extract_s", "tar -x"), ("dd_s", "dd"), ("sync_s", "sync")],
            true,
            "w5-phases.png",
        ),
        (
            "w6",
            "W6 directory after churn: time churned / fresh",
            "ratio (1 = no trace of the churn)",
            vec![
                ("stat_ratio", "stat all"),
                ("readdir_ratio", "ls -f"),
                ("remount_stat_ratio", "stat all after remount"),
            ],
            false,
            "w6-ratios.png",
        ),
        (
            "w7",
            "W7 stat() in a loop",
            "stat calls per s (log)",
            vec![
                ("missing_per_s", "missing name"),
                ("existing_per_s", "existing file"),
                ("fresh_missing_per_s", "first miss, first 5,000 names"),
                ("first_missing_per_s", "first miss, steady"),
            ],
            true,
            "w7-stat.png",
        ),
        (
            "w9",
            "W9 rm -rf of a tree of small files, W2 beside it",
            "files removed per s (log)",
            vec![("rm_files_per_s", "rm -rf")],
            true,
            "w9-rm.png",
        ),
        (
            "pm",
            "PM postmark: time of the whole run",
            "seconds (log)",
            vec![("wall_s", "postmark")],
            true,
            "pm-time.png",
        ),
    ];
    for (w, title, ydesc, keys, log_y, file) in bar_specs {
        if !has(w) {
            continue;
        }
        let cats: Vec<String> = targets
            .iter()
            .filter(|t| aggregate(records, w, t).ok > 0)
            .cloned()
            .collect();
        if cats.is_empty() {
            continue;
        }
        let series: Vec<(String, Vec<Option<f64>>)> = keys
            .iter()
            .map(|(k, label)| {
                (
                    label.to_string(),
                    cats.iter()
                        .map(|t| aggregate(records, w, t).median(k))
                        .collect(),
                )
            })
            .collect();
        let title = format!("{title} ({tag})");
        add(
            bars(&dir.join(file), &title, ydesc, &cats, &series, log_y),
            title,
            file,
        )?;
    }
    Ok(out)
}
