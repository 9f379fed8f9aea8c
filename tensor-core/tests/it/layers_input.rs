//! Hostile input to the inference ops: each is an `Err` with a clear message (TensorFlow's
//! where it has one), never a panic, an overflow or an allocation the device cannot hold.

use std::sync::Arc;

use polytensor_core::{
    Conv2dOptions, DataFormat, DataType, Device, HostAllocator, Padding, StridedSliceSpec, Tensor,
};
use polytensor_cpu::CpuDevice;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn zeros(dims: &[usize]) -> Tensor {
    Tensor::zeros(dims, DataType::Float, &cpu()).unwrap()
}

fn message(result: polytensor_core::Result<Tensor>) -> String {
    result.expect_err("an error").to_string()
}

#[test]
fn convolutions_refuse_what_tensorflow_refuses() {
    let options = Conv2dOptions::default();
    let x = zeros(&[1, 5, 5, 3]);
    assert!(
        message(zeros(&[5, 5, 3]).conv2d(&zeros(&[3, 3, 3, 2]), &options))
            .contains("must be 4-dimensional")
    );
    assert!(message(x.conv2d(&zeros(&[3, 3, 2, 2]), &options))
        .contains("input depth must be evenly divisible by filter depth: 3 vs 2"));
    assert!(message(x.conv2d(&zeros(&[7, 1, 3, 2]), &options))
        .contains("Computed output size would be negative"));
    let zero_stride = Conv2dOptions {
        strides: [0, 1],
        ..Default::default()
    };
    assert!(x.conv2d(&zeros(&[1, 1, 3, 2]), &zero_stride).is_err());
    let doubles = Tensor::zeros([1, 1, 3, 2], DataType::Double, &cpu()).unwrap();
    assert!(x.conv2d(&doubles, &options).is_err());
    // A stride or dilation far beyond the input leaves one window: no overflow.
    let huge = Conv2dOptions {
        strides: [1 << 40, 1 << 40],
        dilations: [1 << 40, 1],
        padding: Padding::Valid,
        ..Default::default()
    };
    let y = x.conv2d(&zeros(&[1, 2, 3, 2]), &huge).unwrap();
    assert_eq!(y.dims(), [1, 1, 1, 2]);
    let y = x.depthwise_conv2d(&zeros(&[1, 2, 3, 1]), &huge).unwrap();
    assert_eq!(y.dims(), [1, 1, 1, 3]);
    // A filter whose depth divides the input's is a grouped convolution: each group of
    // channels with its share of the filters; the filters must split into the groups.
    let values: Vec<f32> = (0..64).map(|i| (i % 7) as f32 - 3.0).collect();
    let image = Tensor::from_slice(&values, [1, 4, 4, 4], &cpu()).unwrap();
    let weights: Vec<f32> = (0..24).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
    let filter = Tensor::from_slice(&weights, [1, 3, 2, 4], &cpu()).unwrap();
    let grouped = image.conv2d(&filter, &options).unwrap();
    for g in 0..2 {
        let part = image
            .narrow(3, 2 * g, 2)
            .unwrap()
            .conv2d(&filter.narrow(3, 2 * g, 2).unwrap(), &options)
            .unwrap();
        let ours = grouped.narrow(3, 2 * g, 2).unwrap();
        assert_eq!(ours.to_vec::<f32>().unwrap(), part.to_vec::<f32>().unwrap());
    }
    assert!(message(image.conv2d(&zeros(&[1, 1, 2, 3]), &options))
        .contains("output depth must be evenly divisible by number of groups: 3 vs 2"));
}

#[test]
fn batch_norm_takes_4_or_5_dimensional_images_only() {
    let empty = zeros(&[0]);
    for dims in [&[][..], &[3], &[2, 3]] {
        let error =
            message(zeros(dims).batch_norm(&empty, &empty, &empty, &empty, 1e-3, DataFormat::Nhwc));
        assert!(
            error.contains("input must be 4 or 5-dimensional"),
            "{error}"
        );
    }
    let params = zeros(&[3]);
    let y = zeros(&[1, 2, 2, 3])
        .batch_norm(&params, &params, &params, &params, 1e-3, DataFormat::Nhwc)
        .unwrap();
    assert_eq!(y.dims(), [1, 2, 2, 3]);
}

