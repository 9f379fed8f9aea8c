//! CPU benchmarks: polytensor next to OpenBLAS, gemm, ndarray and candle in the same run.
//!
//! `cargo bench -p benches` runs everything (under 15 minutes on 2 cores);
//! `cargo xtask bench --quick` is a short smoke run. Throughput is FLOP/s for matmul and
//! bytes/s (all operands, read and written) for memory-bound ops.

use std::hint::black_box;
use std::sync::Arc;

use benches::peers::Peer;
use benches::{tensor, values};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use polytensor::{DataType, Device, ReduceOp, Tensor, UnaryOp};
use rayon::prelude::*;

fn cpu() -> Arc<dyn Device> {
    polytensor::device("cpu:0").expect("the CPU device")
}

fn threads() -> usize {
    rayon::current_num_threads()
}

fn candle_tensor(dims: &[usize], seed: u64) -> candle_core::Tensor {
    let n = dims.iter().product();
    candle_core::Tensor::from_vec(values(n, seed), dims, &candle_core::Device::Cpu)
        .expect("candle tensor")
}

fn ndarray2(rows: usize, cols: usize, seed: u64) -> ndarray::Array2<f32> {
    ndarray::Array2::from_shape_vec((rows, cols), values(rows * cols, seed)).expect("ndarray")
}

/// The dims of a matrix operand: `[rows, cols]`, or `[batch, rows, cols]` for a batch.
fn matrix_dims(batch: usize, rows: usize, cols: usize) -> Vec<usize> {
    if batch > 1 {
        vec![batch, rows, cols]
    } else {
        vec![rows, cols]
    }
}

/// Square, tall and batched f32 and f64 matmul.
fn matmul(c: &mut Criterion) {
    let device = cpu();
    let shapes: Vec<(String, usize, usize, usize, usize)> = [64, 128, 256, 512, 1024, 2048]
        .iter()
        .map(|&s| (format!("{s}"), 1, s, s, s))
        .chain([
            ("tall_4096x256x4096".to_string(), 1, 4096, 256, 4096),
            ("batch_64x128".to_string(), 64, 128, 128, 128),
            // A dense layer at batch 1 (VGG16's fc2): bound by reading the weights.
            ("row_1x4096x4096".to_string(), 1, 1, 4096, 4096),
            // The same at batch 8: still bound by the weights (`few_rows`).
            ("rows_8x4096x4096".to_string(), 1, 8, 4096, 4096),
        ])
        .collect();
    for dtype in [DataType::Float, DataType::Double] {
        let mut group = c.benchmark_group(format!("matmul_{dtype}"));
        for (name, batch, m, k, n) in &shapes {
            let (batch, m, k, n) = (*batch, *m, *k, *n);
            group.throughput(Throughput::Elements((2 * batch * m * n * k) as u64));
            let (dims_a, dims_b) = (matrix_dims(batch, m, k), matrix_dims(batch, k, n));
            let (a, b) = (
                tensor(&dims_a, dtype, 1, &device),
                tensor(&dims_b, dtype, 2, &device),
            );
            group.bench_with_input(BenchmarkId::new("polytensor", name), &(), |bench, _| {
                bench.iter(|| black_box(a.matmul(&b).unwrap()))
            });
            if dtype == DataType::Float {
                peers::<f32>(&mut group, name, (batch, m, k, n), candle_core::DType::F32);
            } else {
                peers::<f64>(&mut group, name, (batch, m, k, n), candle_core::DType::F64);
            }
        }
        group.finish();
    }
}

/// One matrix product `c = a x b` of a peer.
type MatrixProduct<'a, T> = dyn Fn(&[T], &[T], &mut [T]) + 'a;

