//! SVG plots of benchmark results (plotters): throughput, and throughput scaled to 100% CPU when
//! measured, against message size, one line per stack.

use crate::bench::report::Row;
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// Draws one panel (or two with CPU figures) to `path`.
pub fn throughput_vs_size(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    if rows.is_empty() {
        return Err("nothing to plot".into());
    }
    let scaled = rows.iter().any(|r| r.scaled_throughput_mbps.is_some());
    let height = if scaled { 900 } else { 480 };
    let root = SVGBackend::new(path, (900 + LEGEND_WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = if scaled {
        root.split_evenly((2, 1))
    } else {
        vec![root.clone()]
    };
    let unit = if rows[0].trans_per_s.is_some() {
        "transactions/s"
    } else {
        "Mbit/s (10^6 bits/s)"
    };
    draw(
        &panels[0],
        rows,
        &format!("{} throughput", rows[0].test),
        unit,
        |r| Some(r.headline()),
    )?;
    if scaled {
        draw(
            &panels[1],
            rows,
            &format!("{} throughput scaled to 100% CPU", rows[0].test),
            "Mbit/s at 100% CPU",
            |r| r.scaled_throughput_mbps,
        )?;
    }
    root.present()?;
    Ok(())
}

/// Draws each RR/CRR row's latency distribution: the fraction of transactions completed
/// within a time, against that time on a log axis (one line per stack, placement and size).
pub fn latency_cdf(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .filter_map(|r| {
            let cdf = r.latency_hist.as_ref()?.cdf_us();
            let size = match r.resp_size {
                Some(resp) => format!("{},{resp}", r.msg_size),
                None => r.msg_size.to_string(),
            };
            (!cdf.is_empty()).then(|| (format!("{}, {}, -r {size}", r.stack, r.placement), cdf))
        })
        .collect();
    if curves.is_empty() {
        return Err("no latency to plot (--latency-plot needs rr or crr results)".into());
    }
    let lo = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.0))
        .fold(f64::INFINITY, f64::min)
        .max(0.01);
    let hi = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        .max(lo * 10.0);
    let root = SVGBackend::new(path, (900 + LEGEND_WIDTH, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(900);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            format!("{} latency distribution", rows[0].test),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((lo / 1.2..hi * 1.2).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("transaction time (us, log scale)")
        .y_desc("fraction of transactions done")
        .draw()?;
    for (i, (_, pts)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // A step curve starting at zero just below the first bucket.
        let mut line = vec![(pts[0].0 / 1.1, 0.0)];
        line.extend(pts.iter().copied());
        chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
    }
    let labels: Vec<&str> = curves.iter().map(|c| c.0.as_str()).collect();
    side_legend(&legend, &labels)?;
    root.present()?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    panel: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    title: &str,
    unit: &str,
    y: impl Fn(&Row) -> Option<f64>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let (area, legend) = panel.split_horizontally(panel.dim_in_pixel().0 - LEGEND_WIDTH);
    let (area, legend) = (&area, &legend);
    // One line per stack and placement ("kernel, 2 CPUs").
    let series = |r: &Row| {
        if r.placement.is_empty() {
            r.stack.clone()
        } else {
            format!("{}, {}", r.stack, r.placement)
        }
    };
    let mut stacks: Vec<String> = Vec::new();
    for r in rows {
        let s = series(r);
        if !stacks.contains(&s) {
            stacks.push(s);
        }
    }
    // The x axis is log2(message size) in hundredths, an integer axis so that its ticks can
    // be placed exactly at the powers of two (the sizes a sweep uses), never between them.
    let x_of = |r: &Row| ((r.msg_size.max(1) as f64).log2() * 100.0).round() as i32;
    let (xmin, xmax) = rows
        .iter()
        .map(x_of)
        .fold((i32::MAX, i32::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (xmin, xmax) = if xmax > xmin {
        (xmin - 25, xmax + 25)
    } else {
        (xmin - 100, xmax + 100)
    };
    let ticks: Vec<i32> = (xmin..=xmax).filter(|x| x % 100 == 0).collect();
    let ymax = rows.iter().filter_map(&y).fold(0.0f64, f64::max).max(1.0) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        // Ticks only at powers of two (the sizes a sweep uses), never between them.
        .build_cartesian_2d((xmin..xmax).with_key_points(ticks), 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log scale)")
        .y_desc(unit)
        .x_label_formatter(&|x| format!("{}", 1u64 << (*x / 100).clamp(0, 63)))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for (i, s) in stacks.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts: Vec<(i32, f64)> = rows
            .iter()
            .filter(|r| series(r) == *s)
            .filter_map(|r| y(r).map(|v| (x_of(r), v)))
            .collect();
        pts.sort_by_key(|p| p.0);
        chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
        chart.draw_series(
            pts.iter()
                .map(|&(x, v)| Circle::new((x, v), 4, color.filled())),
        )?;
    }
    let labels: Vec<&str> = stacks.iter().map(String::as_str).collect();
    side_legend(legend, &labels)?;
    Ok(())
}

/// Width of the legend column right of a chart: the legend never sits on the data.
const LEGEND_WIDTH: u32 = 200;

/// One legend entry per series (colour `COLORS[i]`), in a column of its own beside the chart.
fn side_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    labels: &[&str],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    for (i, label) in labels.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let y = 60 + 22 * i as i32;
        area.draw(&PathElement::new(
            vec![(4, y), (26, y)],
            color.stroke_width(3),
        ))?;
        area.draw(&Text::new(
            label.to_string(),
            (32, y - 7),
            ("sans-serif", 13),
        ))?;
    }
    Ok(())
}

/// One bar of [`scaling_bars`]: a configuration ("2 shards, same, 1 thr") and its throughput
/// relative to the panel's baseline (1 shard, `same`, same threads per shard).
pub struct Bar {
    pub label: String,
    pub relative: f64,
}

/// The paper's Figures 1, 2 and 7 in netfold's terms: per test, each shard/affinity
/// configuration's throughput relative to one shard, as bars, with the 1x line and the
/// 2-shard target drawn in. One panel per test.
pub fn scaling_bars(
    path: &Path,
    panels: &[(String, f64, Vec<Bar>)],
) -> Result<(), Box<dyn std::error::Error>> {
    if panels.is_empty() || panels.iter().all(|(_, _, b)| b.is_empty()) {
        return Err("nothing to plot".into());
    }
    let root = SVGBackend::new(path, (900, 320 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for ((title, target, bars), area) in panels.iter().zip(root.split_evenly((panels.len(), 1))) {
        let ymax = bars
            .iter()
            .map(|b| b.relative)
            .fold(*target, f64::max)
            .max(1.0)
            * 1.15;
        let n = bars.len().max(1);
        let mut chart = ChartBuilder::on(&area)
            .caption(title.as_str(), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(70)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n as f64, 0.0..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("x one shard")
            .draw()?;
        for (i, b) in bars.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let x0 = i as f64 + 0.15;
            let x1 = i as f64 + 0.85;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, b.relative)],
                color.filled(),
            )))?;
            // Value above the bar and configuration below the axis, both centred on the bar
            // so neither touches the bar nor its neighbours.
            let mid = (x0 + x1) / 2.0;
            let centred = |size| {
                ("sans-serif", size)
                    .into_text_style(&area)
                    .pos(Pos::new(HPos::Center, VPos::Bottom))
            };
            chart.draw_series(std::iter::once(Text::new(
                format!("{:.2}x", b.relative),
                (mid, b.relative + ymax * 0.02),
                centred(14),
            )))?;
            // Below the axis, in pixels: the chart clips data coordinates below zero.
            // `backend_coord` gives the canvas's pixels, not the panel's, so the label is
            // drawn on the whole canvas (drawn on the panel it would land one panel lower
            // for every panel above it).
            let (px, py) = chart.backend_coord(&(mid, 0.0));
            root.draw(&Text::new(
                b.label.clone(),
                (px, py + 8),
                ("sans-serif", 12)
                    .into_text_style(&area)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        for (y, style) in [(1.0, BLACK.stroke_width(1)), (*target, RED.stroke_width(1))] {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(0.0, y), (n as f64, y)],
                style,
            )))?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_bars_draw_every_configuration_and_refuse_nothing() {
        let dir = std::env::temp_dir().join(format!("netfold-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("scaling.svg");
        let panels = vec![(
            "rr: throughput relative to 1 shard".to_string(),
            1.8,
            vec![
                Bar {
                    label: "2 sh, same, 1 thr".into(),
                    relative: 1.42,
                },
                Bar {
                    label: "1 sh, split, 2 thr".into(),
                    relative: 0.31,
                },
            ],
        )];
        scaling_bars(&path, &panels).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in ["2 sh, same, 1 thr", "1 sh, split, 2 thr", "1.42x", "0.31x"] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(scaling_bars(&path, &[]).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The y coordinate of the SVG text element that holds exactly `text` (plotters writes
    /// the text on a line of its own).
    fn text_y(svg: &str, text: &str) -> f64 {
        let end = svg
            .find(&format!(">\n{text}\n</text>"))
            .unwrap_or_else(|| panic!("{text} missing"));
        let start = svg[..end].rfind("<text").expect("text element");
        let el = &svg[start..end];
        let y = el.find(" y=\"").expect("y attribute") + 4;
        let len = el[y..].find('"').expect("closing quote");
        el[y..y + len].parse().expect("a number")
    }

    #[test]
    fn each_panels_labels_sit_under_its_own_axis() {
        let dir = std::env::temp_dir().join(format!("netfold-plot2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("scaling.svg");
        let panel = |title: &str, label: &str| {
            (
                title.to_string(),
                1.8,
                vec![Bar {
                    label: label.into(),
                    relative: 1.2,
                }],
            )
        };
        let panels = vec![
            panel("stream", "first-panel"),
            panel("rr", "second-panel"),
            panel("crr", "third-panel"),
        ];
        scaling_bars(&path, &panels).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        // Each panel is 320 pixels high; its configuration labels lie inside it, below the
        // middle (under the axis, above the next panel's title).
        for (i, label) in ["first-panel", "second-panel", "third-panel"]
            .iter()
            .enumerate()
        {
            let y = text_y(&svg, label);
            let top = 320.0 * i as f64;
            assert!(
                (top + 160.0..top + 320.0).contains(&y),
                "{label} at y={y}, panel {i} spans {top}..{}",
                top + 320.0
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
