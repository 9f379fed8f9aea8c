//! A graph's function library: the serialized `FunctionDefLibrary` of the GraphDef the
//! graph came from, written back as read, and its functions decoded once, at import, by
//! name. A graph's functions and the functions they call share one library.

use std::collections::HashMap;

use polytensor_core::{Error, Result};

use crate::proto::{FunctionDef, FunctionDefLibrary};

/// A decoded function library and its bytes.
#[derive(Debug)]
pub(crate) struct Library {
    /// The library as read.
    pub(crate) bytes: Vec<u8>,
    functions: Vec<FunctionDef>,
    by_name: HashMap<String, usize>,
}

impl Library {
    /// The library serialized as `bytes`. `Err` for malformed bytes, and, with
    /// TensorFlow's message, for two different functions of one name (a function given
    /// twice the same is kept once).
    pub(crate) fn decode(bytes: Vec<u8>) -> Result<Library> {
        let functions = FunctionDefLibrary::decode_bytes(&bytes)?.function;
        let mut by_name = HashMap::with_capacity(functions.len());
        for (i, function) in functions.iter().enumerate() {
            let name = function
                .signature
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            if let Some(&first) = by_name.get(&name) {
                if functions[first] != *function {
                    return Err(Error::invalid(format!(
                        "Cannot add function '{name}' because a different function with the \
                         same name already exists."
                    )));
                }
                continue;
            }
            by_name.insert(name, i);
        }
        Ok(Library {
            bytes,
            functions,
            by_name,
        })
    }

    /// The function named `name`, or `None`.
    pub(crate) fn function(&self, name: &str) -> Option<&FunctionDef> {
        self.by_name.get(name).map(|&i| &self.functions[i])
    }

    /// The functions' names, in the library's order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        // (A function given twice is listed once.)
        self.functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.signature.as_ref().map(|s| (i, s.name.as_str())))
            .filter(|(i, name)| self.by_name.get(*name) == Some(i))
            .map(|(_, name)| name)
    }
}
