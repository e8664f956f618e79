//! The `wire` fuzz target: `andes_fuzz_cases::wire` (where its checks are
//! documented) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| andes_fuzz_cases::wire::run(data));