#[test]
fn an_identity_whose_size_overflows_is_refused_before_its_indices() {
    // The shape's own error, before any index tensor is made (2^32 x 2^32 built 16 GiB of
    // indices before).
    for (rows, cols) in [(1usize << 32, 1usize << 32), (usize::MAX, 2), (1 << 62, 4)] {
        let error = Tensor::eye(rows, cols, DataType::Float, &cpu()).unwrap_err();
        assert!(
            matches!(error, polytensor_core::Error::InvalidShape(_)),
            "{rows} x {cols}: {error}"
        );
    }
    let eye = Tensor::eye(2, 3, DataType::Float, &cpu()).unwrap();
    assert_eq!(eye.to_vec::<f32>().unwrap(), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
}

#[test]
fn pooling_windows_far_larger_than_the_image_pool_the_whole_image() {
    let values: Vec<f32> = (0..25).map(|i| (i * 7 % 25) as f32).collect();
    let x = Tensor::from_slice(&values, [1, 5, 5, 1], &cpu()).unwrap();
    for window in [1usize << 40, 1 << 62] {
        let options = polytensor_core::Pool2dOptions {
            window: [window, window],
            strides: [1, 1],
            padding: Padding::Same,
            format: DataFormat::Nhwc,
        };
        // Every output's window covers the whole image (and padding, which pooling skips).
        let max = x.max_pool2d(&options).unwrap();
        assert_eq!(max.to_vec::<f32>().unwrap(), vec![24.0; 25]);
        let mean = x.avg_pool2d(&options).unwrap();
        assert_eq!(mean.to_vec::<f32>().unwrap(), vec![12.0; 25]);
    }
}

#[test]
fn explicit_pooling_padding_must_be_smaller_than_the_window() {
    // A window that lies entirely in the padding has no maximum or mean: TensorFlow's
    // pooling kernels refuse padding as large as the window, and so do both pools here.
    let x = Tensor::ones([1, 1, 1, 1], DataType::Float, &cpu()).unwrap();
    let pool = |pairs: Vec<(usize, usize)>| polytensor_core::Pool2dOptions {
        window: [2, 2],
        strides: [1, 1],
        padding: Padding::Explicit(pairs),
        format: DataFormat::Nhwc,
    };
    for (pairs, side) in [
        (vec![(3, 3), (3, 3)], "Top padding 3"),
        (vec![(0, 2), (0, 0)], "Bottom padding 2"),
        (vec![(1, 1), (2, 0)], "Left padding 2"),
        (vec![(1, 1), (1, 5)], "Right padding 5"),
    ] {
        let needle = format!("{side} needs to be smaller than the window size 2");
        for result in [
            x.max_pool2d(&pool(pairs.clone())),
            x.avg_pool2d(&pool(pairs.clone())),
        ] {
            let message = message(result);
            assert!(message.contains(&needle), "{message}");
        }
    }
    // Padding smaller than the window pools what each window covers.
    let mean = x.avg_pool2d(&pool(vec![(1, 1), (1, 1)])).unwrap();
    assert_eq!(mean.to_vec::<f32>().unwrap(), vec![1.0; 4]);
}

#[test]
fn slices_with_extreme_values_are_errors_or_views() {
    let x = Tensor::arange(0i64, 20, 1, DataType::Float, &cpu())
        .unwrap()
        .reshape([4, 5])
        .unwrap();
    let spec = |begin: Vec<i64>, end: Vec<i64>, strides: Vec<i64>| StridedSliceSpec {
        begin,
        end,
        strides,
        ..Default::default()
    };
    assert!(message(x.strided_slice(&spec(vec![0], vec![1], vec![0])))
        .contains("strides[0] must be non-zero"));
    assert!(x
        .strided_slice(&spec(vec![0], vec![1, 2], vec![1]))
        .is_err());
    let shrink = StridedSliceSpec {
        shrink_axis_mask: 1,
        ..spec(vec![9], vec![10], vec![1])
    };
    assert!(message(x.strided_slice(&shrink)).contains("out of bounds"));
    let two_ellipses = StridedSliceSpec {
        ellipsis_mask: 0b11,
        ..spec(vec![0, 0], vec![0, 0], vec![1, 1])
    };
    assert!(x.strided_slice(&two_ellipses).is_err());
    // Steps of 2^62 take one element each.
    let far = spec(vec![1, -1], vec![4, 0], vec![1 << 62, -(1 << 62)]);
    let one = x.strided_slice(&far).unwrap();
    assert_eq!(one.to_vec::<f32>().unwrap(), vec![9.0]);
    assert!(x.slice_at(&[1, 0], &[i64::MAX, 1]).is_err());
    assert!(x.slice_at(&[5, 0], &[0, 1]).is_err());
    assert!(x.split_sizes(&[i64::MAX, i64::MAX], 0).is_err());
    assert!(x.split_sizes(&[1, -2, 3], 0).is_err());
    assert!(x.split(3, 0).is_err());
}

#[test]
fn joins_pads_and_gathers_check_their_operands() {
    let (a, b) = (zeros(&[2, 3]), zeros(&[3]));
    assert!(message(Tensor::concat(&[&a, &b], 0)).contains("Ranks of all input tensors"));
    assert!(message(Tensor::concat(&[&a, &zeros(&[3, 4])], 0))
        .contains("Dimension 1 in both shapes must be equal"));
    assert!(message(Tensor::concat(&[&zeros(&[])], 0)).contains("Can't concatenate scalars"));
    assert!(Tensor::concat(&[], 0).is_err());
    assert!(message(Tensor::concat(&[&a, &a], 2)).contains("in the range [-2, 2)"));
    assert!(message(Tensor::stack(&[&a, &zeros(&[3, 2])], 0)).contains("must match"));
    assert!(a.pad(&[(1, 1)], 0.0f32).is_err());
    assert!(a.pad(&[(usize::MAX, 1), (0, 0)], 0.0f32).is_err());
    // A pad value the dtype cannot hold is refused, not truncated (1.5 became 1).
    let ints = Tensor::from_slice(&[1i32, 2], [2], &cpu()).unwrap();
    assert!(message(ints.pad(&[(1, 1)], 1.5f32)).contains("Expected int32, but got 1.5"));
    assert!(message(ints.pad(&[(1, 1)], 1i64 << 33)).contains("Expected int32"));
    let bytes = Tensor::from_slice(&[1u8], [1], &cpu()).unwrap();
    assert!(message(bytes.pad(&[(1, 0)], -1i64)).contains("Expected uint8"));
    assert_eq!(
        ints.pad(&[(1, 1)], 7.0f32)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [7, 1, 2, 7]
    );
    assert!(a
        .mirror_pad(&[(2, 0), (0, 0)], polytensor_core::MirrorMode::Reflect)
        .is_err());
    let params = zeros(&[5, 2]);
    let indices = Tensor::from_slice(&[1i32, 7], [2], &cpu()).unwrap();
    assert!(message(params.gather(&indices, 0, 0)).contains("indices[1] = 7 is not in [0, 5)"));
    assert!(params.gather(&indices, 0, 1).is_err());
    assert!(params.gather(&zeros(&[2]), 0, 0).is_err());
    assert!(a.tile(&[2]).is_err());
    // Reversal is a view; its axes are checked as TensorFlow's ReverseV2 checks them.
    let counted = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], [2, 3], &cpu()).unwrap();
    let flipped = counted.reverse(&[0, 1]).unwrap();
    assert_eq!(flipped.to_vec::<i32>().unwrap(), [5, 4, 3, 2, 1, 0]);
    assert_eq!(
        flipped.reverse(&[-2]).unwrap().to_vec::<i32>().unwrap(),
        [2, 1, 0, 5, 4, 3]
    );
    assert!(message(counted.reverse(&[1, -1])).contains("axis 1 specified more than once."));
    assert!(message(counted.reverse(&[2])).contains("'axis'[0] = 2 is out of valid range [0, 1"));
    assert!(message(counted.reverse(&[i64::MIN])).contains("out of valid range"));
    // Space to batch and back, with TensorFlow's checks.
    let image = Tensor::from_slice(&(0..30).collect::<Vec<i32>>(), [1, 5, 3, 2], &cpu()).unwrap();
    let batched = image.space_to_batch_nd(&[2, 3], &[(1, 0), (0, 0)]).unwrap();
    assert_eq!(batched.dims(), &[6, 3, 1, 2]);
    let back = batched
        .batch_to_space_nd(&[2, 3], &[(1, 0), (0, 0)])
        .unwrap();
    assert_eq!(
        back.to_vec::<i32>().unwrap(),
        image.to_vec::<i32>().unwrap()
    );
    assert!(message(image.space_to_batch_nd(&[2, 3], &[(0, 0), (0, 0)]))
        .contains("padded_shape[0]=5 is not divisible by block_shape[0]=2"));
    assert!(message(image.space_to_batch_nd(&[0], &[(0, 0)])).contains("must be positive"));
    assert!(message(image.batch_to_space_nd(&[2], &[(0, 0)]))
        .contains("Input batch dimension (1) is not divisible by product of block sizes (2)"));
    assert!(
        message(batched.batch_to_space_nd(&[2, 3], &[(9, 0), (0, 0)]))
            .contains("cropped_shape[0]=-3 must be non-negative")
    );
    assert!(
        message(image.space_to_batch_nd(&[1, 1, 1, 1], &[(0, 0); 4]))
            .contains("input rank should be >= 5 instead of 4")
    );
    // Einsum's equations are checked against the operands.
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &cpu()).unwrap();
    let implicit = Tensor::einsum("ij,kj", &[&m, &m]).unwrap();
    assert_eq!(implicit.to_vec::<f32>().unwrap(), [14.0, 32.0, 32.0, 77.0]);
    for (equation, needle) in [
        ("ii->i", "a label repeated in one operand"),
        ("i1->i", "Invalid character '1'"),
        ("ij,ij->i", "Expecting 2 inputs"),
        ("ijk->i", "has 3 labels for a tensor of rank 2"),
        ("ij->k", "Output label k"),
    ] {
        let refused = message(Tensor::einsum(equation, &[&m]));
        assert!(refused.contains(needle), "{equation}: {refused}");
    }
    // Resizing checks its image and options as TensorFlow does.
    let both = polytensor_core::ResizeOptions {
        align_corners: true,
        half_pixel_centers: true,
    };
    let picture = zeros(&[1, 3, 3, 1]);
    assert!(message(picture.resize_bilinear([6, 6], both))
        .contains("If half_pixel_centers is True, align_corners must be False."));
    assert!(
        message(zeros(&[3, 3, 1]).resize_nearest([2, 2], Default::default()))
            .contains("input must be 4-dimensional")
    );
    assert!(message(picture.resize_nearest([0, 2], Default::default()))
        .contains("output dimensions must be positive"));
    let doubled = picture.resize_nearest([6, 6], Default::default()).unwrap();
    assert_eq!(doubled.dims(), [1, 6, 6, 1]);
    let other = Tensor::ones([4, 2], DataType::Float, &cpu()).unwrap();
    assert!(message(Tensor::einsum("ij,jk->ik", &[&m, &other]))
        .contains("Expected dimension 3 at label j"));
    assert!(a.tile(&[usize::MAX, 2]).is_err());
}