/// The peers of one matmul case: OpenBLAS and gemm (one call per batch matrix), ndarray
/// (unbatched only) and candle.
fn peers<T: Peer>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    (batch, m, k, n): (usize, usize, usize, usize),
    candle_dtype: candle_core::DType,
) {
    let convert = |v: Vec<f32>| -> Vec<T> { v.into_iter().map(T::from_f32).collect() };
    let (va, vb) = (
        convert(values(batch * m * k, 1)),
        convert(values(batch * k * n, 2)),
    );
    let mut out = vec![T::default(); batch * m * n];
    let each_matrix = |out: &mut [T], multiply: &MatrixProduct<'_, T>| {
        for i in 0..batch {
            multiply(&va[i * m * k..], &vb[i * k * n..], &mut out[i * m * n..]);
        }
    };
    group.bench_with_input(BenchmarkId::new("openblas", name), &(), |bench, _| {
        bench.iter(|| each_matrix(&mut out, &|a, b, c| T::openblas(m, n, k, a, b, c)))
    });
    group.bench_with_input(BenchmarkId::new("gemm", name), &(), |bench, _| {
        bench.iter(|| each_matrix(&mut out, &|a, b, c| T::gemm(m, n, k, a, b, c, threads())))
    });
    if batch == 1 && candle_dtype == candle_core::DType::F32 {
        let (na, nb) = (ndarray2(m, k, 1), ndarray2(k, n, 2));
        group.bench_with_input(BenchmarkId::new("ndarray", name), &(), |bench, _| {
            bench.iter(|| black_box(na.dot(&nb)))
        });
    }
    let id = BenchmarkId::new("candle", name);
    candle_matmul(group, id, (batch, m, k, n), candle_dtype);
}

/// candle's matmul of `(batch, m, k, n)` operands in `dtype`, as benchmark `id`.
fn candle_matmul(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    (batch, m, k, n): (usize, usize, usize, usize),
    dtype: candle_core::DType,
) {
    let operand = |rows, cols, seed| {
        candle_tensor(&matrix_dims(batch, rows, cols), seed)
            .to_dtype(dtype)
            .unwrap()
    };
    let (a, b) = (operand(m, k, 1), operand(k, n, 2));
    group.bench_function(id, |bench| bench.iter(|| black_box(a.matmul(&b).unwrap())));
}

/// f16 and bf16 matmul next to f32: 1024^3 (cases named by the dtype), and the tall and
/// batched shapes of the f32 group (named `dtype_shape`).
fn half_matmul(c: &mut Criterion) {
    let device = cpu();
    let mut group = c.benchmark_group("matmul_16bit");
    for (shape, batch, m, k, n) in [
        ("", 1, 1024, 1024, 1024),
        ("_tall_4096x256x4096", 1, 4096, 256, 4096),
        ("_batch_64x128", 64, 128, 128, 128),
    ] {
        group.throughput(Throughput::Elements((2 * batch * m * k * n) as u64));
        let dims = |rows, cols| matrix_dims(batch, rows, cols);
        for (dtype, candle_dtype) in [
            (DataType::Float, candle_core::DType::F32),
            (DataType::Half, candle_core::DType::F16),
            (DataType::BFloat16, candle_core::DType::BF16),
        ] {
            let case = format!("{}{shape}", dtype.name());
            let (a, b) = (
                tensor(&dims(m, k), dtype, 1, &device),
                tensor(&dims(k, n), dtype, 2, &device),
            );
            group.bench_function(BenchmarkId::new("polytensor", &case), |bench| {
                bench.iter(|| black_box(a.matmul(&b).unwrap()))
            });
            let id = BenchmarkId::new("candle", &case);
            candle_matmul(&mut group, id, (batch, m, k, n), candle_dtype);
        }
    }
    group.finish();
}

const BIG: usize = 1 << 24;

