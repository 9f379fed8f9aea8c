//! Progress of long work (loading a model, reading a checkpoint, a conformance run, `--repeat`
//! loops): a bar on a terminal (`indicatif`), plain lines when stderr is piped (CI logs, a
//! file), so that logs stay readable and a terminal is not flooded.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the piped form prints a line for counted work.
const LINE_EVERY: Duration = Duration::from_secs(2);

/// One piece of long work, counted (`total` steps) or not (a spinner).
pub struct Progress {
    what: String,
    started: Instant,
    shape: Shape,
}

enum Shape {
    /// On a terminal.
    Bar(ProgressBar),
    /// Piped: a line now and then, and one at the end.
    Lines { total: u64, last_line: Instant },
}

impl Progress {
    /// Work of `total` steps (`0`: not counted, a spinner), named `what`.
    pub fn start(what: impl Into<String>, total: u64) -> Self {
        let what = what.into();
        let shape = if std::io::stderr().is_terminal() {
            let bar = if total == 0 {
                let bar = ProgressBar::new_spinner();
                bar.enable_steady_tick(Duration::from_millis(100));
                bar
            } else {
                let bar = ProgressBar::new(total);
                bar.set_style(
                    ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                );
                bar
            };
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.set_message(what.clone());
            Shape::Bar(bar)
        } else {
            eprintln!("{what}...");
            Shape::Lines {
                total,
                last_line: Instant::now(),
            }
        };
        Progress {
            what,
            started: Instant::now(),
            shape,
        }
    }

    /// `done` steps of the total are done.
    pub fn set(&mut self, done: u64) {
        match &mut self.shape {
            Shape::Bar(bar) => bar.set_position(done),
            Shape::Lines { total, last_line } => {
                if *total > 0 && done < *total && last_line.elapsed() >= LINE_EVERY {
                    eprintln!(
                        "  {}: {done}/{total}, {:.1} s",
                        self.what,
                        self.started.elapsed().as_secs_f64()
                    );
                    *last_line = Instant::now();
                }
            }
        }
    }

    /// The work is done: the bar gives way to one line, `done` (the time is added).
    pub fn finish(self, done: &str) {
        let line = format!("{done} in {:.2} s", self.started.elapsed().as_secs_f64());
        match self.shape {
            Shape::Bar(bar) => bar.finish_and_clear(),
            Shape::Lines { .. } => {}
        }
        eprintln!("{line}");
    }
}
