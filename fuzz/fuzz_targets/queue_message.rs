//! Queue bodies may be anything a broker delivers: decoding must refuse
//! garbage with an error (so the message is dead-lettered with a reason),
//! never panic, and what it accepts must survive a round trip: the same
//! bytes again (compared as bytes, since a NaN `confidence` is not equal to
//! itself as a value).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(envelope) = dialectic_queue::decode(data) {
        let bytes = dialectic_queue::encode(&envelope);
        let again = dialectic_queue::decode(&bytes).expect("an accepted envelope re-encodes");
        assert_eq!(dialectic_queue::encode(&again), bytes);
    }
});