#[test]
fn generated_tensors_allocate_on_the_device_first() {
    let small: Arc<dyn Device> = CpuDevice::with_allocator(HostAllocator::with_limit(1 << 20));
    let random = Tensor::random(
        [1 << 20],
        DataType::Float,
        polytensor_core::random::Distribution::Uniform,
        (1, 2, 0),
        &small,
    );
    assert!(matches!(
        random,
        Err(polytensor_core::Error::OutOfMemory { .. })
    ));
    assert!(Tensor::linspace(0.0, 1.0, 1 << 20, DataType::Float, &small).is_err());
    assert!(Tensor::linspace(0.0, 1.0, 0, DataType::Float, &cpu()).is_err());
    assert!(Tensor::linspace(0.0, 1.0, 3, DataType::Int32, &cpu()).is_err());
    let ints = Tensor::random(
        [3],
        DataType::Int32,
        polytensor_core::random::Distribution::Normal,
        (1, 2, 0),
        &cpu(),
    );
    assert!(ints.is_err());
}

/// The transposed convolution's composition (which devices without window kernels run: here
/// int32) agrees with the direct kernel, on geometries with strides, dilations, SAME, VALID,
/// explicit padding larger than the window, and NCHW.
#[test]
fn transposed_convolutions_compose_as_the_direct_kernel_computes() {
    let cpu = cpu();
    let cases = [
        (
            [2, 8, 7, 3],
            [3, 3, 3, 4],
            [2, 2],
            [1, 1],
            Padding::Same,
            DataFormat::Nhwc,
        ),
        (
            [1, 9, 8, 2],
            [3, 2, 2, 3],
            [2, 3],
            [1, 1],
            Padding::Valid,
            DataFormat::Nhwc,
        ),
        (
            [1, 8, 9, 3],
            [3, 3, 3, 2],
            [1, 1],
            [2, 2],
            Padding::Same,
            DataFormat::Nhwc,
        ),
        (
            [1, 10, 10, 2],
            [2, 2, 2, 2],
            [3, 3],
            [1, 1],
            Padding::Valid,
            DataFormat::Nhwc,
        ),
        (
            [2, 5, 6, 2],
            [2, 3, 2, 2],
            [2, 1],
            [1, 1],
            Padding::Explicit(vec![(3, 2), (0, 4)]),
            DataFormat::Nhwc,
        ),
        (
            [2, 3, 7, 6],
            [3, 3, 3, 4],
            [2, 2],
            [1, 1],
            Padding::Same,
            DataFormat::Nchw,
        ),
    ];
    for (image, filter, strides, dilations, padding, format) in cases {
        let options = Conv2dOptions {
            strides,
            dilations,
            padding,
            format,
        };
        // The forward convolution gives the gradient's shape.
        let x = Tensor::zeros(image, DataType::Float, &cpu).unwrap();
        let f = Tensor::zeros(filter, DataType::Float, &cpu).unwrap();
        let dims = x.conv2d(&f, &options).unwrap().dims();
        let count = |d: &[usize]| d.iter().product::<usize>();
        let ramp = |n: usize, d: &[usize]| {
            let v: Vec<i32> = (0..n as i32).map(|i| (i * 7 + 3) % 11 - 5).collect();
            Tensor::from_slice(&v, d.to_vec(), &cpu).unwrap()
        };
        let dy = ramp(count(&dims), &dims);
        let w = ramp(count(&filter), &filter);
        // int32 has no window kernel: the composition.
        let composed = dy.conv2d_backprop_input(&w, &image, &options).unwrap();
        let as_float = |t: &Tensor| t.cast(DataType::Float).unwrap();
        let direct = as_float(&dy)
            .conv2d_backprop_input(&as_float(&w), &image, &options)
            .unwrap();
        assert_eq!(composed.dims(), image, "{options:?}");
        assert_eq!(
            as_float(&composed).to_vec::<f32>().unwrap(),
            direct.to_vec::<f32>().unwrap(),
            "{options:?}"
        );
    }
}

