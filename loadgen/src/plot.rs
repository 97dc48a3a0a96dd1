//! The plots (SVG), one line per broker: the latency-percentile plot (x = percentile on the
//! usual HdrHistogram log scale, 0, 90, 99, 99.9, 99.99, 99.999 % equally spaced, y = latency
//! in ms) and the sweep plot (x = achieved msg/s, log scale, y = p99 in ms).

use anyhow::Context as _;
use hdrhistogram::Histogram;
use plotters::prelude::*;
use std::path::Path;

/// Plot size in pixels.
const SIZE: (u32, u32) = (900, 560);
/// Points per decade of the x axis.
const POINTS_PER_NINE: u32 = 20;
/// Nines shown: up to 99.999 %.
const NINES: u32 = 5;
/// Line colours, one per broker.
const COLOURS: [RGBColor; 4] = [BLUE, RED, GREEN, MAGENTA];

/// Label of an x position that is a whole number of nines.
fn percentile_label(x: &f64) -> String {
    let n = x.round() as i32;
    if n <= 0 {
        return "0%".into();
    }
    let percent = 100.0 * (1.0 - 10f64.powi(-n));
    format!("{percent:.prec$}%", prec = (n - 2).max(0) as usize)
}

/// (x, latency ms) points of one histogram (µs) up to 99.999 %; x is the number of nines of
/// the quantile, log10(1 / (1 − q)).
fn points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    (0..=NINES * POINTS_PER_NINE)
        .map(|i| {
            let x = f64::from(i) / f64::from(POINTS_PER_NINE);
            let q = 1.0 - 10f64.powf(-x);
            (x, h.value_at_quantile(q) as f64 / 1e3)
        })
        .collect()
}

/// Writes the plot of `series` (label, histogram in µs) to `path`.
pub fn write_svg(
    path: &Path,
    title: &str,
    series: &[(String, &Histogram<u64>)],
) -> anyhow::Result<()> {
    let lines: Vec<(&String, Vec<(f64, f64)>)> =
        series.iter().map(|(l, h)| (l, points(h))).collect();
    let y_max = lines
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.1))
        .fold(0.001f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..f64::from(NINES), 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_labels(NINES as usize + 1)
            .x_label_formatter(&percentile_label)
            .x_desc("percentile")
            .y_desc("latency (ms)")
            .draw()?;
        for (i, (label, pts)) in lines.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw()
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("drawing {}", path.display()))
}

/// Writes the sweep plot to `path`: per broker (label, [(achieved msg/s, p99 ms)]), x on a
/// log scale.
pub fn write_sweep_svg(
    path: &Path,
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let all = || series.iter().flat_map(|(_, pts)| pts.iter());
    let x_min = all()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min)
        .min(1_000.0)
        * 0.8;
    let x_max = all().map(|p| p.0).fold(1.0, f64::max).max(x_min * 2.0) * 1.25;
    let y_max = all().map(|p| p.1).fold(0.001f64, f64::max) * 1.1;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min..x_max).log_scale(), 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("achieved rate (msg/s)")
            .y_desc("p99 latency (ms)")
            .draw()?;
        for (i, (label, pts)) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw()
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("drawing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::new_histogram;

    #[test]
    fn labels_and_positions_of_the_percentile_axis() {
        assert_eq!(percentile_label(&0.0), "0%");
        assert_eq!(percentile_label(&1.0), "90%");
        assert_eq!(percentile_label(&2.0), "99%");
        assert_eq!(percentile_label(&3.0), "99.9%");
        assert_eq!(percentile_label(&5.0), "99.999%");
    }

    #[test]
    fn svg_has_one_line_per_broker() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        for v in 1..=10_000u64 {
            a.record(v).expect("in range");
            b.record(v * 2).expect("in range");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plot.svg");
        write_svg(
            &path,
            "test",
            &[("first".into(), &a), ("second".into(), &b)],
        )
        .expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.contains("<svg"));
        assert!(svg.contains("first") && svg.contains("second"));
        // Each broker's line has its own colour (the mesh is black).
        assert!(svg.contains(r##"stroke="#0000FF""##), "first line");
        assert!(svg.contains(r##"stroke="#FF0000""##), "second line");
    }

    #[test]
    fn sweep_svg_has_one_line_per_broker() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sweep.svg");
        let a = vec![(1_000.0, 1.0), (2_000.0, 1.5), (4_800.0, 9.0)];
        let b = vec![(1_000.0, 2.0), (1_900.0, 3.0)];
        write_sweep_svg(&path, "test", &[("sluice".into(), a), ("kafka".into(), b)])
            .expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.contains("sluice") && svg.contains("kafka"));
        assert!(svg.contains(r##"stroke="#0000FF""##), "first line");
        assert!(svg.contains(r##"stroke="#FF0000""##), "second line");
    }
}