/// Large elementwise ops with a freshly allocated result, broadcasting, strided inputs, and
/// the STREAM-style baseline (a parallel loop into an existing buffer).
fn elementwise(c: &mut Criterion) {
    let device = cpu();
    let mut group = c.benchmark_group("add_16M_f32");
    group.throughput(Throughput::Bytes((3 * BIG * 4) as u64));
    let (a, b) = (
        tensor(&[BIG], DataType::Float, 1, &device),
        tensor(&[BIG], DataType::Float, 2, &device),
    );
    group.bench_function("polytensor", |bench| {
        bench.iter(|| black_box(a.add(&b).unwrap()))
    });
    let (ca, cb) = (candle_tensor(&[BIG], 1), candle_tensor(&[BIG], 2));
    group.bench_function("candle", |bench| {
        bench.iter(|| black_box((&ca + &cb).unwrap()))
    });
    let (na, nb) = (
        ndarray::Array1::from_vec(values(BIG, 1)),
        ndarray::Array1::from_vec(values(BIG, 2)),
    );
    group.bench_function("ndarray", |bench| bench.iter(|| black_box(&na + &nb)));
    let (va, vb) = (values(BIG, 1), values(BIG, 2));
    let mut out = vec![0f32; BIG];
    group.bench_function("stream_add_existing_buffer", |bench| {
        bench.iter(|| {
            out.par_chunks_mut(1 << 16)
                .zip(va.par_chunks(1 << 16))
                .zip(vb.par_chunks(1 << 16))
                .for_each(|((o, x), y)| {
                    o.iter_mut()
                        .zip(x)
                        .zip(y)
                        .for_each(|((o, x), y)| *o = x + y)
                })
        })
    });
    group.finish();

    let mut group = c.benchmark_group("broadcast_add_4096x4096_f32");
    group.throughput(Throughput::Bytes((2 * BIG * 4) as u64));
    let (m, row) = (
        tensor(&[4096, 4096], DataType::Float, 1, &device),
        tensor(&[4096], DataType::Float, 2, &device),
    );
    group.bench_function("polytensor", |bench| {
        bench.iter(|| black_box(m.add(&row).unwrap()))
    });
    let (cm, crow) = (candle_tensor(&[4096, 4096], 1), candle_tensor(&[4096], 2));
    group.bench_function("candle", |bench| {
        bench.iter(|| black_box(cm.broadcast_add(&crow).unwrap()))
    });
    let (nm, nrow) = (
        ndarray2(4096, 4096, 1),
        ndarray::Array1::from_vec(values(4096, 2)),
    );
    group.bench_function("ndarray", |bench| bench.iter(|| black_box(&nm + &nrow)));
    group.finish();

    let mut group = c.benchmark_group("strided_add_4096x4096_f32");
    group.throughput(Throughput::Bytes((3 * BIG * 4) as u64));
    let t = m.t().unwrap();
    group.bench_function("contiguous_plus_contiguous", |bench| {
        bench.iter(|| black_box(m.add(&a.reshape([4096, 4096]).unwrap()).unwrap()))
    });
    group.bench_function("transposed_plus_contiguous", |bench| {
        bench.iter(|| black_box(t.add(&m).unwrap()))
    });
    // The machine's limit for this access pattern: a hand-written tiled loop, no library.
    let (va, vb) = (values(BIG, 1), values(BIG, 2));
    let mut out = vec![0f32; BIG];
    group.bench_function("handwritten_tiled_transposed_loop", |bench| {
        bench.iter(|| {
            // 64x64 tiles; each column of a tile of `va` is one contiguous 256-byte copy.
            const N: usize = 4096;
            const TILE: usize = 64;
            out.par_chunks_mut(N * TILE)
                .enumerate()
                .for_each(|(block, rows)| {
                    let mut tile = [[0f32; TILE]; TILE];
                    for c0 in (0..N).step_by(TILE) {
                        for (c, column) in tile.iter_mut().enumerate() {
                            let from = (c0 + c) * N + block * TILE;
                            column.copy_from_slice(&va[from..from + TILE]);
                        }
                        for r in 0..TILE {
                            let b_row = &vb[(block * TILE + r) * N + c0..][..TILE];
                            let o_row = &mut rows[r * N + c0..][..TILE];
                            for c in 0..TILE {
                                o_row[c] = tile[c][r] + b_row[c];
                            }
                        }
                    }
                })
        })
    });
    group.finish();

    let mut group = c.benchmark_group("tiny_add_1_element");
    let (x, y) = (
        Tensor::scalar(1.0f32, &device).unwrap(),
        Tensor::scalar(2.0f32, &device).unwrap(),
    );
    group.bench_function("polytensor", |bench| {
        bench.iter(|| black_box(x.add(&y).unwrap()))
    });
    let (cx, cy) = (candle_tensor(&[1], 1), candle_tensor(&[1], 2));
    group.bench_function("candle", |bench| {
        bench.iter(|| black_box((&cx + &cy).unwrap()))
    });
    let (nx, ny) = (
        ndarray::Array1::from_vec(vec![1f32]),
        ndarray::Array1::from_vec(vec![2f32]),
    );
    group.bench_function("ndarray", |bench| bench.iter(|| black_box(&nx + &ny)));
    group.finish();
}

