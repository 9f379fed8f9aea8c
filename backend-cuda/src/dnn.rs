//! Convolutions through cuDNN (`cudnnConvolutionForward`), as TensorFlow runs them on
//! NVIDIA GPUs, where the library loads; the kit's own window kernels otherwise.
//!
//! The image and the output are NHWC tensors as they lie. TensorFlow's filter,
//! `[k_h, k_w, in, out]`, is not a layout cuDNN takes, so it is first transposed by the
//! kit's `transpose` kernel into cuDNN's NHWC filter order `[out, k_h, k_w, in]` (KRSC),
//! as TensorFlow's own GPU kernels transform it. A depthwise convolution is a grouped
//! one: one group per input channel, `multiplier` filters each (`[c * m, k_h, k_w, 1]`).
//!
//! cuDNN pads symmetrically. A convolution whose padding after differs from the padding
//! before by more than the last window leaves unused (TensorFlow's odd `SAME` padding) is
//! left to the kit's kernel (`Convolution::of` says `None`), as is a dtype cuDNN does not
//! take in NHWC, or a convolution for which it finds no algorithm.
//!
//! f32 convolves in f32 (`CUDNN_FMA_MATH`: no TF32 unless [`crate::CudaQueue::set_tf32`]
//! allows it), f16 and bf16 accumulate in f32 on tensor cores, f64 in f64.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use cudarc::cudnn::result as dnn;
use cudarc::cudnn::sys;
use polytensor_core::plan::window::{Padding, WindowGeometry};
use polytensor_core::DataType;

/// The largest workspace a convolution's algorithm may ask for (larger ones are passed
/// over for the next algorithm).
const MAX_WORKSPACE: usize = 256 << 20;

/// A cuDNN handle on the device's stream (a handle serves one call at a time), and the
/// algorithm it chose for each convolution it was given.
pub(crate) struct Dnn {
    handle: Mutex<Handle>,
    /// cuDNN's first algorithm within the workspace limit for each convolution (`None`:
    /// none), asked once: `cudnnGetConvolutionForwardAlgorithm_v7` took 1-2.5 ms a call on
    /// an H200, more than MobileNetV3's 1x1 convolutions themselves.
    chosen: Mutex<HashMap<Convolution, Option<Choice>>>,
}

/// An algorithm and the workspace it needs, in bytes.
#[derive(Clone, Copy)]
struct Choice {
    algo: sys::cudnnConvolutionFwdAlgo_t,
    memory: usize,
}

/// A raw cuDNN handle.
struct Handle(sys::cudnnHandle_t);

// SAFETY: a cuDNN handle may be used from any thread, one call at a time; the `Mutex` in
// `Dnn` serialises its calls.
unsafe impl Send for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `Dnn::new` and is destroyed once, here.
        let _ = unsafe { dnn::destroy_handle(self.0) };
    }
}

/// The sizes and types of one convolution as cuDNN takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Convolution {
    /// The image `[n, c, h, w]` (cuDNN's order of the NHWC tensor's dims).
    image: [c_int; 4],
    /// The filter `[k, c / groups, r, s]`.
    filter: [c_int; 4],
    /// The output `[n, k, p, q]`.
    output: [c_int; 4],
    /// Padding (both sides), strides and dilations, height then width.
    padding: [c_int; 2],
    strides: [c_int; 2],
    dilations: [c_int; 2],
    /// Groups: 1, or the channels of a depthwise convolution.
    groups: c_int,
    /// The tensors' type, the compute type and the math type.
    data: sys::cudnnDataType_t,
    compute: sys::cudnnDataType_t,
    math: sys::cudnnMathType_t,
}

