//! Feeds arbitrary bytes to the json-convention document checks (get and
//! set answers): they may reject the input, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ral::invoke::json::{parse_get, parse_set};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_get(&text);
    let _ = parse_set(&text);
});
