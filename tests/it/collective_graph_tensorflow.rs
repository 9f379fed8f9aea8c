//! A GraphDef TensorFlow wrote with its collective ops (`tests/python/tf_collective_graph.py`
//! in `target/tf-venv`: CollectiveReduceV2 as sum, mean and max, CollectiveGatherV2,
//! CollectiveBcastSendV2 and CollectiveBcastRecvV2), run in a group of one on every device
//! present, as TensorFlow's own session runs it there: every value must be TensorFlow's.
//! Across processes, `distributed/tests/mpirun.rs` runs the same graph under `mpirun`.
//!
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use crate::common;

use common::golden;
use polytensor::graph::{Graph, Session};
use polytensor::Tensor;
use serde_json::Value as Json;

#[test]
fn tensorflow_collective_ops_run_in_a_group_of_one() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("polytensor-collective-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("collective.pb");
    let answers: Json = serde_json::from_str(&common::run_script(
        &python,
        "tf_collective_graph.py",
        &[path.as_os_str()],
    ))
    .unwrap();
    let graph = Graph::from_graph_def_bytes(&std::fs::read(&path).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let x = graph.tensor("x").unwrap();
    let group_size = graph.tensor("group_size").unwrap();
    for device in golden::devices() {
        let session = Session::new(&graph, device.clone());
        let x_value =
            Tensor::from_slice(&[1.0f32, -2.0, 3.0, 4.0, 5.0, -6.0], [2, 3], &device).unwrap();
        let one = Tensor::scalar(1i32, &device).unwrap();
        let two = Tensor::scalar(2i32, &device).unwrap();
        for (name, want) in answers.as_object().unwrap() {
            let at = format!("{name} on {}", device.name());
            let fetch = graph.tensor(name).unwrap();
            let got = session
                .run(&[(&x, &x_value), (&group_size, &one)], &[&fetch], &[])
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            let want: Vec<f32> = serde_json::from_value(want.clone()).unwrap();
            assert_eq!(got[0].to_vec::<f32>().unwrap(), want, "{at}");
            // A group of two needs a communicator (Session::with_collectives).
            let message = session
                .run(&[(&x, &x_value), (&group_size, &two)], &[&fetch], &[])
                .unwrap_err()
                .to_string();
            assert!(message.contains("group_size is 2"), "{at}: {message}");
        }
        // A receive in a group of one has no sender.
        let received = graph.tensor("received").unwrap();
        let message = session
            .run(&[(&group_size, &one)], &[&received], &[])
            .unwrap_err()
            .to_string();
        assert!(message.contains("no sender"), "{message}");
    }
}