/// `Conv2DBackpropInput`'s operands that disagree are refused with TensorFlow's messages.
#[test]
fn transposed_convolutions_refuse_what_tensorflow_refuses() {
    let options = Conv2dOptions {
        strides: [2, 2],
        padding: Padding::Same,
        ..Conv2dOptions::default()
    };
    let dy = zeros(&[1, 4, 4, 2]);
    let filter = zeros(&[3, 3, 3, 2]);
    let cases: [(&[usize], &Tensor, &Tensor, &str); 6] = [
        (&[1, 8, 8, 3], &dy, &filter, ""),
        (
            &[1, 9, 9, 3],
            &zeros(&[1, 4, 4, 2]),
            &filter,
            "Size of out_backprop doesn't match computed: actual = 4, computed = 5",
        ),
        (
            &[1, 8, 8, 4],
            &dy,
            &filter,
            "input depth must be evenly divisible by filter depth",
        ),
        (
            &[1, 8, 8, 3],
            &dy,
            &zeros(&[3, 3, 3, 5]),
            "filter and out_backprop must have the same out_depth",
        ),
        (
            &[2, 8, 8, 3],
            &dy,
            &filter,
            "input and out_backprop must have the same batch size",
        ),
        (
            &[1, 8, 8],
            &dy,
            &filter,
            "input_sizes input must be 1-dim with 4 or 2 elements",
        ),
    ];
    for (sizes, dy, filter, expected) in cases {
        let result = dy.conv2d_backprop_input(filter, sizes, &options);
        if expected.is_empty() {
            assert_eq!(result.unwrap().dims(), [1, 8, 8, 3]);
        } else {
            assert!(message(result).contains(expected), "{sizes:?}: {expected}");
        }
    }
    assert!(
        message(zeros(&[4, 4, 2]).conv2d_backprop_input(&filter, &[1, 8, 8, 3], &options))
            .contains("must be 4-dimensional")
    );
    // Every gradient pixel's 10,000 taps (the CPU's GEMM columns, 160 GB): refused, not
    // an abort.
    let refused = zeros(&[1, 2000, 2000, 1]).conv2d_backprop_input(
        &zeros(&[100, 100, 1, 1]),
        &[1, 2099, 2099, 1],
        &Conv2dOptions::default(),
    );
    assert!(refused.is_err());
}