impl Convolution {
    /// The convolution `g` describes (`depthwise` or full) on `dtype`, or `None` where
    /// cuDNN cannot take it as it is (asymmetric padding, a size past `int`, a dtype it
    /// has no NHWC convolution of).
    pub(crate) fn of(
        dtype: DataType,
        g: &WindowGeometry,
        depthwise: bool,
        tf32: bool,
    ) -> Option<Convolution> {
        use sys::cudnnDataType_t::*;
        use sys::cudnnMathType_t::*;
        let (data, compute, math) = match dtype {
            DataType::Float if tf32 => (CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH),
            DataType::Float => (CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH),
            DataType::Double => (CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_FMA_MATH),
            DataType::Half => (CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH),
            DataType::BFloat16 => (CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH),
            _ => return None,
        };
        // cuDNN's output size with `before` padding on both sides must be the geometry's.
        for d in 0..2 {
            let symmetric = Padding::Explicit(vec![(g.before[d], g.before[d])]);
            let resolved = g.windows[d].resolve(g.input[d], &symmetric, 0).ok()?;
            if resolved.output != g.output[d] {
                return None;
            }
        }
        let int = |v: usize| c_int::try_from(v).ok();
        let out_channels = if depthwise {
            g.channels.checked_mul(g.filters)?
        } else {
            g.filters
        };
        let per_group = if depthwise { 1 } else { g.channels };
        let [h, w] = g.windows;
        Some(Convolution {
            image: [
                int(g.batch)?,
                int(g.channels)?,
                int(g.input[0])?,
                int(g.input[1])?,
            ],
            filter: [
                int(out_channels)?,
                int(per_group)?,
                int(h.size)?,
                int(w.size)?,
            ],
            output: [
                int(g.batch)?,
                int(out_channels)?,
                int(g.output[0])?,
                int(g.output[1])?,
            ],
            padding: [int(g.before[0])?, int(g.before[1])?],
            strides: [int(h.stride)?, int(w.stride)?],
            dilations: [int(h.dilation)?, int(w.dilation)?],
            groups: if depthwise { int(g.channels)? } else { 1 },
            data,
            compute,
            math,
        })
    }

    /// The filter as the kit's `transpose` takes it: TensorFlow's `[rows, cols]` (taps
    /// and input channels by output channels) into cuDNN's `[cols, rows]`.
    pub(crate) fn filter_matrix(&self) -> [usize; 2] {
        let [k, c, r, s] = self.filter.map(|v| v as usize);
        [r * s * c, k]
    }
}

/// The descriptors of one call, destroyed when it ends.
struct Descriptors {
    image: sys::cudnnTensorDescriptor_t,
    output: sys::cudnnTensorDescriptor_t,
    filter: sys::cudnnFilterDescriptor_t,
    conv: sys::cudnnConvolutionDescriptor_t,
}

impl Descriptors {
    /// The descriptors of `c`, each created and set.
    fn new(c: &Convolution) -> Result<Self, String> {
        let fail = |what: &str, e: dnn::CudnnError| format!("cuDNN {what}: {e:?}");
        let mut made = Descriptors {
            image: std::ptr::null_mut(),
            output: std::ptr::null_mut(),
            filter: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
        };
        made.image = dnn::create_tensor_descriptor().map_err(|e| fail("tensor descriptor", e))?;
        made.output = dnn::create_tensor_descriptor().map_err(|e| fail("tensor descriptor", e))?;
        made.filter = dnn::create_filter_descriptor().map_err(|e| fail("filter descriptor", e))?;
        made.conv =
            dnn::create_convolution_descriptor().map_err(|e| fail("convolution descriptor", e))?;
        let nhwc = sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC;
        // SAFETY: each descriptor was created above and is destroyed only by `drop`.
        unsafe {
            dnn::set_tensor4d_descriptor(made.image, nhwc, c.data, c.image)
                .map_err(|e| fail("image descriptor", e))?;
            dnn::set_tensor4d_descriptor(made.output, nhwc, c.data, c.output)
                .map_err(|e| fail("output descriptor", e))?;
            dnn::set_filter4d_descriptor(made.filter, c.data, nhwc, c.filter)
                .map_err(|e| fail("filter descriptor", e))?;
            dnn::set_convolution2d_descriptor(
                made.conv,
                c.padding[0],
                c.padding[1],
                c.strides[0],
                c.strides[1],
                c.dilations[0],
                c.dilations[1],
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                c.compute,
            )
            .map_err(|e| fail("convolution descriptor", e))?;
            dnn::set_convolution_group_count(made.conv, c.groups)
                .map_err(|e| fail("group count", e))?;
            dnn::set_convolution_math_type(made.conv, c.math).map_err(|e| fail("math type", e))?;
        }
        Ok(made)
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // SAFETY: each non-null descriptor was created by `new` and is destroyed once.
        unsafe {
            if !self.image.is_null() {
                let _ = dnn::destroy_tensor_descriptor(self.image);
            }
            if !self.output.is_null() {
                let _ = dnn::destroy_tensor_descriptor(self.output);
            }
            if !self.filter.is_null() {
                let _ = dnn::destroy_filter_descriptor(self.filter);
            }
            if !self.conv.is_null() {
                let _ = dnn::destroy_convolution_descriptor(self.conv);
            }
        }
    }
}

