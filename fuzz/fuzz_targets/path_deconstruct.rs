//! Storage keys come back from S3 listings and user requests: `deconstruct`
//! must never panic, and whatever it accepts must be exactly what `construct`
//! writes for that context (the inverse property the renderer relies on).
#![no_main]

use dialectic_core::paths::PathContext;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(key) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(context) = PathContext::deconstruct(key) {
        let rebuilt = context.construct().expect("an accepted key constructs");
        assert_eq!(rebuilt, key);
        assert_eq!(PathContext::deconstruct(&rebuilt).as_ref(), Ok(&context));
    }
});
