//! cargo-fuzz target `open_file`; the target itself is `leankv/tests/fuzzing/open_file.rs`, shared with the
//! stable fallback `leankv/tests/fuzz_fallback.rs`.
#![no_main]

#[path = "../../leankv/tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::fuzz_one(fuzzing::Target::OpenFile, data));
