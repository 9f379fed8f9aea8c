//! Run a TensorFlow model on any device: a frozen inference graph (a `GraphDef` `.pb`, as
//! `convert_variables_to_constants` writes it) or a SavedModel directory
//! (`tf.saved_model.save`, Keras `model.export`). Feed its inputs seeded random tensors,
//! print the top outputs and the time per run.
//!
//! ```sh
//! cargo run --release --example run_model -- model.pb
//! cargo run --release --example run_model -- exported_dir/ --signature serving_default
//! cargo run --release --features wgpu --example run_model -- model.pb --device wgpu:0
//! cargo run --release --example run_model -- model.pb --profile --top 15
//! ```
//!
//! Options: `--device NAME` (default `cpu:0`), `--input NAME:0` (a frozen graph's input;
//! default: its one `Placeholder`), `--output NAME:0` (repeatable; default: the float
//! outputs of the operations nothing reads), `--signature KEY` (a SavedModel's; default
//! `serving_default`: every input fed, every output printed), `--batch N` for unknown dims
//! (default 1), `--runs N` (default 10), `--top K` (default 5), `--profile` (trace the timed
//! runs: the op types and nodes that took longest, `--top` of each, per run), `--trace
//! FILE.json` (those runs in Chrome's trace-event format, for Perfetto or
//! `chrome://tracing`; implies `--profile`). A model with an op
//! polytensor lacks fails at load, with an error naming the op and the node (and the
//! function of a SavedModel's library).

use std::time::Instant;

use polytensor::graph::{Graph, Output, RunOptions, Session, SessionOptions, Trace};
use polytensor::prelude::*;
use polytensor::saved_model::SavedModel;

/// The command line.
struct Options {
    model: String,
    device: String,
    input: Option<String>,
    outputs: Vec<String>,
    signature: String,
    batch: usize,
    runs: usize,
    top: usize,
    profile: bool,
    trace: Option<String>,
}

