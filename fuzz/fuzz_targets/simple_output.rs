//! Feeds arbitrary bytes, line by line, to the `# simple` list and update
//! parsers: they may reject the input, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ral::invoke::simple::{ListParser, UpdateParser};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut list = ListParser::default();
    let mut update = UpdateParser::new("fuzz");
    for line in text.lines() {
        let _ = list.feed(line);
        let _ = update.feed(line);
    }
    let _ = list.finish();
    let _ = update.finish();
});
