//! Parses arbitrary type expressions; whatever parses must print back to
//! the same type, and converting text with it must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ral::types::AttrType;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (expression, value) = text.split_once('\n').unwrap_or((&text, ""));
    if let Ok(parsed) = AttrType::parse(expression) {
        assert_eq!(AttrType::parse(&parsed.to_string()), Ok(parsed.clone()));
        let _ = parsed.parse_cli(value);
        let _ = parsed.parse_wire(value);
    }
});