fn parse() -> std::result::Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        model: String::new(),
        device: "cpu:0".into(),
        input: None,
        outputs: Vec::new(),
        signature: "serving_default".into(),
        batch: 1,
        runs: 10,
        top: 5,
        profile: false,
        trace: None,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |text: String| text.parse::<usize>().map_err(|e| format!("{text}: {e}"));
        match arg.as_str() {
            "--device" => options.device = value("--device")?,
            "--input" => options.input = Some(value("--input")?),
            "--output" => options.outputs.push(value("--output")?),
            "--signature" => options.signature = value("--signature")?,
            "--batch" => options.batch = number(value("--batch")?)?,
            "--runs" => options.runs = number(value("--runs")?)?.max(1),
            "--top" => options.top = number(value("--top")?)?,
            "--profile" => options.profile = true,
            "--trace" => {
                options.trace = Some(value("--trace")?);
                options.profile = true;
            }
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            path => options.model = path.to_string(),
        }
    }
    if options.model.is_empty() {
        return Err(
            "usage: run_model MODEL.pb|SAVED_MODEL_DIR [--device NAME] [--input NAME:0] \
                    [--output NAME:0]... [--signature KEY] [--batch N] [--runs N] [--top K] \
                    [--profile] [--trace FILE.json]"
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

/// A standard-normal tensor from a fixed seed (Box-Muller over an xorshift stream); for an
/// integer input (token ids), integers in [0, 100); for a string input, the element indices
/// as text, on the CPU.
fn random_input(
    dims: &[usize],
    dtype: DataType,
    device: &std::sync::Arc<dyn Device>,
) -> Result<Tensor> {
    let n: usize = dims.iter().product();
    if dtype == DataType::String {
        let text = (0..n).map(|i| i.to_string());
        return Tensor::from_strings(text, dims, &polytensor::device("cpu:0")?);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    if dtype.is_integer() {
        // Token ids and indices: small non-negative integers, below any vocabulary of 100.
        let values: Vec<f32> = (0..n).map(|_| (uniform() * 100.0).floor() as f32).collect();
        return Tensor::from_slice(&values, dims, device)?.cast(dtype);
    }
    let values: Vec<f32> = (0..n)
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect();
    Tensor::from_slice(&values, dims, device)?.cast(dtype)
}

/// One run of a loaded model with run options: its outputs by name.
type RunOnce = Box<dyn Fn(&RunOptions) -> Result<Vec<(String, Tensor)>>>;

/// A model loaded and fed: what it is, and how to run it.
struct Loaded {
    description: String,
    run: RunOnce,
}

/// `dims` with unknown sizes set to the batch.
fn fed_dims(shape: &PartialTensorShape, batch: usize) -> Result<Vec<usize>> {
    match shape.dims() {
        Some(dims) => Ok(dims.iter().map(|d| d.unwrap_or(batch)).collect()),
        None => Err(Error::invalid("an input's rank is unknown")),
    }
}

fn load_frozen(options: &Options, device: &std::sync::Arc<dyn Device>) -> Result<Loaded> {
    let graph = Graph::read_graph_def(&options.model)?;
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
    let dims = fed_dims(input.shape(), options.batch)?;
    let description = format!(
        "{}: {} operations; input {} fed {dims:?} on {}",
        options.model,
        graph.len(),
        input.name(),
        device.name()
    );
    let feed = random_input(&dims, input.dtype(), device)?;
    let session = Session::new(&graph, device.clone());
    Ok(Loaded {
        description,
        run: Box::new(move |run_options| {
            let fetches: Vec<&Output> = outputs.iter().collect();
            let values = session.run_with(run_options, &[(&input, &feed)], &fetches, &[])?;
            Ok(outputs.iter().map(Output::name).zip(values).collect())
        }),
    })
}

fn load_saved_model(options: &Options, device: &std::sync::Arc<dyn Device>) -> Result<Loaded> {
    let mut devices = vec![device.clone()];
    if device.name() != "cpu:0" {
        devices.push(polytensor::device("cpu:0")?);
    }
    let model = SavedModel::load(&options.model, &["serve"], SessionOptions::new(devices))?;
    let signature = model.signature(&options.signature)?.clone();
    let mut feeds = Vec::new();
    let mut fed = Vec::new();
    for (key, spec) in &signature.inputs {
        let dims = fed_dims(&spec.shape, options.batch)?;
        fed.push(format!("{key} {dims:?}"));
        feeds.push((key.clone(), random_input(&dims, spec.dtype, device)?));
    }
    let description = format!(
        "{}: SavedModel, signature {} of {:?}; inputs {} fed on {}",
        options.model,
        options.signature,
        model.signatures().keys().collect::<Vec<_>>(),
        fed.join(", "),
        device.name()
    );
    let key = options.signature.clone();
    Ok(Loaded {
        description,
        run: Box::new(move |run_options| {
            let refs: Vec<(&str, &Tensor)> = feeds.iter().map(|(k, t)| (k.as_str(), t)).collect();
            Ok(model
                .run_with(run_options, &key, &refs)?
                .into_iter()
                .collect())
        }),
    })
}

fn run(options: &Options) -> Result<()> {
    let device = polytensor::device(&options.device)?;
    let start = Instant::now();
    let loaded = if std::path::Path::new(&options.model).is_dir() {
        load_saved_model(options, &device)?
    } else {
        load_frozen(options, &device)?
    };
    let imported = start.elapsed();
    println!("{}", loaded.description);
    // The first run compiles kernels and fills the allocator's caches.
    let first = Instant::now();
    let mut values = (loaded.run)(&RunOptions::default())?;
    println!(
        "read and loaded in {:.3} s; the first run (constants to the device, plans) {:.3} s",
        imported.as_secs_f64(),
        first.elapsed().as_secs_f64()
    );
    let trace = Trace::new();
    let run_options = RunOptions {
        trace: options.profile.then(|| trace.clone()),
        ..RunOptions::default()
    };
    let mut times = Vec::new();
    for _ in 0..options.runs {
        let start = Instant::now();
        values = (loaded.run)(&run_options)?;
        device.synchronize()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "run: median {:.3} ms, best {:.3} ms over {} runs",
        times[times.len() / 2],
        times[0],
        times.len()
    );
    if options.profile {
        let stats = trace.take();
        println!(
            "\nprofile of the timed runs (each step waits for its device):\n{}",
            stats.summary(options.top.max(1))
        );
        if let Some(path) = &options.trace {
            std::fs::write(path, stats.chrome_trace())
                .map_err(|e| Error::io(&format!("writing {path}"), e))?;
            println!("wrote the trace to {path} (open it in https://ui.perfetto.dev)");
        }
    }
    for (name, value) in &values {
        println!("{name} {} {}", value.dtype(), value.shape());
        if !value.dtype().is_float() {
            continue;
        }
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
