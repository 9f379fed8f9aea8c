//! Build time of one program holding N elementwise kernels (a development probe; run with
//! POCL_KERNEL_CACHE=0).
use kernels_c::elementwise::{Access, MapKernel, Variant};
use kernels_c::{expr, Dialect, Elem};
use opencl3::context::Context;
use opencl3::program::Program;
use std::time::Instant;
use tensor_core::UnaryOp;
fn main() {
    let found = backend_opencl::platform::devices().unwrap().remove(0);
    let context = Context::from_device(&found.device).unwrap();
    for n in [1usize, 4, 16] {
        let mut text = String::new();
        for (i, &op) in UnaryOp::ALL
            .iter()
            .filter(|&&o| expr::unary(o, Elem::F32).is_some())
            .take(n)
            .enumerate()
        {
            let k = MapKernel {
                inputs: vec![Access::Value(Elem::F32)],
                output: Access::Value(Elem::F32),
                expression: expr::unary(op, Elem::F32).unwrap(),
                variant: Variant::Strided,
            };
            let src = k.source(Dialect::OpenCl);
            if i == 0 {
                text += &src
                    .replace("apply(", "apply0(")
                    .replace("void map(", "void map0(");
            } else {
                let body = &src[src.find("\nFN f32 apply(").unwrap()..];
                text += &body
                    .replace("apply(", &format!("apply{i}("))
                    .replace("void map(", &format!("void map{i}("));
            }
        }
        let t = Instant::now();
        let mut p = Program::create_from_source(&context, &text).unwrap();
        p.build(&[found.device.id()], "").unwrap();
        println!("{n} kernels: build {:?}", t.elapsed());
    }
}
