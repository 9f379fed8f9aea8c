use polytensor::graph::{RunOptions, Session, SessionOptions, Trace};
fn main() {
    let device = polytensor::device("cpu:0").unwrap();
    let which = std::env::args().nth(1).unwrap_or("cnn".into());
    let step = if which == "cnn" {
        benches::training::mnist_cnn(32, &device)
    } else {
        benches::training::mlp(32, &device)
    }
    .unwrap();
    let session =
        Session::with_options(&step.graph, SessionOptions::new(vec![device.clone()])).unwrap();
    let init: Vec<_> = step.init.iter().collect();
    session.run(&[], &[], &init).unwrap();
    let feeds: Vec<_> = step.feeds.iter().map(|(p, v)| (p, v)).collect();
    for _ in 0..20 {
        session.run(&feeds, &[], &[&step.step]).unwrap();
    }
    let trace = Trace::new();
    let options = RunOptions {
        trace: Some(trace.clone()),
        ..Default::default()
    };
    for _ in 0..20 {
        session
            .run_with(&options, &feeds, &[], &[&step.step])
            .unwrap();
    }
    println!("{}", trace.stats().summary(40));
}
