//! Every rank's CUDA tensor summed across processes by NCCL, one GPU per rank: run it with
//! `mpirun -np 2 cargo run --features cuda,mpi --example allreduce_nccl` on a machine with
//! two GPUs, NCCL (`libnccl.so`) and Open MPI. MPI starts the ranks and hands rank 0's NCCL
//! id to the others; NCCL moves the bytes GPU to GPU. Without a GPU or NCCL it says why.

use polytensor::distributed::nccl::NcclCommunicator;
use polytensor::distributed::{Mpi, Reduction};
use polytensor::prelude::*;

fn main() -> Result<()> {
    let mpi = Mpi::init()?;
    let world = mpi.world()?;
    let (rank, size) = (world.rank(), world.size());
    let cuda: Vec<_> = polytensor::devices()
        .into_iter()
        .filter(|entry| entry.name.starts_with("cuda"))
        .collect();
    let gpus: Vec<_> = cuda.iter().filter_map(|e| e.device().cloned()).collect();
    if gpus.is_empty() {
        // (The same on every rank of one machine, so no rank waits for another.)
        eprintln!("rank {rank}: no GPU for NCCL: {cuda:?}");
        return Ok(());
    }
    let gpu = gpus[rank % gpus.len()].clone();
    let nccl = NcclCommunicator::new(&world, &gpu)?;
    // Rank r holds [r, r + 1, r + 2, r + 3] on its GPU: the sums are the same on every rank.
    let local = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0], [4], &gpu)?
        .binary(BinaryOp::Add, &Tensor::scalar(rank as f32, &gpu)?)?;
    let sum = nccl.all_reduce(&local, Reduction::Sum)?;
    let gathered = nccl.all_gather(&local)?;
    println!(
        "rank {rank} of {size} on {}: sum {:?}, gathered {} elements",
        gpu.name(),
        sum.to_vec::<f32>()?,
        gathered.num_elements()
    );
    Ok(())
}
