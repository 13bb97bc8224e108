//! cargo-fuzz target `log`; the target itself is `leankv/tests/fuzzing/log/`, shared with the
//! stable fallback `leankv/tests/fuzz_fallback.rs`.
#![no_main]

#[path = "../../leankv/tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::fuzz_one(fuzzing::Target::Log, data));
