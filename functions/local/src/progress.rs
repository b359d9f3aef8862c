//! Progress on long work — count, rate, ETA — on stderr when it is a terminal, and
//! nothing when it is a pipe or a file (scripts and logs get the final line only from
//! the command itself). `CONTINUITY_PROGRESS=always|never` overrides the detection.

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Progress {
    label: String,
    total: Option<u64>,
    /// Counting bytes (shown in MB) rather than items.
    bytes: bool,
    started: Instant,
    shown: Option<Mutex<Instant>>,
}

/// Whether progress lines are drawn.
fn enabled() -> bool {
    match std::env::var("CONTINUITY_PROGRESS").as_deref() {
        Ok("always") => true,
        Ok("never") => false,
        _ => std::io::stderr().is_terminal(),
    }
}

/// One progress line: `label: done/total (rate/s, ETA 12 s)`.
pub fn render(label: &str, done: u64, total: Option<u64>, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(0.001);
    let rate = done as f64 / secs;
    match total {
        Some(t) if t > 0 => {
            let eta = if rate > 0.0 { (t.saturating_sub(done)) as f64 / rate } else { f64::INFINITY };
            let eta = if eta.is_finite() { format!("{:.0} s", eta.ceil()) } else { "?".into() };
            format!("{label}: {done}/{t} ({:.0}%, {rate:.0}/s, ETA {eta})", done as f64 * 100.0 / t as f64)
        }
        _ => format!("{label}: {done} ({rate:.0}/s)"),
    }
}

/// One progress line for bytes: `label: 12.0/48.0 MB (25%, 4.0 MB/s, ETA 9 s)`.
pub fn render_bytes(label: &str, done: u64, total: Option<u64>, elapsed: Duration) -> String {
    let mb = |b: u64| b as f64 / 1_000_000.0;
    let secs = elapsed.as_secs_f64().max(0.001);
    let rate = mb(done) / secs;
    match total {
        Some(t) if t > 0 => {
            let eta = if rate > 0.0 { (mb(t) - mb(done)).max(0.0) / rate } else { f64::INFINITY };
            let eta = if eta.is_finite() { format!("{:.0} s", eta.ceil()) } else { "?".into() };
            format!("{label}: {:.1}/{:.1} MB ({}%, {rate:.1} MB/s, ETA {eta})", mb(done), mb(t), done * 100 / t)
        }
        _ => format!("{label}: {:.1} MB ({rate:.1} MB/s)", mb(done)),
    }
}

impl Progress {
    /// Progress over bytes (a download).
    pub fn bytes(label: impl Into<String>, total: Option<u64>) -> Self {
        Self { bytes: true, ..Self::new(label, total) }
    }

    pub fn new(label: impl Into<String>, total: Option<u64>) -> Self {
        let now = Instant::now();
        Self {
            label: label.into(),
            total,
            bytes: false,
            started: now,
            shown: enabled().then(|| Mutex::new(now.checked_sub(Duration::from_secs(1)).unwrap_or(now))),
        }
    }

    /// `done` items so far; redrawn at most 5 times a second.
    pub fn set(&self, done: u64) {
        let Some(shown) = &self.shown else { return };
        let Ok(mut last) = shown.lock() else { return };
        if last.elapsed() < Duration::from_millis(200) && Some(done) != self.total {
            return;
        }
        *last = Instant::now();
        let line = if self.bytes { render_bytes } else { render }(&self.label, done, self.total, self.started.elapsed());
        eprint!("\r\x1b[2K{line}");
    }

    /// Ends the line (the command prints its own summary after).
    pub fn finish(&self) {
        if self.shown.is_some() {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_has_count_rate_and_eta() {
        assert_eq!(render("import", 50, Some(200), Duration::from_secs(5)), "import: 50/200 (25%, 10/s, ETA 15 s)");
        assert_eq!(render("export", 30, None, Duration::from_secs(3)), "export: 30 (10/s)");
        assert_eq!(render("x", 0, Some(10), Duration::from_secs(1)), "x: 0/10 (0%, 0/s, ETA ?)");
        assert_eq!(
            render_bytes("downloading", 12_000_000, Some(48_000_000), Duration::from_secs(3)),
            "downloading: 12.0/48.0 MB (25%, 4.0 MB/s, ETA 9 s)"
        );
    }
}