/// The device addresses of a convolution's operands (first elements, offsets applied).
pub(crate) struct Addresses {
    pub image: u64,
    pub filter: u64,
    pub output: u64,
}

impl Dnn {
    /// A handle on the driver stream `stream` (of the device's context, current on this
    /// thread).
    pub(crate) fn new(stream: cudarc::driver::sys::CUstream) -> Result<Self, String> {
        let handle = dnn::create_handle().map_err(|e| format!("creating a cuDNN handle: {e:?}"))?;
        let handle = Handle(handle);
        // SAFETY: the handle is live, and the stream is the device's, which outlives it
        // (the device drops its `Dnn` before its stream).
        unsafe { dnn::set_stream(handle.0, stream as sys::cudaStream_t) }
            .map_err(|e| format!("setting cuDNN's stream: {e:?}"))?;
        Ok(Self {
            handle: Mutex::new(handle),
            chosen: Mutex::default(),
        })
    }

    /// Queue `c` on the handle's stream: `Ok(false)` where cuDNN has no algorithm for it
    /// within the workspace limit (the caller runs the kit's kernel instead).
    /// `workspace(bytes)` gives device memory of at least `bytes`, kept alive by the
    /// caller until the call is queued.
    pub(crate) fn forward<W>(
        &self,
        c: &Convolution,
        at: Addresses,
        workspace: impl FnOnce(usize) -> Result<(W, u64), String>,
    ) -> Result<bool, String> {
        let d = Descriptors::new(c)?;
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        let known = self
            .chosen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(c)
            .copied();
        let choice = match known {
            Some(choice) => choice,
            None => {
                let choice = Self::choose(&handle, &d)?;
                self.chosen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(*c, choice);
                choice
            }
        };
        let Some(choice) = choice else {
            return Ok(false);
        };
        let (_keep, space) = if choice.memory > 0 {
            let (keep, space) = workspace(choice.memory)?;
            (Some(keep), space)
        } else {
            (None, 0)
        };
        // alpha = 1 and beta = 0 in the compute type's scalar (f64 for f64, else f32).
        let (one, zero) = match c.compute {
            sys::cudnnDataType_t::CUDNN_DATA_DOUBLE => (1f64.to_ne_bytes(), [0u8; 8]),
            _ => {
                let mut one = [0u8; 8];
                one[..4].copy_from_slice(&1f32.to_ne_bytes());
                (one, [0u8; 8])
            }
        };
        // SAFETY: the handle (on the device's stream) and descriptors are live; the
        // addresses are the operands' first elements, whose extents the descriptors
        // describe and the caller checked against their buffers; the workspace holds
        // `choice.memory` bytes and stays allocated until this call is queued.
        unsafe {
            dnn::convolution_forward(
                handle.0,
                one.as_ptr() as *const c_void,
                d.image,
                at.image as *const c_void,
                d.filter,
                at.filter as *const c_void,
                d.conv,
                choice.algo,
                space as *mut c_void,
                choice.memory,
                zero.as_ptr() as *const c_void,
                d.output,
                at.output as *mut c_void,
            )
        }
        .map_err(|e| format!("cudnnConvolutionForward: {e:?}"))?;
        Ok(true)
    }

