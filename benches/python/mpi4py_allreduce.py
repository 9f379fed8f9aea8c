"""mpi4py's Allreduce of NumPy float32 arrays (the buffer interface, the fast path), timed
as polytensor's `distributed/benches/allreduce.rs` times MPI and polytensor: the best of
five timings of enough calls, each the slowest rank's. Run under mpirun; rank 0 prints
`RESULTS {bytes: seconds per call}`.
"""

import json
import time

import numpy as np
from mpi4py import MPI


def repetitions(nbytes):
    return max(3, min(2000, 100_000_000 // max(nbytes, 1)))


def main():
    comm = MPI.COMM_WORLD
    results = {}
    for k in range(10):
        nbytes = 1024 << (2 * k)
        send = np.ones(nbytes // 4, np.float32)
        recv = np.empty_like(send)
        calls = repetitions(nbytes)
        comm.Allreduce(send, recv, op=MPI.SUM)
        best = float("inf")
        for _ in range(5):
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(calls):
                comm.Allreduce(send, recv, op=MPI.SUM)
            mine = (time.perf_counter() - start) / calls
            best = min(best, comm.allreduce(mine, op=MPI.MAX))
        assert (recv == comm.Get_size()).all()
        results[str(nbytes)] = best
    if comm.Get_rank() == 0:
        print("RESULTS " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