/// Views of a small tensor (unsqueeze, transpose, narrow, squeeze): each makes a layout and
/// no copy, so this row guards what building a layout costs.
fn views(c: &mut Criterion) {
    let device = cpu();
    let x = tensor(&[8, 16, 32], DataType::Float, 5, &device);
    let cx = candle_tensor(&[8, 16, 32], 5);
    let mut group = c.benchmark_group("views_8x16x32_f32");
    group.bench_function("polytensor", |bench| {
        bench.iter(|| {
            let v = x.unsqueeze(0).unwrap().transpose(2, 3).unwrap();
            black_box(v.narrow(1, 2, 4).unwrap().squeeze(0).unwrap())
        })
    });
    group.bench_function("candle", |bench| {
        bench.iter(|| {
            let v = cx.unsqueeze(0).unwrap().transpose(2, 3).unwrap();
            black_box(v.narrow(1, 2, 4).unwrap().squeeze(0).unwrap())
        })
    });
    group.finish();
}

/// Transcendental unary ops and the activations on 16M f32.
fn transcendental(c: &mut Criterion) {
    let device = cpu();
    let x = tensor(&[BIG], DataType::Float, 3, &device);
    let cx = candle_tensor(&[BIG], 3);
    let mut group = c.benchmark_group("unary_16M_f32");
    group.throughput(Throughput::Bytes((2 * BIG * 4) as u64));
    for op in [
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Relu,
        UnaryOp::Relu6,
        UnaryOp::Erf,
        UnaryOp::Erfc,
    ] {
        let input = if op == UnaryOp::Log {
            x.abs().unwrap()
        } else {
            x.clone()
        };
        group.bench_function(BenchmarkId::new("polytensor", op.name()), |bench| {
            bench.iter(|| black_box(input.unary(op).unwrap()))
        });
        if matches!(op, UnaryOp::Erf | UnaryOp::Erfc) {
            // GELU's functions: no candle row (it has no erfc).
            continue;
        }
        let cinput = if op == UnaryOp::Log {
            cx.abs().unwrap()
        } else {
            cx.clone()
        };
        let run = |t: &candle_core::Tensor| match op {
            UnaryOp::Exp => t.exp(),
            UnaryOp::Log => t.log(),
            UnaryOp::Tanh => t.tanh(),
            UnaryOp::Sigmoid => candle_core::Tensor::ones_like(t)
                .and_then(|one| one.broadcast_div(&(t.neg()?.exp()? + 1.0)?)),
            UnaryOp::Sin => t.sin(),
            UnaryOp::Relu => t.relu(),
            UnaryOp::Relu6 => t.clamp(0f32, 6f32),
            _ => t.cos(),
        };
        group.bench_function(BenchmarkId::new("candle", op.name()), |bench| {
            bench.iter(|| black_box(run(&cinput).unwrap()))
        });
    }
    group.finish();
}

