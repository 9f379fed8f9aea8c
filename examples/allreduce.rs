//! Every rank's tensor summed across processes with MPI: run it on 4 processes with
//! `mpirun -np 4 cargo run --features mpi --example allreduce` (Open MPI installed:
//! `apt install openmpi-bin libopenmpi-dev libclang-dev`).

use polytensor::distributed::{Mpi, Reduction};
use polytensor::prelude::*;

fn main() -> Result<()> {
    let mpi = Mpi::init()?;
    let world = mpi.world()?;
    let (rank, size) = (world.rank(), world.size());
    let device = default_device()?;
    // Rank r holds [r, r + 1, r + 2, r + 3]: the sums are the same on every rank.
    let local = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0], [4], &device)?
        .binary(BinaryOp::Add, &Tensor::scalar(rank as f32, &device)?)?;
    let sum = world.all_reduce(&local, Reduction::Sum)?;
    let mean = world.all_reduce(&local, Reduction::Mean)?;
    let everyone = world.all_gather(&local)?;
    println!(
        "rank {rank} of {size} on {}: local {:?} sum {:?} mean {:?} gathered {} elements",
        device.name(),
        local.to_vec::<f32>()?,
        sum.to_vec::<f32>()?,
        mean.to_vec::<f32>()?,
        everyone.num_elements()
    );
    Ok(())
}
