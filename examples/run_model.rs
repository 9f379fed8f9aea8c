//! Run a frozen TensorFlow inference graph (a TF 1.x `GraphDef` `.pb`, as
//! `convert_variables_to_constants` writes it) on any device: import it, feed its input a
//! seeded random tensor, print the top outputs and the time per `Session::run`.
//!
//! ```sh
//! cargo run --release --example run_model -- model.pb
//! cargo run --release --features wgpu --example run_model -- model.pb --device wgpu:0
//! ```
//!
//! Options: `--device NAME` (default `cpu:0`), `--input NAME:0` (default: the graph's one
//! `Placeholder`), `--output NAME:0` (repeatable; default: the float outputs of the operations
//! nothing reads), `--batch N` for the input's unknown dims (default 1), `--runs N` (default 10),
//! `--top K` (default 5). A graph with an op polytensor lacks fails at import, with an
//! error naming the op and the node.

use std::time::Instant;

use polytensor::graph::{Graph, Output, Session};
use polytensor::prelude::*;

/// The command line.
struct Options {
    model: String,
    device: String,
    input: Option<String>,
    outputs: Vec<String>,
    batch: usize,
    runs: usize,
    top: usize,
}

fn parse() -> std::result::Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        model: String::new(),
        device: "cpu:0".into(),
        input: None,
        outputs: Vec::new(),
        batch: 1,
        runs: 10,
        top: 5,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |text: String| text.parse::<usize>().map_err(|e| format!("{text}: {e}"));
        match arg.as_str() {
            "--device" => options.device = value("--device")?,
            "--input" => options.input = Some(value("--input")?),
            "--output" => options.outputs.push(value("--output")?),
            "--batch" => options.batch = number(value("--batch")?)?,
            "--runs" => options.runs = number(value("--runs")?)?.max(1),
            "--top" => options.top = number(value("--top")?)?,
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            path => options.model = path.to_string(),
        }
    }
    if options.model.is_empty() {
        return Err(
            "usage: run_model MODEL.pb [--device NAME] [--input NAME:0] \
                    [--output NAME:0]... [--batch N] [--runs N] [--top K]"
                .into(),
        );
    }
    Ok(options)
}

/// The graph's one placeholder's output.
fn find_input(graph: &Graph) -> Result<Output> {
    let placeholders: Vec<_> = graph
        .operations()
        .filter(|op| op.op_type() == "Placeholder")
        .collect();
    match placeholders.as_slice() {
        [one] => graph.output(one, 0),
        _ => Err(Error::invalid(format!(
            "the graph has {} placeholders; name the input with --input",
            placeholders.len()
        ))),
    }
}

/// The float outputs of the operations nothing reads: a frozen model's results.
fn find_outputs(graph: &Graph) -> Result<Vec<Output>> {
    let mut read = std::collections::HashSet::new();
    for op in graph.operations() {
        for input in graph.inputs(&op)? {
            read.insert(input.op().name().to_string());
        }
    }
    let mut outputs = Vec::new();
    for op in graph.operations().filter(|op| !read.contains(op.name())) {
        outputs.extend(
            graph
                .outputs(&op)?
                .into_iter()
                .filter(|o| o.dtype().is_float()),
        );
    }
    Ok(outputs)
}

/// A standard-normal tensor from a fixed seed (Box-Muller over an xorshift stream).
fn random_input(
    dims: &[usize],
    dtype: DataType,
    device: &std::sync::Arc<dyn Device>,
) -> Result<Tensor> {
    let n: usize = dims.iter().product();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let values: Vec<f32> = (0..n)
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect();
    Tensor::from_slice(&values, dims, device)?.cast(dtype)
}

fn run(options: &Options) -> Result<()> {
    let device = polytensor::device(&options.device)?;
    let start = Instant::now();
    let graph = Graph::read_graph_def(&options.model)?;
    let imported = start.elapsed();
    let input = match &options.input {
        Some(name) => graph.tensor(name)?,
        None => find_input(&graph)?,
    };
    let outputs = if options.outputs.is_empty() {
        find_outputs(&graph)?
    } else {
        options
            .outputs
            .iter()
            .map(|name| graph.tensor(name))
            .collect::<Result<_>>()?
    };
    let dims: Vec<usize> = match input.shape().dims() {
        Some(dims) => dims.iter().map(|d| d.unwrap_or(options.batch)).collect(),
        None => return Err(Error::invalid("the input's rank is unknown")),
    };
    println!(
        "{}: {} operations; input {} fed [{}] on {}",
        options.model,
        graph.len(),
        input.name(),
        dims.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(","),
        device.name()
    );
    let feed = random_input(&dims, input.dtype(), &device)?;
    let session = Session::new(&graph, device.clone());
    let fetches: Vec<&Output> = outputs.iter().collect();
    // The first run compiles kernels and fills the allocator's caches.
    let first = Instant::now();
    let mut values = session.run(&[(&input, &feed)], &fetches, &[])?;
    println!(
        "read and imported in {:.3} s; the first run (constants to the device, plans) {:.3} s",
        imported.as_secs_f64(),
        first.elapsed().as_secs_f64()
    );
    let mut times = Vec::new();
    for _ in 0..options.runs {
        let start = Instant::now();
        values = session.run(&[(&input, &feed)], &fetches, &[])?;
        device.synchronize()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "Session::run: median {:.3} ms, best {:.3} ms over {} runs",
        times[times.len() / 2],
        times[0],
        times.len()
    );
    for (output, value) in outputs.iter().zip(&values) {
        println!("{} {}", output.name(), value.shape());
        let rows = value
            .to_device(&polytensor::device("cpu:0")?)?
            .cast(DataType::Double)?;
        let last = value.dims().last().copied().unwrap_or(1).max(1);
        for (r, row) in rows.to_vec::<f64>()?.chunks(last).enumerate() {
            let mut ranked: Vec<(usize, f64)> = row.iter().copied().enumerate().collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            let top: Vec<String> = ranked
                .iter()
                .take(options.top)
                .map(|(i, v)| format!("{i}: {v:.5}"))
                .collect();
            println!("  [{r}] {}", top.join("  "));
        }
    }
    Ok(())
}

fn main() {
    let options = match parse() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&options) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
