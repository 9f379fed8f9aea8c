//! Instantiating the WGSL helper templates of `wgsl/`: WGSL has no preprocessor and no
//! generics, so a helper written once for several types names them `${T}` (and other
//! `${NAME}` parameters), and [`instantiate`] writes it out for one set of values.

use std::fmt::Display;

/// `template` with every `${NAME}` replaced by its value from `values`.
///
/// A parameter left without a value is a bug of this crate, which debug builds (and so the
/// tests) catch.
pub fn instantiate(template: &str, values: &[(&str, &dyn Display)]) -> String {
    let mut text = template.to_string();
    for (name, value) in values {
        text = text.replace(&format!("${{{name}}}"), &value.to_string());
    }
    debug_assert!(
        !text.contains("${"),
        "a WGSL template parameter has no value: {}",
        &text[text.find("${").unwrap_or(0)..]
            .lines()
            .next()
            .unwrap_or("")
    );
    text
}

#[cfg(test)]
mod tests {
    use super::instantiate;

    #[test]
    fn every_parameter_is_replaced() {
        let text = instantiate(
            "fn f(x: ${T}) -> ${T} { return x * ${K}; }",
            &[("T", &"f32"), ("K", &2)],
        );
        assert_eq!(text, "fn f(x: f32) -> f32 { return x * 2; }");
    }

    #[test]
    #[should_panic(expected = "no value")]
    fn a_missing_parameter_is_a_bug() {
        instantiate("fn f(x: ${T})", &[]);
    }
}