    /// cuDNN's first algorithm for the descriptors `d` whose workspace is within
    /// [`MAX_WORKSPACE`] (`None` if none is).
    fn choose(handle: &Handle, d: &Descriptors) -> Result<Option<Choice>, String> {
        const WANTED: usize =
            sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_COUNT as usize;
        // SAFETY: zeroed perf structs are valid values (plain data; enums whose zero is a
        // variant), overwritten by cuDNN below.
        let mut found: [sys::cudnnConvolutionFwdAlgoPerf_t; WANTED] = unsafe { std::mem::zeroed() };
        let mut count: c_int = 0;
        // SAFETY: the handle and descriptors are live; `found` holds `WANTED` results and
        // `count` receives how many were written.
        unsafe {
            dnn::get_convolution_forward_algorithm(
                handle.0,
                d.image,
                d.filter,
                d.conv,
                d.output,
                WANTED as c_int,
                &mut count,
                found.as_mut_ptr(),
            )
        }
        .map_err(|e| format!("cudnnGetConvolutionForwardAlgorithm_v7: {e:?}"))?;
        Ok(found[..(count.max(0) as usize).min(WANTED)]
            .iter()
            .find(|p| {
                p.status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS && p.memory <= MAX_WORKSPACE
            })
            .map(|p| Choice {
                algo: p.algo,
                memory: p.memory,
            }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polytensor_core::plan::window::Window;

    fn geometry(
        input: usize,
        size: usize,
        stride: usize,
        before: usize,
        output: usize,
    ) -> WindowGeometry {
        let w = Window {
            size,
            stride,
            dilation: 1,
        };
        WindowGeometry {
            batch: 2,
            input: [input, input],
            channels: 3,
            windows: [w, w],
            before: [before, before],
            output: [output, output],
            filters: 4,
        }
    }

    #[test]
    fn symmetric_padding_goes_to_cudnn_and_odd_same_padding_does_not() {
        // 28 by 3x3 SAME stride 1: one on each side.
        let same = geometry(28, 3, 1, 1, 28);
        let c = Convolution::of(DataType::Float, &same, false, false).unwrap();
        assert_eq!(c.image, [2, 3, 28, 28]);
        assert_eq!(c.filter, [4, 3, 3, 3]);
        assert_eq!(c.output, [2, 4, 28, 28]);
        assert_eq!(c.groups, 1);
        assert_eq!(c.filter_matrix(), [27, 4]);
        // 64 by 3x3 stride 2 SAME: nothing before, one after; cuDNN's symmetric padding of
        // 0 gives 31 outputs, not 32.
        assert!(
            Convolution::of(DataType::Float, &geometry(64, 3, 2, 0, 32), false, false).is_none()
        );
        // 14 by 3x3 stride 2 SAME: 7 outputs, 0 before and 1 after; cuDNN's symmetric 0
        // gives 6.
        assert!(
            Convolution::of(DataType::Float, &geometry(14, 3, 2, 0, 7), false, false).is_none()
        );
        // Depthwise: one group per channel, multiplier filters each.
        let dw = Convolution::of(DataType::Half, &same, true, false).unwrap();
        assert_eq!(dw.filter, [12, 1, 3, 3]);
        assert_eq!(dw.groups, 3);
        assert_eq!(dw.filter_matrix(), [9, 12]);
        // Integers are not cuDNN's.
        assert!(Convolution::of(DataType::Int32, &same, false, false).is_none());
    }
}