/// Sums over 16M f32 and over the rows and columns of [4096, 4096].
fn reductions(c: &mut Criterion) {
    let device = cpu();
    let mut group = c.benchmark_group("sum_f32");
    group.throughput(Throughput::Bytes((BIG * 4) as u64));
    let x = tensor(&[BIG], DataType::Float, 4, &device);
    group.bench_function(BenchmarkId::new("polytensor", "all_16M"), |bench| {
        bench.iter(|| black_box(x.reduce_all(ReduceOp::Sum).unwrap()))
    });
    let m = x.reshape([4096, 4096]).unwrap();
    group.bench_function(BenchmarkId::new("polytensor", "rows_4096x4096"), |bench| {
        bench.iter(|| black_box(m.sum(&[1], false).unwrap()))
    });
    group.bench_function(BenchmarkId::new("polytensor", "cols_4096x4096"), |bench| {
        bench.iter(|| black_box(m.sum(&[0], false).unwrap()))
    });
    let cx = candle_tensor(&[4096, 4096], 4);
    group.bench_function(BenchmarkId::new("candle", "all_16M"), |bench| {
        bench.iter(|| black_box(cx.sum_all().unwrap()))
    });
    group.bench_function(BenchmarkId::new("candle", "rows_4096x4096"), |bench| {
        bench.iter(|| black_box(cx.sum(1).unwrap()))
    });
    group.bench_function(BenchmarkId::new("candle", "cols_4096x4096"), |bench| {
        bench.iter(|| black_box(cx.sum(0).unwrap()))
    });
    let v = values(BIG, 4);
    group.bench_function(BenchmarkId::new("stream_read", "all_16M"), |bench| {
        bench.iter(|| {
            // 16 independent lanes per chunk, so the loop is bound by memory, not by add latency.
            black_box(
                v.par_chunks(1 << 16)
                    .map(|c| {
                        let mut lanes = [0f32; 16];
                        c.chunks_exact(16)
                            .for_each(|g| lanes.iter_mut().zip(g).for_each(|(l, x)| *l += x));
                        lanes.iter().sum::<f32>()
                    })
                    .sum::<f32>(),
            )
        })
    });
    group.finish();
}

/// The layout-bound layers of the models (issue 50): a softmax over rows, a layer
/// normalization (a transformer's), a per-channel constant subtracted from an NHWC image
/// (Keras's `Normalization`), a join along the channels (DenseNet), an embedding lookup, a
/// max over time (a global max pool), a max pool; candle beside them where it has the op.
fn layers(c: &mut Criterion) {
    let device = cpu();
    let mut group = c.benchmark_group("layers_f32");
    let logits = tensor(&[4096, 1024], DataType::Float, 5, &device);
    group.bench_function(
        BenchmarkId::new("polytensor", "softmax_4096x1024"),
        |bench| bench.iter(|| black_box(logits.softmax().unwrap())),
    );
    let (features, gamma, beta) = (
        tensor(&[16, 64, 128], DataType::Float, 11, &device),
        tensor(&[128], DataType::Float, 12, &device),
        tensor(&[128], DataType::Float, 13, &device),
    );
    group.bench_function(
        BenchmarkId::new("polytensor", "layer_norm_16x64x128"),
        |bench| {
            bench.iter(|| {
                black_box(
                    features
                        .layer_norm(Some(&gamma), Some(&beta), 1e-6)
                        .unwrap(),
                )
            })
        },
    );
    let image = tensor(&[16, 64, 64, 3], DataType::Float, 14, &device);
    let mean = tensor(&[1, 1, 1, 3], DataType::Float, 15, &device);
    group.bench_function(
        BenchmarkId::new("polytensor", "sub_16x64x64x3_by_channel"),
        |bench| bench.iter(|| black_box(image.sub(&mean).unwrap())),
    );
    let (rows, a, b) = (16 * 32 * 32, 128, 32);
    let (left, right) = (
        tensor(&[rows, a], DataType::Float, 6, &device),
        tensor(&[rows, b], DataType::Float, 7, &device),
    );
    let (cleft, cright) = (candle_tensor(&[rows, a], 6), candle_tensor(&[rows, b], 7));
    let name = "concat_16384x128_16384x32_last_axis";
    group.bench_function(BenchmarkId::new("polytensor", name), |bench| {
        bench.iter(|| black_box(Tensor::concat(&[&left, &right], -1).unwrap()))
    });
    group.bench_function(BenchmarkId::new("candle", name), |bench| {
        bench.iter(|| black_box(candle_core::Tensor::cat(&[&cleft, &cright], 1).unwrap()))
    });
    let (vocabulary, width, count) = (8000, 64, 16 * 128);
    let table = tensor(&[vocabulary, width], DataType::Float, 8, &device);
    let ids: Vec<u32> = (0..count as u32)
        .map(|i| i * 7919 % vocabulary as u32)
        .collect();
    let signed: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
    let index = Tensor::from_slice(&signed, [count], &device).unwrap();
    let ctable = candle_tensor(&[vocabulary, width], 8);
    let cindex = candle_core::Tensor::from_vec(ids, count, &candle_core::Device::Cpu).unwrap();
    let name = "gather_2048_rows_of_8000x64";
    group.bench_function(BenchmarkId::new("polytensor", name), |bench| {
        bench.iter(|| black_box(table.gather(&index, 0, 0).unwrap()))
    });
    group.bench_function(BenchmarkId::new("candle", name), |bench| {
        bench.iter(|| black_box(ctable.index_select(&cindex, 0).unwrap()))
    });
    let series = tensor(&[64, 512, 256], DataType::Float, 9, &device);
    let cseries = candle_tensor(&[64, 512, 256], 9);
    let name = "max_over_axis_1_of_64x512x256";
    group.bench_function(BenchmarkId::new("polytensor", name), |bench| {
        bench.iter(|| black_box(series.max(&[1], false).unwrap()))
    });
    group.bench_function(BenchmarkId::new("candle", name), |bench| {
        bench.iter(|| black_box(cseries.max(1).unwrap()))
    });
    // Xception's and InceptionV3's max pools: 3x3 of stride 2 over NHWC.
    let image = tensor(&[16, 48, 48, 128], DataType::Float, 10, &device);
    let pool = polytensor::Pool2dOptions {
        window: [3, 3],
        strides: [2, 2],
        padding: polytensor::Padding::Same,
        format: polytensor::DataFormat::Nhwc,
    };
    group.bench_function(
        BenchmarkId::new("polytensor", "max_pool_3x3_s2_16x48x48x128"),
        |bench| bench.iter(|| black_box(image.max_pool2d(&pool).unwrap())),
    );
    group.finish();
}

