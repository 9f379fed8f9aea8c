//! The program of the README's "SparseTensor" section: a sparse placeholder feeding
//! `SparseTensorDenseMatMul` in a graph, fed one `SparseTensor`.

use polytensor::graph::{Endpoint, Graph, Session, SessionValue};
use polytensor::prelude::*;
use polytensor::SparseTensor;

fn main() -> polytensor::Result<()> {
    let device = polytensor::default_device()?;
    let mut graph = Graph::new();
    let ids = graph.sparse_placeholder("ids", DataType::Float, Some(2))?; // three placeholders
    let weights = graph.constant_values(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    let product = graph
        .op("SparseTensorDenseMatMul")
        .input(&ids.indices)
        .input(&ids.values)
        .input(&ids.dense_shape)
        .input(&weights)
        .build_output()?;
    let values = Tensor::from_slice(&[5.0f32], [1], &device)?;
    let fed = SessionValue::from(SparseTensor::from_coo(&[[1, 0]], &values, &[2, 2])?);
    let session = Session::new(&graph, device);
    let out = session.run_values(
        &[(Endpoint::Sparse(&ids), &fed)],
        &[Endpoint::Tensor(&product)],
        &[],
    )?;
    let product = out[0].clone().into_tensor()?;
    println!("{product}"); // [[0, 0], [5, 10]]
    assert_eq!(product.to_vec::<f32>()?, vec![0.0, 0.0, 5.0, 10.0]);
    Ok(())
}