/// The one-pass kernels of the session's fused steps: swish on 16M f32, and a batch norm
/// with its `Relu` on [16, 32, 32, 256] (DenseNet's pre-activation).
fn fused_layers(c: &mut Criterion) {
    let device = cpu();
    let mut group = c.benchmark_group("fused_f32");
    let x = tensor(&[BIG], DataType::Float, 10, &device);
    group.bench_function(BenchmarkId::new("polytensor", "swish_16M"), |bench| {
        bench.iter(|| black_box(x.swish(1.0).unwrap()))
    });
    let image = tensor(&[16, 32, 32, 256], DataType::Float, 11, &device);
    let epilogue = polytensor::ConvEpilogue {
        scale: Some(tensor(&[256], DataType::Float, 12, &device)),
        shift: Some(tensor(&[256], DataType::Float, 13, &device)),
        activation: Some(UnaryOp::Relu),
        ..polytensor::ConvEpilogue::default()
    };
    let name = "channel_affine_relu_16x32x32x256";
    group.bench_function(BenchmarkId::new("polytensor", name), |bench| {
        bench.iter(|| black_box(image.channel_affine(&epilogue).unwrap()))
    });
    group.finish();
}

/// The FMA peak of this machine, 1 and 2 threads, f32 and f64: the denominator of matmul's
/// "% of peak".
fn fma_peak(c: &mut Criterion) {
    if !benches::fma_burst(false) {
        eprintln!("fma_peak skipped: this CPU has no AVX-512");
        return;
    }
    let mut group = c.benchmark_group("fma_peak_avx512");
    for double in [false, true] {
        let dtype = if double { "f64" } else { "f32" };
        let flops = benches::fma_burst_flops(double);
        group.throughput(Throughput::Elements(flops));
        group.bench_function(
            BenchmarkId::new("fma_loop", format!("{dtype}_1_thread")),
            |b| b.iter(|| benches::fma_burst(double)),
        );
        group.throughput(Throughput::Elements(2 * flops));
        group.bench_function(
            BenchmarkId::new("fma_loop", format!("{dtype}_2_threads")),
            |b| {
                b.iter(|| rayon::join(|| benches::fma_burst(double), || benches::fma_burst(double)))
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = cpu_benches;
    config = benches::criterion_config();
    targets = fma_peak, matmul, half_matmul, elementwise, views, transcendental, reductions,
        layers, fused_layers
}
criterion_main!(cpu_benches);
